package inproc

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// Builder builds the agents of continuable children for the service
// (subagent.ChildBuilder): fresh, with its descriptor written first into
// its log, or rebuilt from its log; either way with the descriptor's tool
// filter and persona applied as Start applies a request's. It is the only
// place besides Start and StartDetached where a child agent is made.
type Builder struct{ agents *agent.Registry }

// NewBuilder returns the builder of continuable children over agents.
func NewBuilder(agents *agent.Registry) (*Builder, error) {
	if agents == nil {
		return nil, errors.New("inproc: a builder needs an agent registry")
	}
	return &Builder{agents: agents}, nil
}

// BuildChild implements subagent.ChildBuilder.
func (b *Builder) BuildChild(ctx context.Context, opts agent.CreateOptions, desc subagent.Descriptor, fresh bool) (*agent.Agent, error) {
	opts.Setup = func(a *agent.Agent) error {
		if fresh {
			if err := subagent.AppendDescriptor(a.Session(), desc); err != nil {
				return err
			}
		}
		return composeChild(a, desc.ToolFilter, desc.Persona)
	}
	return b.agents.Create(ctx, opts)
}

// childOptions are an in-process child's options: the parent's route and
// limits unless override sets them (a step cap no higher than the
// parent's), and the child's depth.
func childOptions(parent agent.Options, override *agent.Options, depth int) agent.Options {
	o := agent.Options{Provider: parent.Provider, Model: parent.Model, MaxTokens: parent.MaxTokens,
		MaxParallelToolCalls: parent.MaxParallelToolCalls, MaxSteps: parent.MaxSteps, CompactAt: parent.CompactAt,
		MaxDelegationDepth: parent.MaxDelegationDepth}
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
		if override.MaxSteps != 0 { // never above the parent's cap: caps only narrow down the tree
			o.MaxSteps = min(override.MaxSteps, cmp.Or(parent.MaxSteps, agent.DefaultMaxSteps))
		}
	}
	o.SubagentDepth = depth
	return o
}

// composeChild applies a child's tool filter and persona in its
// unpublished setup window (agent.CreateOptions.Setup): filtered tools
// vanish from the child's prompt and refuse to run; the persona shadows
// the deployment's.
func composeChild(a *agent.Agent, filter *tool.Restriction, persona *string) error {
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
