package subagenttest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/subagent"
)

// The prompts the conformance suite sends. A provider under test must be
// set up so that a child given PromptComplete completes with non-empty
// output, one given PromptHang keeps working until cancelled, and one given
// PromptFail ends with a stop reason other than completed.
const (
	PromptComplete = "conformance: complete"
	PromptHang     = "conformance: hang"
	PromptFail     = "conformance: fail"
)

// Harness sets up a provider for the conformance suite.
type Harness struct {
	// New returns the provider under test and the parent agent to
	// delegate from, fresh for each scenario.
	New func(t *testing.T) (subagent.Provider, *agent.Agent)
	// Leftovers, when set, reports anything a scenario left behind after
	// its runs were disposed (child sessions, agents, processes).
	Leftovers func() error
	// Timeout bounds each wait of the suite (default 30s); reaching it is
	// a failure, never a pass.
	Timeout time.Duration
	// Serve, when set, makes each scenario's service continue children
	// (continuable.Serve over the parent's agents and a store whose
	// sessions outlive the process): the road scenarios then also delegate
	// continuable children, as a default `dsh run` does.
	Serve func(t *testing.T, svc *subagent.Service)
	// Shape, when set, adds to every request of the suite the start-time
	// capabilities the provider is run with (persona, tool filter, output
	// schema, depth cap): the contract must hold with them too.
	Shape func(req *subagent.StartRequest)
}

// Conformance runs the contract every subagent.Provider must honour:
// a request without the parent and depth the service sets is refused,
// readiness before Start returns, cancellation before readiness leaves
// nothing behind, cancellation after readiness settles aborted, Dispose is
// idempotent and quiescent, child failures are stop reasons rather than
// errors, concurrent runs are independent, lifecycle events pair up, and no
// goroutine outlives its run.
func Conformance(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 30 * time.Second
	}
	scenario := func(name string, fn func(t *testing.T, c *conformanceEnv)) {
		t.Run(name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			p, parent := h.New(t)
			bus := event.New(nil)
			svc := subagent.NewService(bus, nil)
			if _, err := svc.Register(p); err != nil {
				t.Fatal(err)
			}
			c := &conformanceEnv{t: t, h: h, svc: svc, provider: p, parent: parent}
			if h.Serve != nil {
				h.Serve(t, svc)
			}
			bus.Subscribe(c.record)
			fn(t, c)
			if h.Leftovers != nil {
				if err := h.Leftovers(); err != nil {
					t.Errorf("left behind: %v", err)
				}
			}
			goleak.VerifyNone(t, ignore)
		})
	}

	scenario("ReadyBeforeReturn", func(t *testing.T, c *conformanceEnv) {
		run := c.start(context.Background(), PromptComplete)
		if run.ID() == "" {
			t.Fatal("run has no id")
		}
		if a := run.LocalAgent(); a != nil {
			if a.ID() != run.ID() {
				t.Errorf("local run id %q differs from its child's id %q", run.ID(), a.ID())
			}
			if h := a.Session().Header(); h.ParentSession != c.parent.ID() || h.DelegationDepth != c.parent.Depth()+1 {
				t.Errorf("child header %+v: want parent %s, depth %d", h, c.parent.ID(), c.parent.Depth()+1)
			}
		}
		res := c.wait(run)
		if res.StopReason != subagent.Completed || len(res.Output) == 0 {
			t.Errorf("result %+v: want completed with output", res)
		}
		c.dispose(run)
		c.dispose(run)
	})

	scenario("CancelBeforeReady", func(t *testing.T, c *conformanceEnv) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		run, err := c.provider.Start(ctx, c.request(PromptComplete))
		if err == nil {
			c.dispose(run)
			t.Fatal("start with a cancelled ctx succeeded")
		}
		if !errors.Is(err, subagent.ErrAbortedBeforeReady) && !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v: want ABORTED_BEFORE_READY or context.Canceled", err)
		}
	})

	scenario("RequestWithoutLineage", func(t *testing.T, c *conformanceEnv) {
		for name, req := range map[string]subagent.StartRequest{
			"no parent": {Prompt: Prompt(PromptComplete), Depth: 1},
			"no depth":  {Prompt: Prompt(PromptComplete), Parent: c.parent},
		} {
			run, err := c.provider.Start(context.Background(), req)
			if err == nil {
				c.dispose(run)
				t.Fatalf("%s: start succeeded", name)
			}
			if !errors.Is(err, subagent.ErrInvalidRequest) {
				t.Errorf("%s: err = %v: want INVALID_REQUEST", name, err)
			}
		}
	})

	scenario("CancelAfterReady", func(t *testing.T, c *conformanceEnv) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		run := c.start(ctx, PromptHang)
		cancel()
		if res := c.wait(run); res.StopReason != subagent.Aborted {
			t.Errorf("stop reason %q after cancel: want aborted", res.StopReason)
		}
		c.dispose(run)
	})

	scenario("DisposeIsIdempotentAndQuiescent", func(t *testing.T, c *conformanceEnv) {
		run := c.start(context.Background(), PromptHang)
		c.dispose(run)
		select {
		case <-run.Done():
		default:
			t.Fatal("Done is open after Dispose returned")
		}
		if res := c.wait(run); res.StopReason != subagent.Aborted {
			t.Errorf("stop reason %q after dispose: want aborted", res.StopReason)
		}
		c.dispose(run)
	})

	scenario("ChildFailureIsAStopReason", func(t *testing.T, c *conformanceEnv) {
		run := c.start(context.Background(), PromptFail)
		if res := c.wait(run); res.StopReason == subagent.Completed {
			t.Errorf("failing child reported completed")
		}
		c.dispose(run)
	})

	scenario("ConcurrentRunsAreIndependent", func(t *testing.T, c *conformanceEnv) {
		ctxA, cancelA := context.WithCancel(context.Background())
		defer cancelA()
		var runs [3]subagent.Run
		var wg sync.WaitGroup
		for i, spec := range []struct {
			ctx    context.Context
			prompt string
		}{{ctxA, PromptHang}, {context.Background(), PromptHang}, {context.Background(), PromptComplete}} {
			wg.Go(func() { runs[i] = c.start(spec.ctx, spec.prompt) })
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		cancelA()
		if res := c.wait(runs[0]); res.StopReason != subagent.Aborted {
			t.Errorf("cancelled run: %q, want aborted", res.StopReason)
		}
		if res := c.wait(runs[2]); res.StopReason != subagent.Completed {
			t.Errorf("sibling run: %q, want completed", res.StopReason)
		}
		select {
		case <-runs[1].Done():
			t.Error("cancelling one run settled a sibling")
		default:
		}
		for _, r := range runs {
			c.dispose(r)
		}
		if res := c.wait(runs[1]); res.StopReason != subagent.Aborted {
			t.Errorf("disposed hung run: %q, want aborted", res.StopReason)
		}
	})

	scenario("LifecycleEventsPairThroughTheService", func(t *testing.T, c *conformanceEnv) {
		var runs []subagent.Run
		for _, prompt := range []string{PromptComplete, PromptFail, PromptHang} {
			run, err := c.svc.Start(context.Background(), c.provider.Name(), c.request(prompt))
			if err != nil {
				t.Fatalf("start %q: %v", prompt, err)
			}
			runs = append(runs, run)
		}
		for _, r := range runs {
			c.dispose(r)
		}
		c.checkEvents(len(runs))
	})

	// The road: Service.Delegate, as the subagent tool and dsh mcp call it,
	// one-shot and, where the service and provider can, continuable.
	road := func(name string, fn func(t *testing.T, c *conformanceEnv, opts subagent.DelegateOptions)) {
		for _, continuable := range []bool{false, true} {
			label := name + "/oneshot"
			if continuable {
				label = name + "/continuable"
			}
			scenario(label, func(t *testing.T, c *conformanceEnv) {
				if continuable && !c.svc.CanContinue(c.provider.Name()) {
					t.Skip("the provider or the harness's store cannot continue children")
				}
				fn(t, c, subagent.DelegateOptions{Continuable: continuable})
			})
		}
	}

	road("RoadForeground", func(t *testing.T, c *conformanceEnv, opts subagent.DelegateOptions) {
		var started string
		opts.Started = func(id string) { started = id }
		del, err := c.svc.Delegate(context.Background(), c.provider.Name(), c.request(PromptComplete), opts)
		if err != nil {
			t.Fatal(err)
		}
		res := c.settled(del)
		if res.StopReason != subagent.Completed || len(res.Output) == 0 || res.Teardown != nil {
			t.Errorf("result %+v: want completed with output", res)
		}
		if started == "" || started != del.ChildID || del.Continuable != opts.Continuable {
			t.Errorf("delegation %+v (started %q)", del, started)
		}
		failed, err := c.svc.Delegate(context.Background(), c.provider.Name(), c.request(PromptFail), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res := c.settled(failed); res.StopReason == subagent.Completed {
			t.Error("a failing child settled completed")
		}
		c.checkEvents(2)
	})

	road("RoadForegroundCancel", func(t *testing.T, c *conformanceEnv, opts subagent.DelegateOptions) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opts.Started = func(string) { cancel() }
		del, err := c.svc.Delegate(ctx, c.provider.Name(), c.request(PromptHang), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res := c.settled(del); res.StopReason != subagent.Aborted {
			t.Errorf("stop reason %q after the caller's cancel: want aborted", res.StopReason)
		}
		c.checkEvents(1)
	})

	road("RoadBackground", func(t *testing.T, c *conformanceEnv, opts subagent.DelegateOptions) {
		opts.Background = true
		settled := make(chan subagent.Result, 1)
		opts.Settled = func(res subagent.Result) { settled <- res }
		done, err := c.svc.Delegate(context.Background(), c.provider.Name(), c.request(PromptComplete), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res := c.settled(done); res.StopReason != subagent.Completed {
			t.Errorf("background child: %q, want completed", res.StopReason)
		}
		if res := <-settled; res.StopReason != subagent.Completed {
			t.Errorf("Settled heard %q", res.StopReason)
		}
		hung, err := c.svc.Delegate(context.Background(), c.provider.Name(), c.request(PromptHang), opts)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-hung.Done():
			t.Fatal("a hanging background child settled on its own")
		default:
		}
		hung.Stop()
		if res := c.settled(hung); res.StopReason != subagent.Aborted {
			t.Errorf("stopped background child: %q, want aborted", res.StopReason)
		}
		c.checkEvents(2)
	})
}

// conformanceEnv is one scenario's service and recorded events.
type conformanceEnv struct {
	t        *testing.T
	h        Harness
	svc      *subagent.Service
	provider subagent.Provider
	parent   *agent.Agent

	mu     sync.Mutex
	events []event.Event
}

func (c *conformanceEnv) record(e event.Event) {
	switch e.(type) {
	case subagent.Started, subagent.Ended:
		c.mu.Lock()
		c.events = append(c.events, e)
		c.mu.Unlock()
	}
}

// request is what the service would pass the provider for prompt.
func (c *conformanceEnv) request(prompt string) subagent.StartRequest {
	req := subagent.StartRequest{Prompt: Prompt(prompt), Parent: c.parent, Label: prompt, Depth: c.parent.Depth() + 1}
	if c.h.Shape != nil {
		c.h.Shape(&req)
	}
	return req
}

// start calls the provider directly, so that the service's wrapper cannot
// hide a provider's faults.
func (c *conformanceEnv) start(ctx context.Context, prompt string) subagent.Run {
	c.t.Helper()
	run, err := c.provider.Start(ctx, c.request(prompt))
	if err != nil {
		c.t.Fatalf("start %q: %v", prompt, err)
	}
	if run == nil {
		c.t.Fatalf("start %q returned no run", prompt)
	}
	return run
}

func (c *conformanceEnv) wait(run subagent.Run) subagent.Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.h.Timeout)
	defer cancel()
	res, err := run.Wait(ctx)
	if err != nil {
		c.t.Fatalf("wait %s: %v", run.ID(), err)
	}
	return res
}

// settled waits for a delegation's first settlement (by then its end is
// announced and a one-shot child disposed, a continuable one released).
func (c *conformanceEnv) settled(del *subagent.Delegation) subagent.Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.h.Timeout)
	defer cancel()
	res, err := del.Wait(ctx)
	if err != nil {
		c.t.Fatalf("wait %s: %v", del.ChildID, err)
	}
	return res
}

func (c *conformanceEnv) dispose(run subagent.Run) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.h.Timeout)
	defer cancel()
	if err := run.Dispose(ctx); err != nil {
		c.t.Fatalf("dispose %s: %v", run.ID(), err)
	}
}

// checkEvents asserts that every accepted run produced exactly one start and
// one end, in that order, with the same identity.
func (c *conformanceEnv) checkEvents(accepted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	started := map[string]subagent.RunInfo{}
	ended := map[string]bool{}
	for _, e := range c.events {
		switch e := e.(type) {
		case subagent.Started:
			if _, dup := started[e.RunID]; dup {
				c.t.Errorf("run %s started twice", e.RunID)
			}
			started[e.RunID] = e.RunInfo
		case subagent.Ended:
			info, ok := started[e.RunID]
			switch {
			case !ok:
				c.t.Errorf("run %s ended without a start", e.RunID)
			case ended[e.RunID]:
				c.t.Errorf("run %s ended twice", e.RunID)
			case info != e.RunInfo:
				c.t.Errorf("run %s: end identity %+v differs from start %+v", e.RunID, e.RunInfo, info)
			}
			ended[e.RunID] = true
		}
	}
	if len(started) != accepted || len(ended) != accepted {
		c.t.Errorf("%d runs accepted, %d started and %d ended events", accepted, len(started), len(ended))
	}
}
