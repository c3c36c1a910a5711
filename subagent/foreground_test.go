package subagent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// countingProvider counts the Waits of its scripted runs.
type countingProvider struct {
	*subagenttest.Provider
	waits atomic.Int32
}

type countingRun struct {
	subagent.Run
	p *countingProvider
}

func (r countingRun) Wait(ctx context.Context) (subagent.Result, error) {
	r.p.waits.Add(1)
	return r.Run.Wait(ctx)
}

// AfterSettle keeps the scripted run's notification, which embedding the
// Run interface would hide.
func (r countingRun) AfterSettle(fn func(subagent.Result)) {
	r.Run.(subagent.SettleNotifier).AfterSettle(fn)
}

func (p *countingProvider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	run, err := p.Provider.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return countingRun{Run: run, p: p}, nil
}

func TestDelegateIsTheOnlyForegroundStart(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	p := &countingProvider{Provider: &subagenttest.Provider{ProviderName: "p", Default: subagenttest.Script{}}}
	f.register(p)

	req := f.req("task")
	req.Foreground = true // a caller's promise Start does not trust
	run, err := f.svc.Start(context.Background(), "p", req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}

	var started string
	del, err := f.svc.Delegate(context.Background(), "p", f.req("task"), subagent.DelegateOptions{Started: func(id string) { started = id }})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := del.Wait(context.Background()); res.StopReason != subagent.Completed || started == "" || started != del.ChildID {
		t.Fatalf("Delegate = %+v, %+v (started %q)", del, res, started)
	}
	reqs := p.Requests()
	if len(reqs) != 2 || reqs[0].Foreground || !reqs[1].Foreground {
		t.Fatalf("foreground flags of the two starts: %v, %v; want false (Start), true (Delegate)", reqs[0].Foreground, reqs[1].Foreground)
	}
	// One Wait per run: the caller's. The service learns each end from
	// the run's settlement, not from a Wait of its own.
	if n := p.waits.Load(); n != 2 {
		t.Fatalf("%d Waits for two runs waited once each", n)
	}
	ends := 0
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if end, ok := e.(subagent.Ended); ok && end.StopReason == subagent.Completed {
			ends++
		}
	}
	if ends != 2 {
		t.Fatalf("%d completed end events, want 2", ends)
	}
}

func TestDelegateReportsARefusedStart(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	called := false
	del, err := f.svc.Delegate(context.Background(), "missing", f.req("task"), subagent.DelegateOptions{Started: func(string) { called = true }})
	if del != nil || called || !errors.Is(err, subagent.ErrNoProvider) {
		t.Fatalf("Delegate to no provider = %v, %v (started called: %v); want NO_PROVIDER and no delegation", del, err, called)
	}
}
