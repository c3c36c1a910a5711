package subagent

import (
	"fmt"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/tool"
)

// ChildOptions are an in-process child's options: the parent's route and
// limits unless override sets them, and the child's depth.
func ChildOptions(parent agent.Options, override *agent.Options, depth int) agent.Options {
	o := agent.Options{Provider: parent.Provider, Model: parent.Model, MaxTokens: parent.MaxTokens,
		MaxParallelToolCalls: parent.MaxParallelToolCalls, MaxSteps: parent.MaxSteps}
	if override != nil {
		if override.Provider != "" {
			o.Provider, o.Model = override.Provider, ""
		}
		if override.Model != "" {
			o.Model = override.Model
		}
		if override.MaxTokens != 0 {
			o.MaxTokens = override.MaxTokens
		}
		if override.MaxParallelToolCalls != 0 {
			o.MaxParallelToolCalls = override.MaxParallelToolCalls
		}
		if override.MaxSteps != 0 {
			o.MaxSteps = override.MaxSteps
		}
	}
	o.SubagentDepth = depth
	return o
}

// Compose applies a child's tool filter and persona in its unpublished
// setup window (agent.CreateOptions.Setup): filtered tools vanish from the
// child's prompt and refuse to run; the persona shadows the deployment's.
func Compose(a *agent.Agent, filter *tool.Restriction, persona *string) error {
	if filter != nil {
		if _, err := a.Tools().Restrict(*filter); err != nil {
			return err
		}
	}
	if persona != nil {
		if _, err := a.Prompt().Interpolate(*persona); err != nil {
			return fmt.Errorf("persona: %w", err)
		}
		if _, err := a.Prompt().Section(prompt.Section{Name: prompt.PersonaSection, Order: prompt.PersonaOrder, Text: *persona}); err != nil {
			return err
		}
	}
	return nil
}
