package agent_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
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

// whereTool records the goroutine each call runs on and calls hook (if set).
func whereTool(ids chan<- uint64, hook func()) tool.Definition {
	return tool.Definition{Name: "where", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		ids <- goid()
		if hook != nil {
			hook()
		}
		return tool.TextResult("here"), nil
	}}
}

func TestRunDrivesAnIdleAgentOnTheCallingGoroutine(t *testing.T) {
	e := newEnv(t, scripted.ToolCalls("", scripted.Call{ID: "c", Name: "where", Arguments: `{}`}), scripted.Text("ok"))
	ids := make(chan uint64, 1)
	e.tool(whereTool(ids, nil))
	a := e.create(agent.CreateOptions{})
	end := run(t, a, "go")
	if end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	if got, want := <-ids, goid(); got != want {
		t.Fatalf("the turn ran on goroutine %d, the caller is %d", got, want)
	}
	if a.Status() != agent.StatusIdle {
		t.Fatalf("status after Run = %s", a.Status())
	}
	checkBalanced(t, a)
}

func TestRunHandsInputQueuedDuringItsTurnToADriver(t *testing.T) {
	e := newEnv(t,
		scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "where", Arguments: `{}`}), scripted.Text("first"),
		scripted.ToolCalls("", scripted.Call{ID: "c2", Name: "where", Arguments: `{}`}), scripted.Text("second"))
	ids := make(chan uint64, 2)
	var a *agent.Agent
	queued := false
	e.tool(whereTool(ids, func() {
		if !queued {
			queued = true
			if err := a.Followup(content.UserText("later")); err != nil {
				t.Error(err)
			}
		}
	}))
	a = e.create(agent.CreateOptions{})
	end := run(t, a, "go")
	if end.Turn != 1 || end.Reason.Kind != session.EndCompleted {
		t.Fatalf("Run returned %+v, want the end of turn 1", end)
	}
	if err := a.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	caller, first, second := goid(), <-ids, <-ids
	if first != caller || second == caller {
		t.Fatalf("turn 1 ran on %d and turn 2 on %d; the caller is %d", first, second, caller)
	}
	if n := a.Session().LastTurn(); n != 2 {
		t.Fatalf("last turn = %d, want 2", n)
	}
	checkBalanced(t, a)
}

func TestHeldTurnWaitsForRunHere(t *testing.T) {
	e := newEnv(t, scripted.Text("ok"))
	a := e.create(agent.CreateOptions{})
	ended := make(chan session.TurnEnd, 1)
	held, err := a.Hold(content.UserText("go"), func(end session.TurnEnd) { ended <- end })
	if err != nil {
		t.Fatal(err)
	}
	if a.Status() != agent.StatusIdle || e.model.Remaining() != 1 {
		t.Fatal("a held message started a turn")
	}
	held.RunHere()
	if end := <-ended; end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	held.RunHere() // nothing queued: returns at once
	checkBalanced(t, a)
}

func TestReleaseStartsADriverForAHeldTurn(t *testing.T) {
	e := newEnv(t, scripted.Text("ok"))
	a := e.create(agent.CreateOptions{})
	ended := make(chan session.TurnEnd, 1)
	held, err := a.Hold(content.UserText("go"), func(end session.TurnEnd) { ended <- end })
	if err != nil {
		t.Fatal(err)
	}
	held.Release()
	if end := <-ended; end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	if err := a.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDisposeDropsAHeldTurn(t *testing.T) {
	e := newEnv(t, scripted.Text("never"))
	a := e.create(agent.CreateOptions{})
	ended := make(chan session.TurnEnd, 1)
	held, err := a.Hold(content.UserText("go"), func(end session.TurnEnd) { ended <- end })
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if end := <-ended; end.Reason.Kind != session.EndAborted || end.Reason.Cause.Kind != agent.CauseDisposed {
		t.Fatalf("end = %+v", end)
	}
	held.RunHere() // disposed: returns at once
	if e.model.Remaining() != 1 {
		t.Fatal("the model was called")
	}
}
