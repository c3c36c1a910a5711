package codex_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// pooledCodex is the real Codex against m with pool, and the parent whose
// children share its processes (a parent's working directory is part of
// their launch identity). Closing the provider is the test's cleanup.
func pooledCodex(t *testing.T, m *llmtest.Responses, pool childproc.Pool) (*codex.Provider, *agent.Agent) {
	cfg := realConfig(t, m)
	cfg.Pool = &pool
	p := newProvider(t, cfg)
	t.Cleanup(func() { p.Close() })
	return p, subagenttest.ParentAgent(t)
}

func one(n int) *int { return &n }

func codexStats(t *testing.T, p *codex.Provider, held, started int) {
	t.Helper()
	if h, s := codex.PoolStats(p); h != held || s != started {
		t.Fatalf("the pool holds %d processes and started %d; want %d and %d", h, s, held, started)
	}
}

func startFrom(t *testing.T, p *codex.Provider, ctx context.Context, parent *agent.Agent, prompt string) subagent.Run {
	t.Helper()
	run, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt(prompt), Parent: parent, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// Children one after another, then several at once, are threads of one
// warm `codex app-server`: one process start, each answer its own, and
// nothing left once the provider is closed.
func TestRealCodexPoolOneProcess(t *testing.T) {
	m := llmtest.NewResponses(t)
	p, parent := pooledCodex(t, m, childproc.Pool{Size: one(1)})
	pid := 0
	for i := range 10 {
		run := startFrom(t, p, context.Background(), parent, fmt.Sprintf("say %d", i))
		if pid == 0 {
			pid = codex.ProcessPID(run)
		} else if got := codex.ProcessPID(run); got != pid {
			t.Fatalf("child %d ran in process %d, not the warm %d", i, got, pid)
		}
		res := subagenttest.Wait(t, run)
		subagenttest.Dispose(t, run)
		if want := llmtest.ResponsesAnswer(fmt.Sprintf("say %d", i)); res.StopReason != subagent.Completed || content.JoinText(res.Output) != want {
			t.Fatalf("child %d: %+v", i, res)
		}
	}
	var wg sync.WaitGroup
	results := make([]subagent.Result, 5)
	pids := make([]int, 5)
	for i := range 5 {
		wg.Go(func() {
			run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt(fmt.Sprintf("say parallel %d", i)), Parent: parent, Depth: 1})
			if err != nil {
				results[i].Diagnostic = err.Error()
				return
			}
			pids[i] = codex.ProcessPID(run)
			results[i], _ = run.Wait(context.Background())
			run.Dispose(context.Background())
		})
	}
	wg.Wait()
	for i, res := range results {
		if want := llmtest.ResponsesAnswer(fmt.Sprintf("say parallel %d", i)); res.StopReason != subagent.Completed || content.JoinText(res.Output) != want || pids[i] != pid {
			t.Fatalf("parallel child %d in process %d: %+v", i, pids[i], res)
		}
	}
	codexStats(t, p, 1, 1)
	if n, _ := m.Stats(); n != 15 {
		t.Errorf("%d model requests, want 15", n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoChildren(t)
}

// Cancelling one child of a warm Codex aborts its turn only: its sibling
// goes on, and the process takes the next child.
func TestRealCodexPoolCancelOneChild(t *testing.T) {
	m := llmtest.NewResponses(t)
	p, parent := pooledCodex(t, m, childproc.Pool{Size: one(1)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := startFrom(t, p, ctx, parent, "please hang")
	second := startFrom(t, p, context.Background(), parent, "please hang")
	for range 2 {
		select {
		case <-m.Hanging:
		case <-time.After(10 * time.Second):
			t.Fatal("the model requests never came")
		}
	}
	cancel()
	if res := subagenttest.Wait(t, first); res.StopReason != subagent.Aborted {
		t.Fatalf("the cancelled child: %+v", res)
	}
	subagenttest.Dispose(t, first)
	select {
	case <-second.Done():
		t.Fatalf("the sibling ended: %+v", subagenttest.Wait(t, second))
	case <-time.After(300 * time.Millisecond):
	}
	next := startFrom(t, p, context.Background(), parent, "say next")
	if res := subagenttest.Wait(t, next); res.StopReason != subagent.Completed {
		t.Fatalf("the next child: %+v", res)
	}
	subagenttest.Dispose(t, next)
	subagenttest.Dispose(t, second)
	codexStats(t, p, 1, 1)
}

// A warm Codex killed mid-turn fails its own children, naming the exit,
// and not those of the pool's other process.
func TestRealCodexPoolKilledProcessFailsOnlyItsChildren(t *testing.T) {
	m := llmtest.NewResponses(t)
	p, parent := pooledCodex(t, m, childproc.Pool{Size: one(2), Sessions: 2})
	var runs []subagent.Run
	for range 4 {
		runs = append(runs, startFrom(t, p, context.Background(), parent, "please hang"))
	}
	for range 4 {
		select {
		case <-m.Hanging:
		case <-time.After(10 * time.Second):
			t.Fatal("the model requests never came")
		}
	}
	victim := codex.ProcessPID(runs[0])
	var mine, theirs []subagent.Run
	for _, r := range runs {
		if codex.ProcessPID(r) == victim {
			mine = append(mine, r)
		} else {
			theirs = append(theirs, r)
		}
	}
	if len(mine) != 2 || len(theirs) != 2 {
		t.Fatalf("%d children in the victim, %d in the other; want 2 and 2", len(mine), len(theirs))
	}
	syscall.Kill(-victim, syscall.SIGKILL) // its group: the npm-less native binary and anything it runs
	for _, r := range mine {
		res := subagenttest.Wait(t, r)
		if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "a warm process, whose exit fails every child it serves) exited during the turn") {
			t.Fatalf("a child of the killed process: %+v", res)
		}
		subagenttest.Dispose(t, r)
	}
	for _, r := range theirs {
		select {
		case <-r.Done():
			t.Fatalf("a child of the other process ended: %+v", subagenttest.Wait(t, r))
		case <-time.After(300 * time.Millisecond):
		}
		subagenttest.Dispose(t, r)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoChildren(t)
}

// A warm Codex without a child is stopped after the idle timeout, and its
// threads continue in the next process (thread/resume, CODEX_HOME kept).
func TestRealCodexPoolIdleRetirementAndResume(t *testing.T) {
	m := llmtest.NewResponses(t)
	p, parent := pooledCodex(t, m, childproc.Pool{Size: one(1), IdleTimeout: 300 * time.Millisecond})
	run := startFrom(t, p, context.Background(), parent, "say one")
	subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	thread := run.(subagent.RemoteRun).RemoteSession()
	deadline := time.Now().Add(10 * time.Second)
	for len(proc.Children(os.Getpid())) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	checkNoChildren(t)
	codexStats(t, p, 0, 1)
	next, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("say two"), Parent: parent, Depth: 1}, thread)
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, next)
	subagenttest.Dispose(t, next)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != llmtest.ResponsesAnswer("say two") {
		t.Fatalf("the resumed child: %+v", res)
	}
	codexStats(t, p, 1, 2)
}

// The conformance suite holds for a pooled Codex: children share the warm
// process, and closing the provider leaves nothing.
func TestRealCodexPoolConformance(t *testing.T) {
	m := llmtest.NewResponses(t)
	var p *codex.Provider
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			cfg := realConfig(t, m)
			cfg.Pool = &childproc.Pool{Size: one(1)}
			p = newProvider(t, cfg)
			return p, subagenttest.ParentAgent(t)
		},
		Leftovers: func() error {
			if err := p.Close(); err != nil {
				return err
			}
			return noChildren()
		},
	})
}

// Two children of one warm Codex ask the parent's policy at once: one ask
// waiting on the person holds up neither the other child's ask nor its
// turn (the shared process's requests are answered concurrently).
func TestRealCodexPoolAsksDoNotWaitOnEachOther(t *testing.T) {
	srv := execModel(t)
	cfg := realConfig(t, &llmtest.Responses{Server: srv})
	cfg.Pool = &childproc.Pool{Size: one(1)}
	p := newProvider(t, cfg)
	t.Cleanup(func() { p.Close() })
	release, slowAsked := make(chan struct{}), make(chan struct{}, 1)
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the provider's Close, on a failure too
	parent := subagenttest.PolicyParent(t, permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Ask}},
		permission.AskerFunc(func(ctx context.Context, r permission.Request) (permission.Answer, error) {
			if strings.Contains(r.Who(), "slow") {
				slowAsked <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return permission.Reject, nil
		}))
	slow := start(t, p, context.Background(), subagent.StartRequest{Label: "slow", Prompt: subagenttest.Prompt("plant a file"), Parent: parent, Depth: 1})
	select {
	case <-slowAsked:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow child never asked")
	}
	quick := start(t, p, context.Background(), subagent.StartRequest{Label: "quick", Prompt: subagenttest.Prompt("plant a file"), Parent: parent, Depth: 1})
	select {
	case <-quick.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the quick child waited on its sibling's ask")
	}
	if res := subagenttest.Wait(t, quick); res.StopReason != subagent.Completed || codex.ProcessPID(quick) != codex.ProcessPID(slow) {
		t.Fatalf("the quick child: %+v", res)
	}
	free()
	if res := subagenttest.Wait(t, slow); res.StopReason != subagent.Completed {
		t.Fatalf("the slow child: %+v", res)
	}
	subagenttest.Dispose(t, quick)
	subagenttest.Dispose(t, slow)
	codexStats(t, p, 1, 1)
}
