// Package localchild holds what the seam and the in-process providers
// share to build and read a child agent that runs in this process: its
// options, its tool filter and persona, and its final output.
package localchild

import (
	"cmp"
	"fmt"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// Options are an in-process child's options: the parent's route and
// limits unless override sets them (a step cap no higher than the
// parent's), and the child's depth.
func Options(parent agent.Options, override *agent.Options, depth int) agent.Options {
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
		if override.MaxSteps != 0 { // never above the parent's cap: caps only narrow down the tree
			o.MaxSteps = min(override.MaxSteps, cmp.Or(parent.MaxSteps, agent.DefaultMaxSteps))
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

// FinalOutput selects a child's output from its own events (never from a
// seed): the content of the last assistant message with content; else the
// text it streamed, as one text block; else nothing.
func FinalOutput(events []session.Event) []content.Block {
	for i := len(events) - 1; i >= 0; i-- {
		if m, ok := events[i].Data.(session.AssistantMessage); ok && len(m.Message.Content) > 0 {
			return m.Message.Content
		}
	}
	var streamed []byte
	for _, e := range events {
		if c, ok := e.Data.(session.AssistantChunk); ok && c.Chunk.Type == content.ChunkTextDelta {
			streamed = append(streamed, c.Chunk.Text...)
		}
	}
	if len(streamed) > 0 {
		return []content.Block{content.Text(string(streamed))}
	}
	return nil
}
