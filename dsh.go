// Package dsh is an agent harness whose centrepiece is the subagent seam.
// A Runtime holds every service of one harness instance: the event bus,
// sessions, model adapters, tools, prompt sections and agents.
package dsh

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/continuable"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool"
)

// Identity is the one-line harness identity that opens every system prompt.
const Identity = "You are dsh, a coding agent. Work in the session's working directory with the tools provided, and answer concisely."

// Runtime is one harness instance. Build it with New; every registration on
// its services returns a disposer.
type Runtime struct {
	Log       *slog.Logger
	Events    *event.Bus
	Sessions  *session.Store
	LLM       *llm.Registry
	Tools     *tool.Registry
	Prompt    *prompt.Registry
	Agents    *agent.Registry
	Subagents *subagent.Service
	Tasks     *task.Runtime
	// Tracer makes the runtime's spans (nil: tracing is off).
	Tracer *telemetry.Tracer

	mu      sync.Mutex
	closers []func(context.Context) error
}

// Options configure New.
type Options struct {
	Logger  *slog.Logger    // default slog.Default()
	Backend session.Backend // default in memory
	// Persona is the deployment:persona prompt section (empty: none).
	Persona string
	// MaxTasksPerOwner caps an agent's running background tasks
	// (default task.DefaultMaxPerOwner).
	MaxTasksPerOwner int
	// Hooks are the hooks of every top-level agent, and through them of
	// their children (nil: none).
	Hooks *hook.Set
	// Tracer makes spans of turns, model calls, tool calls and child runs
	// (nil: none; see package telemetry).
	Tracer *telemetry.Tracer
}

// New builds a runtime with the harness identity section registered.
func New(opts Options) (*Runtime, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	bus := event.New(log)
	rt := &Runtime{Log: log, Events: bus, Sessions: session.NewStore(opts.Backend, bus), LLM: llm.NewRegistry(),
		Tools: tool.NewRegistry(), Prompt: prompt.NewRegistry(), Tracer: opts.Tracer}
	rt.Agents = agent.NewRegistry(agent.Deps{Sessions: rt.Sessions, LLM: rt.LLM, Tools: rt.Tools, Prompt: rt.Prompt,
		Events: bus, Log: log, Hooks: opts.Hooks, Tracer: opts.Tracer})
	rt.Subagents = subagent.NewService(bus, log)
	rt.Subagents.Trace(opts.Tracer)
	build, err := inproc.NewBuilder(rt.Agents)
	if err != nil {
		return nil, err
	}
	continuable.Serve(rt.Subagents, rt.Agents, rt.Sessions, build)
	rt.Tasks = task.New(bus, log, opts.MaxTasksPerOwner)
	if _, err := rt.Prompt.Section(prompt.Section{Name: prompt.IdentitySection, Order: prompt.IdentityOrder, Text: Identity}); err != nil {
		return nil, err
	}
	if opts.Persona != "" {
		if _, err := rt.Prompt.Section(prompt.Section{Name: prompt.PersonaSection, Order: prompt.PersonaOrder, Text: opts.Persona}); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// OnClose registers fn to run when the runtime closes, after its agents
// and tasks have stopped, for a service that outlives every agent (such as
// the connections to MCP servers). They run in reverse order of
// registration.
func (rt *Runtime) OnClose(fn func(ctx context.Context) error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.closers = append(rt.closers, fn)
}

// Close tears down the resident continuable children (their logs stay, to
// be continued later), disposes every agent (which cancels their tasks and
// children and flushes their sessions), stops any task left, then runs the
// OnClose functions.
func (rt *Runtime) Close(ctx context.Context) error {
	errs := []error{rt.Subagents.Drain(ctx), rt.Agents.DisposeAll(ctx), rt.Tasks.Close(ctx)}
	rt.mu.Lock()
	closers := rt.closers
	rt.closers = nil
	rt.mu.Unlock()
	for _, fn := range slices.Backward(closers) {
		errs = append(errs, fn(ctx))
	}
	return errors.Join(errs...)
}
