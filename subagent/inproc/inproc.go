// Package inproc is the driver shared by the in-process subagent providers
// (spawn and fork): each child is an ordinary agent with its own session,
// owned by its parent, composed in its unpublished setup window with the
// request's tool filter, persona and structured-output capture.
//
// A child's first request reuses its parent's prompt cache: it keeps the
// parent's system prompt and tool list byte for byte (no child-only tool
// among them: subagenttool offers report, which only a continuable child
// can use, to every agent, since tools precede the messages in a chat
// template), and its own instructions open its first user message. A fork
// child's first request is then its parent's conversation plus that
// message.
package inproc

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// The child-only instructions of every in-process child. They open the
// child's first user message, after everything it shares with its parent
// (system prompt, tools and, for a fork, the parent's conversation), so
// that its first request reuses the parent's cached prompt prefix.
const (
	DelegationText = "You are a subagent: another agent started you to do one self-contained task. " +
		"Your permissions are those of the agent that started you, or narrower: a call that needs approval waits for the user, " +
		"and a refused call is final, so report a limitation instead of retrying. Your final message is returned to the agent that started you: make it a complete answer."
	// ContinuableText replaces the last sentence of DelegationText for a
	// continuable child.
	ContinuableText = "When you finish, your final message is delivered to the agent that started you, which may send you more work later " +
		"in this same conversation. If you have a report tool, use it for findings that cannot wait for your final message."
	StructuredText = "Finish by calling the structured_output tool exactly once with your final result as its arguments. " +
		"That call ends your task; no other tool runs after it."
	StructuredTool = "structured_output"
)

// Config configures an in-process provider.
type Config struct {
	// Name is the registry name ("spawn" or "fork" by convention).
	Name string
	// Agents creates the children.
	Agents *agent.Registry
	// Fork seeds each child with the parent's completed turns.
	Fork bool
}

// Provider runs children in this process.
type Provider struct{ cfg Config }

// New returns a provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Name == "" || cfg.Agents == nil {
		return nil, errors.New("inproc: a provider needs a name and an agent registry")
	}
	return &Provider{cfg: cfg}, nil
}

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: every one.
func (p *Provider) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true, Policy: true}
}

// InheritsParentContext implements subagent.Provider: true for fork.
func (p *Provider) InheritsParentContext() bool { return p.cfg.Fork }

// Start creates and publishes the child, then sends it the prompt. It
// returns once the child is published; a ctx cancelled before that leaves
// nothing behind.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	parent, depth := req.Parent, req.Depth
	if err := subagent.CheckLineage(p.cfg.Name, req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	var seed []session.Event
	if p.cfg.Fork {
		seed = parent.Session().CompletedPrefix()
	}
	capture := newCapture(req.OutputSchema)
	// The setup captures what it uses, not req: a request captured whole
	// would be moved to the heap in every delegation.
	desc, shaping := req.Descriptor, Shaping{ToolFilter: req.ToolFilter, Persona: req.Persona, OutputSchema: req.OutputSchema}
	child, err := p.cfg.Agents.Create(ctx, agent.CreateOptions{
		SessionID:       uuid.NewString(),
		Cwd:             cmp.Or(req.Cwd, parent.Cwd()),
		ParentSession:   parent.ID(),
		Origin:          session.OriginSubagent,
		DelegationDepth: depth,
		Seed:            seed,
		Options:         childOptions(parent.Options(), req.AgentOptions, depth),
		Owner:           parent,
		Label:           subagent.ChildLabel(p.cfg.Name, req.Label),
		Policy:          req.Policy,
		Hooks:           req.Hooks,
		Subagent:        req.Subagent,
		Setup:           func(a *agent.Agent) error { return compose(a, desc, shaping, capture) },
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, fmt.Errorf("inproc %s: create child: %w", p.cfg.Name, err)
	}
	h := &handle{agent: child}
	r := newRun(h, capture, req.OutputSchema != nil)
	h.owner = r
	r.start(ctx, FirstMessage(req.Prompt, req.OutputSchema != nil), req.Foreground, req.Progress)
	return r, nil
}

// PrepareContinuable implements subagent.Continuer: a fork child starts
// from its parent's completed turns; every child's first message opens
// with its instructions.
func (p *Provider) PrepareContinuable(ctx context.Context, req subagent.StartRequest) (subagent.Preparation, error) {
	if err := ctx.Err(); err != nil {
		return subagent.Preparation{}, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	prep := subagent.Preparation{First: ContinuableMessage(req.Prompt), Options: childOptions(req.Parent.Options(), req.AgentOptions, req.Depth)}
	if p.cfg.Fork {
		prep.Seed = req.Parent.Session().CompletedPrefix()
	}
	return prep, nil
}

// The frame of a child's instructions in its first user message (package
// prompt owns it, so that readers of the message need not import inproc).
const (
	instructionsOpen  = prompt.ChildInstructionsOpen
	instructionsClose = prompt.ChildInstructionsClose
)

// The instructions of a child's first user message, framed.
const (
	plainInstructions       = instructionsOpen + DelegationText + instructionsClose
	structuredInstructions  = instructionsOpen + DelegationText + "\n" + StructuredText + instructionsClose
	continuableInstructions = instructionsOpen + DelegationText + "\n" + ContinuableText + instructionsClose
)

// FirstMessage is a child's first user message: a text block of its
// instructions (the delegation statement, and the structured-output one
// when structured), then the task's blocks.
func FirstMessage(task []content.Block, structured bool) content.Message {
	if structured {
		return withInstructions(structuredInstructions, task)
	}
	return withInstructions(plainInstructions, task)
}

// ContinuableMessage is a continuable child's first user message: its
// instructions, then the task's blocks.
func ContinuableMessage(task []content.Block) content.Message {
	return withInstructions(continuableInstructions, task)
}

func withInstructions(framed string, task []content.Block) content.Message {
	blocks := make([]content.Block, 0, 1+len(task))
	return content.UserMessage(append(append(blocks, content.Text(framed)), task...)...)
}

// compose runs in the child's unpublished setup window: the descriptor,
// the filter and persona, and the structured-output capture.
func compose(a *agent.Agent, desc *subagent.Descriptor, s Shaping, c *Capture) error {
	if desc != nil {
		if err := subagent.AppendDescriptor(a.Session(), *desc); err != nil {
			return err
		}
	}
	return Shape(a, s, c)
}

// The names spawn and fork providers are registered under by default.
const (
	SpawnName = "spawn"
	ForkName  = "fork"
)

// NewSpawn returns a spawn provider: fresh children that do not see the
// parent's conversation.
func NewSpawn(agents *agent.Registry) (*Provider, error) {
	return New(Config{Name: SpawnName, Agents: agents})
}

// NewFork returns a fork provider: children seeded with the parent's
// completed turns.
func NewFork(agents *agent.Registry) (*Provider, error) {
	return New(Config{Name: ForkName, Agents: agents, Fork: true})
}
