package acpchild_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// poolConfig is the self-loop config against srv with pool.
func poolConfig(t *testing.T, srv *httptest.Server, pool childproc.Pool) acpchild.Config {
	cfg := selfLoop(t, srv)
	cfg.Pool = &pool
	return cfg
}

func size(n int) *int { return &n }

// parents holds one parent agent per test: a parent's working directory
// is part of its children's launch identity.
var parents sync.Map

// startOn starts a child on p with prompt, from the test's parent.
func startOn(t *testing.T, p *acpchild.Provider, ctx context.Context, prompt string) subagent.Run {
	t.Helper()
	run, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt(prompt), Parent: parentOf(t), Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// parentOf returns the test's parent agent.
func parentOf(t *testing.T) *agent.Agent {
	if a, ok := parents.Load(t.Name()); ok {
		return a.(*agent.Agent)
	}
	a := subagenttest.ParentAgent(t)
	parents.Store(t.Name(), a)
	t.Cleanup(func() { parents.Delete(t.Name()) })
	return a
}

// stats checks what p's pool holds and has started.
func stats(t *testing.T, p *acpchild.Provider, held, started int) {
	t.Helper()
	if h, s := acpchild.PoolStats(p); h != held || s != started {
		t.Fatalf("the pool holds %d processes and started %d; want %d and %d", h, s, held, started)
	}
}

// sessionLogs counts the session logs under a dsh home.
func sessionLogs(t *testing.T, home string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(home, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") && strings.Contains(path, "sessions") {
			n++
		}
		return nil
	})
	return n
}

// Fifty children one after another run in fifty sessions of one warm
// `dsh acp` process: one process start, each answer its own.
func TestPoolFiftySequentialChildrenOneProcess(t *testing.T) {
	srv := modelServer(t)
	ignore := goleak.IgnoreCurrent()
	cfg := poolConfig(t, srv, childproc.Pool{Size: size(1)})
	p := newProvider(t, cfg)
	pid := 0
	for i := range 50 {
		run := startOn(t, p, context.Background(), fmt.Sprintf("task %d", i))
		if pid == 0 {
			pid = acpchild.ProcessPID(run)
		} else if got := acpchild.ProcessPID(run); got != pid {
			t.Fatalf("child %d ran in process %d, not the warm %d", i, got, pid)
		}
		res := subagenttest.Wait(t, run)
		if err := run.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("done: task %d", i); res.StopReason != subagent.Completed || content.JoinText(res.Output) != want {
			t.Fatalf("child %d: %+v", i, res)
		}
	}
	stats(t, p, 1, 1)
	if n := len(children()); n != 1 {
		t.Fatalf("%d child processes after 50 children: %v", n, children())
	}
	if n := sessionLogs(t, cfg.Env["DSH_HOME"]); n != 50 {
		t.Errorf("the warm process wrote %d session logs, want 50", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	goleak.VerifyNone(t, ignore)
}

// Twenty children at once share one warm process, each in its own session.
func TestPoolTwentyParallelChildrenOneProcess(t *testing.T) {
	srv := modelServer(t)
	ignore := goleak.IgnoreCurrent()
	p := newProvider(t, poolConfig(t, srv, childproc.Pool{Size: size(1)}))
	parent := parentOf(t)
	var wg sync.WaitGroup
	pids := make([]int, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() {
			run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt(fmt.Sprintf("task %d", i)),
				Parent: parent, Depth: 1})
			if err != nil {
				errs[i] = err
				return
			}
			pids[i] = acpchild.ProcessPID(run)
			res := subagenttest.Wait(t, run)
			errs[i] = run.Dispose(context.Background())
			if want := fmt.Sprintf("done: task %d", i); res.StopReason != subagent.Completed || content.JoinText(res.Output) != want {
				errs[i] = fmt.Errorf("child %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		if pids[i] != pids[0] {
			t.Fatalf("child %d ran in process %d, child 0 in %d", i, pids[i], pids[0])
		}
	}
	stats(t, p, 1, 1)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	goleak.VerifyNone(t, ignore)
}

// hangServer is a model server whose PromptHang requests hang, each
// announced on the returned channel.
func hangServer(t *testing.T) (srv *httptest.Server, hung <-chan struct{}) {
	ch := make(chan struct{}, 64)
	return hangingModelServer(t, ch), ch
}

// Cancelling and disposing one child of a warm process leaves the others
// running in it, and the process takes the next child.
func TestPoolCancelAndDisposeOneChild(t *testing.T) {
	srv, hung := hangServer(t)
	p := newProvider(t, poolConfig(t, srv, childproc.Pool{Size: size(1)}))
	ctx, cancel := context.WithCancel(context.Background())
	first := startOn(t, p, ctx, subagenttest.PromptHang)
	others := []subagent.Run{startOn(t, p, context.Background(), subagenttest.PromptHang), startOn(t, p, context.Background(), subagenttest.PromptHang)}
	for range 3 {
		awaitHang(t, hung)
	}
	cancel()
	if res := subagenttest.Wait(t, first); res.StopReason != subagent.Aborted {
		t.Fatalf("the cancelled child: %+v", res)
	}
	if err := first.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, r := range others {
		select {
		case <-r.Done():
			t.Fatalf("child %d ended with its sibling: %+v", i, subagenttest.Wait(t, r))
		case <-time.After(200 * time.Millisecond):
		}
	}
	next := startOn(t, p, context.Background(), "after")
	if res := subagenttest.Wait(t, next); res.StopReason != subagent.Completed || content.JoinText(res.Output) != "done: after" {
		t.Fatalf("the next child: %+v", res)
	}
	next.Dispose(context.Background())
	for _, r := range others {
		if err := r.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		if res := subagenttest.Wait(t, r); res.StopReason != subagent.Aborted {
			t.Fatalf("a disposed sibling: %+v", res)
		}
	}
	stats(t, p, 1, 1)
	p.Close()
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

// A warm process killed mid-turn fails its own children, each with a stop
// reason naming the exit, and no other process's; the pool starts a new
// process for the next child.
func TestPoolKilledProcessFailsOnlyItsChildren(t *testing.T) {
	srv, hung := hangServer(t)
	p := newProvider(t, poolConfig(t, srv, childproc.Pool{Size: size(2), Sessions: 2}))
	var runs []subagent.Run
	for range 4 {
		runs = append(runs, startOn(t, p, context.Background(), subagenttest.PromptHang))
	}
	for range 4 {
		awaitHang(t, hung)
	}
	victim := acpchild.ProcessPID(runs[0])
	var mine, theirs []subagent.Run
	for _, r := range runs {
		if acpchild.ProcessPID(r) == victim {
			mine = append(mine, r)
		} else {
			theirs = append(theirs, r)
		}
	}
	if len(mine) != 2 || len(theirs) != 2 {
		t.Fatalf("%d children in the victim, %d in the other process; want 2 and 2", len(mine), len(theirs))
	}
	syscall.Kill(victim, syscall.SIGKILL)
	for _, r := range mine {
		res := subagenttest.Wait(t, r)
		if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "signal KILL") || !strings.Contains(res.Diagnostic, "kept warm") {
			t.Fatalf("a child of the killed process: %+v", res)
		}
		if err := r.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range theirs {
		select {
		case <-r.Done():
			t.Fatalf("child %d of the other process ended: %+v", i, subagenttest.Wait(t, r))
		case <-time.After(200 * time.Millisecond):
		}
	}
	next := startOn(t, p, context.Background(), "after")
	if res := subagenttest.Wait(t, next); res.StopReason != subagent.Completed {
		t.Fatalf("the next child: %+v", res)
	}
	next.Dispose(context.Background())
	for _, r := range theirs {
		r.Dispose(context.Background())
	}
	if _, started := acpchild.PoolStats(p); started != 3 {
		t.Errorf("the pool started %d processes, want 3 (two, then one for the killed)", started)
	}
	p.Close()
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

// A warm process without a child is stopped after the idle timeout.
func TestPoolIdleRetirement(t *testing.T) {
	p := newProvider(t, poolConfig(t, modelServer(t), childproc.Pool{Size: size(1), IdleTimeout: 300 * time.Millisecond}))
	run := startOn(t, p, context.Background(), "one")
	subagenttest.Wait(t, run)
	run.Dispose(context.Background())
	stats(t, p, 1, 1)
	if len(children()) != 1 {
		t.Fatalf("no warm process after the child: %v", children())
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(children()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
	stats(t, p, 0, 1)
	run = startOn(t, p, context.Background(), "two")
	if res := subagenttest.Wait(t, run); res.StopReason != subagent.Completed {
		t.Fatalf("a child after retirement: %+v", res)
	}
	run.Dispose(context.Background())
	stats(t, p, 1, 2)
}

// A process is retired after maxChildren children: stopped once its last
// ends, and the next child gets a new one.
func TestPoolRetirementAfterMaxChildren(t *testing.T) {
	p := newProvider(t, poolConfig(t, modelServer(t), childproc.Pool{Size: size(1), MaxChildren: 3}))
	for i := range 3 {
		run := startOn(t, p, context.Background(), "x")
		subagenttest.Wait(t, run)
		run.Dispose(context.Background())
		if i < 2 && len(children()) != 1 {
			t.Fatalf("after child %d: processes %v", i, children())
		}
	}
	if err := noChildren(); err != nil {
		t.Fatalf("the process that served maxChildren: %v", err)
	}
	stats(t, p, 0, 1)
	run := startOn(t, p, context.Background(), "x")
	subagenttest.Wait(t, run)
	run.Dispose(context.Background())
	stats(t, p, 1, 2)
}

// A full pool gives a child a process of its own, stopped at its disposal.
func TestPoolFullGivesAProcessOfItsOwn(t *testing.T) {
	srv, hung := hangServer(t)
	p := newProvider(t, poolConfig(t, srv, childproc.Pool{Size: size(1), Sessions: 1}))
	a := startOn(t, p, context.Background(), subagenttest.PromptHang)
	b := startOn(t, p, context.Background(), subagenttest.PromptHang)
	awaitHang(t, hung)
	awaitHang(t, hung)
	if acpchild.ProcessPID(a) == acpchild.ProcessPID(b) {
		t.Fatal("two children in a process of one session")
	}
	b.Dispose(context.Background())
	if n := len(children()); n != 1 {
		t.Fatalf("processes after the overflow child's disposal: %v", children())
	}
	a.Dispose(context.Background())
	stats(t, p, 1, 1)
}

// Only children of the same launch identity share a process: one in
// another working directory (a worktree child's) gets its own.
func TestPoolKeysOnLaunchIdentity(t *testing.T) {
	p := newProvider(t, poolConfig(t, modelServer(t), childproc.Pool{Size: size(2)}))
	parent := parentOf(t)
	var pids []int
	for _, cwd := range []string{"", t.TempDir(), ""} {
		run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: parent, Depth: 1, Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, acpchild.ProcessPID(run))
		subagenttest.Wait(t, run)
		run.Dispose(context.Background())
	}
	if pids[0] == pids[1] || pids[0] != pids[2] {
		t.Fatalf("processes %v: want the second child's apart, the third back in the first's", pids)
	}
	stats(t, p, 2, 2)
}

// Close stops the warm processes, a child's among them (it ends), and
// refuses new children; nothing is left.
func TestPoolCloseStopsEverything(t *testing.T) {
	srv, hung := hangServer(t)
	p := newProvider(t, poolConfig(t, srv, childproc.Pool{Size: size(1)}))
	run := startOn(t, p, context.Background(), subagenttest.PromptHang)
	awaitHang(t, hung)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Its process ends: dsh cancels the turn at the end of its input
	// (aborted), another agent may just exit (error).
	if res := subagenttest.Wait(t, run); res.StopReason != subagent.Aborted && res.StopReason != subagent.Failed {
		t.Fatalf("the child of a closed pool: %+v", res)
	}
	run.Dispose(context.Background())
	if _, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: parentOf(t), Depth: 1}); err == nil ||
		!strings.Contains(err.Error(), "closed") {
		t.Fatalf("a start after Close: %v", err)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

// A child that continues its conversation (ResumeRun) loads it into the
// warm process: session/load on it, no new process.
func TestPoolResumeRunLoadsInTheWarmProcess(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: fmt.Sprintf("done: %s after %d messages", r.LastUser, r.Messages)}
	})
	p := newProvider(t, poolConfig(t, srv, childproc.Pool{Size: size(1)}))
	a := parentOf(t)
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("one"), Parent: a, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	subagenttest.Wait(t, run)
	run.Dispose(context.Background())
	remote := run.(subagent.RemoteRun).RemoteSession()
	next, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("two"), Parent: a, Depth: 1}, remote)
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, next)
	next.Dispose(context.Background())
	if got := content.JoinText(res.Output); res.StopReason != subagent.Completed || got != "done: two after 4 messages" {
		t.Fatalf("resumed run %+v", res)
	}
	stats(t, p, 1, 1)
}

// An agent that does not answer a cancellation in time has its warm
// process retired: stopped at the child's disposal, never reused.
func TestPoolStubbornAgentIsRetired(t *testing.T) {
	cfg := fakeConfig("stubborn")
	cfg.Pool = &childproc.Pool{Size: size(1)}
	p := newProvider(t, cfg)
	run := startOn(t, p, context.Background(), "x")
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := subagenttest.Wait(t, run); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
	stats(t, p, 0, 1)
}

// A dsh child's provider keeps one process warm unless its pool says
// otherwise; another agent's keeps none unless configured.
func TestPoolDefaults(t *testing.T) {
	for _, tc := range []struct {
		dsh  bool
		pool *childproc.Pool
		want bool
	}{
		{true, nil, true}, {true, &childproc.Pool{Size: size(0)}, false},
		{false, nil, false}, {false, &childproc.Pool{}, true},
	} {
		p := newProvider(t, acpchild.Config{Options: childproc.Options{Command: "x"}, Dsh: tc.dsh, Pool: tc.pool})
		if acpchild.Pooled(p) != tc.want {
			t.Errorf("dsh %v, pool %+v: pooled %v", tc.dsh, tc.pool, !tc.want)
		}
	}
	if _, err := acpchild.New(acpchild.Config{Options: childproc.Options{Command: "x"}, Pool: &childproc.Pool{Sessions: -1}}); err == nil ||
		!strings.Contains(err.Error(), "pool.sessions") {
		t.Errorf("a negative pool.sessions: %v", err)
	}
}
