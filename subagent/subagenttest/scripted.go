// Package subagenttest is the test kit of the subagent seam: a scripted
// provider, a parent-agent fixture, and the conformance suite every
// Provider implementation must pass.
package subagenttest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// Script is how a scripted run behaves.
type Script struct {
	// ReadyDelay delays readiness; Gate, when non-nil, delays it until
	// closed. Cancelling the start ctx meanwhile fails the start.
	ReadyDelay time.Duration
	Gate       <-chan struct{}
	// FailStart fails the start before readiness.
	FailStart error
	// Result is what the run settles with (StopReason defaults to completed).
	Result subagent.Result
	// Hang keeps the run going until it is cancelled or disposed; it then
	// settles aborted, keeping Result.Output as the partial output.
	Hang bool
}

// Provider is a scripted subagent.Provider: a remote-style child (no local
// agent) whose behaviour follows a Script chosen by the prompt's text.
type Provider struct {
	ProviderName string
	Caps         subagent.Capabilities
	Inherits     bool
	Default      Script
	ByPrompt     map[string]Script // keyed by the prompt's joined text

	mu       sync.Mutex
	starts   int
	requests []subagent.StartRequest
}

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.ProviderName }

// Capabilities implements subagent.Provider.
func (p *Provider) Capabilities() subagent.Capabilities { return p.Caps }

// InheritsParentContext implements subagent.Provider.
func (p *Provider) InheritsParentContext() bool { return p.Inherits }

// Starts returns how many times Start was called.
func (p *Provider) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Requests returns the requests Start received.
func (p *Provider) Requests() []subagent.StartRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]subagent.StartRequest(nil), p.requests...)
}

// Start implements subagent.Provider.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	if err := subagent.CheckLineage(p.ProviderName, req); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.starts++
	n := p.starts
	p.requests = append(p.requests, req)
	s, ok := p.ByPrompt[content.JoinText(req.Prompt)]
	if !ok {
		s = p.Default
	}
	p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, subagent.AbortedBeforeReady(p.ProviderName, context.Cause(ctx))
	}
	if s.ReadyDelay > 0 || s.Gate != nil {
		var delay <-chan time.Time
		if s.ReadyDelay > 0 {
			timer := time.NewTimer(s.ReadyDelay)
			defer timer.Stop()
			delay = timer.C
		}
		select {
		case <-delay:
		case <-s.Gate:
		case <-ctx.Done():
			return nil, subagent.AbortedBeforeReady(p.ProviderName, context.Cause(ctx))
		}
	}
	if s.FailStart != nil {
		return nil, s.FailStart
	}
	r := &run{id: fmt.Sprintf("%s-%d", p.ProviderName, n), disposed: make(chan struct{})}
	go r.play(ctx, s, req.Progress)
	return r, nil
}

// run is one scripted run.
type run struct {
	subagent.Settlement
	id       string
	disposed chan struct{}
	once     sync.Once
}

func (r *run) play(ctx context.Context, s Script, progress func(subagent.Progress)) {
	report := func(p subagent.Progress) {
		if progress != nil {
			progress(p)
		}
	}
	report(subagent.Progress{Kind: subagent.ProgressTurnStart, Turn: 1})
	if text := content.JoinText(s.Result.Output); text != "" {
		report(subagent.Progress{Kind: subagent.ProgressText, Turn: 1, Text: text})
	}
	res := s.Result
	if res.StopReason == "" {
		res.StopReason = subagent.Completed
	}
	if s.Hang {
		select {
		case <-ctx.Done():
		case <-r.disposed:
		}
		res.StopReason = subagent.Aborted
	}
	report(subagent.Progress{Kind: subagent.ProgressTurnEnd, Turn: 1, Text: string(res.StopReason)})
	r.Settle(res)
}

// ID implements subagent.Run.
func (r *run) ID() string { return r.id }

// LocalAgent implements subagent.Run: scripted runs are remote-style.
func (r *run) LocalAgent() *agent.Agent { return nil }

// Dispose implements subagent.Run.
func (r *run) Dispose(ctx context.Context) error {
	r.once.Do(func() { close(r.disposed) })
	_, err := r.Wait(ctx)
	return err
}

// Parent is a minimal runtime around one top-level agent, for tests that
// need a delegating parent.
type Parent struct {
	Agent    *agent.Agent
	Agents   *agent.Registry
	Sessions *session.Store
	Tools    *tool.Registry
	Prompt   *prompt.Registry
	LLM      *llm.Registry
	Events   *event.Bus
}

// NewParent builds a Parent whose agent uses model under provider "test"
// (a model answering "ok" forever when nil), with the given header depth
// and runtime options. Everything is disposed when the test ends.
func NewParent(t testing.TB, model llm.Model, depth int, opts agent.Options) *Parent {
	t.Helper()
	return NewParentOn(t, nil, model, depth, opts)
}

// NewParentOn is NewParent with its sessions kept by backend (nil: in
// memory): a jsonl backend makes the default road of a CLI run.
func NewParentOn(t testing.TB, backend session.Backend, model llm.Model, depth int, opts agent.Options) *Parent {
	t.Helper()
	if model == nil {
		model = scripted.Repeat(scripted.Text("ok"))
	}
	bus := event.New(nil)
	p := &Parent{Sessions: session.NewStore(backend, bus), Tools: tool.NewRegistry(), Prompt: prompt.NewRegistry(),
		LLM: llm.NewRegistry(), Events: bus}
	if _, err := p.LLM.Register("test", model); err != nil {
		t.Fatal(err)
	}
	p.Agents = agent.NewRegistry(agent.Deps{Sessions: p.Sessions, LLM: p.LLM, Tools: p.Tools, Prompt: p.Prompt, Events: bus})
	if opts.Provider == "" {
		opts.Provider = "test"
	}
	a, err := p.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), DelegationDepth: depth, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	p.Agent = a
	t.Cleanup(func() {
		if err := p.Agents.DisposeAll(context.Background()); err != nil {
			t.Errorf("dispose agents: %v", err)
		}
	})
	return p
}

// Prompt returns a one-text-block prompt.
func Prompt(s string) []content.Block { return []content.Block{content.Text(strings.TrimSpace(s))} }

// PolicyParent returns a parent agent (on a NewParent runtime) whose
// permission policy is rules and whose tree's asks go to asker (nil: asks
// are refused).
func PolicyParent(t testing.TB, rules permission.Rules, asker permission.Asker) *agent.Agent {
	t.Helper()
	p := NewParent(t, nil, 0, agent.Options{})
	policy, err := permission.New(rules)
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"},
		Policy: &policy, Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
