package e2e

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/subagent/temporal"
)

// hangOrDone hangs on the task "hang" and answers "done" otherwise.
func hangOrDone(req llmtest.Request) llmtest.Reply {
	if req.LastUser == "hang" {
		return llmtest.Reply{Text: "working", Hang: true}
	}
	return llmtest.Reply{Text: "done"}
}

func start(t *testing.T, p subagent.Provider, parent *agent.Agent, prompt string) subagent.Run {
	t.Helper()
	run, err := p.Start(context.Background(), subagent.StartRequest{Parent: parent, Prompt: subagenttest.Prompt(prompt), Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// With no worker polling the task queue, a start fails at once with
// NO_WORKER, and nothing is started on the cluster.
func TestNoWorker(t *testing.T) {
	f := newFleet(t, hangOrDone)
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	_, err := f.provider(t, parent.Sessions).Start(context.Background(), subagent.StartRequest{Parent: parent.Agent,
		Prompt: subagenttest.Prompt("done"), Depth: 1})
	var te *temporal.Error
	if !errors.As(err, &te) || te.Code != temporal.CodeNoWorker || !strings.Contains(err.Error(), "dsh worker") {
		t.Fatalf("start without a worker: %v, want %s naming dsh worker", err, temporal.CodeNoWorker)
	}
	if n := f.openChildren(t); n != 0 {
		t.Errorf("%d children on the cluster", n)
	}
}

// A start whose ctx ends while its child waits for a free worker fails
// ABORTED_BEFORE_READY and terminates the child's workflow: the worker,
// once free, never runs it.
func TestCancelBeforeReadyLeavesNothing(t *testing.T) {
	f := newFleet(t, hangOrDone)
	f.worker("busy", 1)
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	p := f.provider(t, parent.Sessions)
	busy := start(t, p, parent.Agent, "hang")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Start(ctx, subagent.StartRequest{Parent: parent.Agent, Prompt: subagenttest.Prompt("queued"), Depth: 1})
		errc <- err
	}()
	f.awaitOpen(t, 2) // the queued child's workflow exists
	cancel()
	if err := <-errc; !errors.Is(err, subagent.ErrAbortedBeforeReady) {
		t.Fatalf("start cancelled while queued: %v, want ABORTED_BEFORE_READY", err)
	}
	f.awaitOpen(t, 1) // only the busy one is left
	if err := busy.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.awaitOpen(t, 0)
	// The freed worker takes new children, and never the cancelled one.
	done := start(t, p, parent.Agent, "done")
	if res, err := done.Wait(context.Background()); err != nil || res.StopReason != subagent.Completed {
		t.Fatalf("a child after the cancelled one: %+v, %v", res, err)
	}
	done.Dispose(context.Background())
	if live := parent.Sessions.Live(); len(live) != 1 {
		t.Errorf("sessions live: %v", live)
	}
}

// A cancelled child stops on its worker: its log ends with an aborted turn
// that the worker wrote, and its workflow ends canceled.
func TestCancelAfterReadyStopsTheChild(t *testing.T) {
	f := newFleet(t, hangOrDone)
	f.worker("w", 2)
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	run, err := f.provider(t, parent.Sessions).Start(ctx, subagent.StartRequest{Parent: parent.Agent, Prompt: subagenttest.Prompt("hang"), Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	res, err := run.Wait(context.Background())
	if err != nil || res.StopReason != subagent.Aborted {
		t.Fatalf("cancelled child: %+v, %v", res, err)
	}
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := status(t, run.ID()); s != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
		t.Errorf("workflow status %s, want canceled", s)
	}
	_, events, err := parent.Sessions.Read(run.ID())
	if err != nil {
		t.Fatal(err)
	}
	last, ok := events[len(events)-1].Data.(session.TurnEnd)
	if !ok || last.Reason.Kind != session.EndAborted || content.JoinText(res.Output) != "working" {
		t.Errorf("the log ends with %+v, output %q: want the worker's aborted turn and the partial text", events[len(events)-1], content.JoinText(res.Output))
	}
}

// Dispose terminates a child whose worker cannot stop it (dead, or stuck)
// after cancelGrace, and returns once the workflow is closed.
func TestDisposeWithoutAWorkingWorker(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"dead", syscall.SIGKILL}, {"stuck", syscall.SIGSTOP}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, hangOrDone)
			w := f.worker("w", 1)
			parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
			p := f.provider(t, parent.Sessions)
			run := start(t, p, parent.Agent, "hang")
			w.kill(t, tc.sig)
			began := time.Now()
			if err := run.Dispose(context.Background()); err != nil {
				t.Fatal(err)
			}
			if s := status(t, run.ID()); s != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
				t.Errorf("workflow status %s, want terminated", s)
			}
			if res, _ := run.Wait(context.Background()); res.StopReason != subagent.Aborted {
				t.Errorf("disposed child: %+v", res)
			}
			t.Logf("dispose took %s", time.Since(began))
			if tc.sig != syscall.SIGSTOP {
				return
			}
			// The worker, resumed, learns that its child is gone and frees
			// its only slot for the next child.
			w.kill(t, syscall.SIGCONT)
			next := start(t, p, parent.Agent, "done")
			if res, err := next.Wait(context.Background()); err != nil || res.StopReason != subagent.Completed {
				t.Errorf("the next child: %+v, %v", res, err)
			}
			next.Dispose(context.Background())
		})
	}
}

// A child on a worker cannot delegate past its parent's depth cap, though
// the worker's own subagent tool would allow it.
func TestDepthCapHoldsOnTheWorker(t *testing.T) {
	f := newFleet(t, func(req llmtest.Request) llmtest.Reply {
		if len(req.ToolResults) == 0 {
			return llmtest.Reply{Reasoning: "delegate", ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"deeper","prompt":"go deeper"}`}}
		}
		return llmtest.Reply{Text: "told: " + req.ToolResults[0]}
	})
	f.spawnTool = true
	f.writeConfig()
	f.worker("w", 2)
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	one := 1
	run, err := f.provider(t, parent.Sessions).Start(context.Background(), subagent.StartRequest{Parent: parent.Agent,
		Prompt: subagenttest.Prompt("delegate"), Depth: 1, MaxDepth: &one})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Dispose(context.Background())
	res, err := run.Wait(context.Background())
	if err != nil || res.StopReason != subagent.Completed || !strings.Contains(content.JoinText(res.Output), "exceeds maxDepth 1") {
		t.Fatalf("result %+v, %v: want the child told its cap", res, err)
	}
	_, events, err := parent.Sessions.Read(run.ID())
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, e := range events {
		if r, ok := e.Data.(session.ToolResult); ok && r.Error != nil {
			refused = refused || r.Error.Code == string(subagent.CodeDepthExceeded)
		}
	}
	if !refused {
		t.Error("the child's log holds no subagent call refused with DEPTH_EXCEEDED")
	}
}
