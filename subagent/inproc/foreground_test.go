package inproc_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/tool"
)

// goid returns the calling goroutine's id, read from its stack header.
func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// foregroundWorld is a world whose child calls the "where" tool once,
// which reports the goroutine it runs on.
func foregroundWorld(t *testing.T) (*world, chan uint64) {
	w := newWorld(t, nil, scripted.ToolCalls("", scripted.Call{ID: "c", Name: "where", Arguments: `{}`}), scripted.Text("done"))
	ids := make(chan uint64, 1)
	if _, err := w.Tools.Register(tool.Definition{Name: "where", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		ids <- goid()
		return tool.TextResult("here"), nil
	}}); err != nil {
		t.Fatal(err)
	}
	return w, ids
}

// spawnForeground starts a foreground run on the spawn provider directly,
// as the service does for Delegate, leaving the Wait to the test.
func (w *world) spawnForeground(t *testing.T, ctx context.Context) subagent.Run {
	t.Helper()
	p, _ := w.svc.Provider(inproc.SpawnName)
	run, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent, Depth: 1, Foreground: true})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func TestForegroundChildRunsOnTheWaitingGoroutine(t *testing.T) {
	w, ids := foregroundWorld(t)
	del, err := w.svc.Delegate(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent}, subagent.DelegateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := del.Wait(context.Background()); res.StopReason != subagent.Completed {
		t.Fatalf("result %+v", res)
	}
	if got, want := <-ids, goid(); got != want {
		t.Fatalf("the child ran on goroutine %d, Delegate on %d", got, want)
	}
}

func TestStartIsNeverForeground(t *testing.T) {
	w, ids := foregroundWorld(t)
	res := w.delegate(t, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Foreground: true})
	if res.StopReason != subagent.Completed {
		t.Fatalf("result %+v", res)
	}
	if got := <-ids; got == goid() {
		t.Fatal("Start honoured a caller's Foreground: the child ran on the goroutine of its Wait")
	}
}

func TestForegroundChildWithCancellableWaitRunsOnItsOwnGoroutine(t *testing.T) {
	w, ids := foregroundWorld(t)
	run := w.spawnForeground(t, context.Background())
	defer run.Dispose(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := run.Wait(ctx)
	if err != nil || res.StopReason != subagent.Completed {
		t.Fatalf("result %+v, %v", res, err)
	}
	if got := <-ids; got == goid() {
		t.Fatal("the child ran on the goroutine of a Wait that could end early")
	}
}

func TestForegroundChildDisposedBeforeWaitNeverRuns(t *testing.T) {
	w, _ := foregroundWorld(t)
	run := w.spawnForeground(t, context.Background())
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := run.Wait(context.Background())
	if err != nil || res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v, %v", res, err)
	}
	if w.model.Remaining() != 2 {
		t.Fatal("the disposed child called its model")
	}
}

func TestForegroundChildStartCancelledBeforeWaitIsAborted(t *testing.T) {
	w, _ := foregroundWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	var child *agent.Agent
	del, err := w.svc.Delegate(ctx, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent},
		subagent.DelegateOptions{Started: func(id string) {
			child, _ = w.Agents.Get(id)
			cancel()
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := del.Wait(context.Background()); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
	if child.Status() != agent.StatusIdle {
		t.Fatalf("the child is %s after Delegate", child.Status())
	}
	if w.model.Remaining() != 2 {
		t.Fatal("the cancelled child called its model")
	}
}
