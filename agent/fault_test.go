package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// fullDisk is a backend whose writes start failing after a number of
// batches, like a disk that fills up.
type fullDisk struct {
	*session.MemoryBackend
	left int
}

type fullDiskPersister struct {
	session.Persister
	d *fullDisk
}

func (d *fullDisk) Create(h session.Header) (session.Persister, error) {
	p, err := d.MemoryBackend.Create(h)
	return &fullDiskPersister{p, d}, err
}

func (p *fullDiskPersister) Append(events []session.Event) error {
	if p.d.left <= 0 {
		return errors.New("no space left on device")
	}
	p.d.left--
	return p.Persister.Append(events)
}

// A session that cannot be written ends the turn in error, naming the cause,
// before the model is called, and what was written stays a loadable log.
func TestSessionWriteFailureEndsTurnInError(t *testing.T) {
	backend := &fullDisk{MemoryBackend: session.NewMemoryBackend(), left: 3} // one turn: before the request, at the step end, at the turn end
	bus := event.New(nil)
	models := llm.NewRegistry()
	model := scripted.New(scripted.Text("first"), scripted.Text("second"))
	models.Register("test", model)
	store := session.NewStore(backend, bus)
	reg := agent.NewRegistry(agent.Deps{Sessions: store, LLM: models, Tools: tool.NewRegistry(), Prompt: prompt.NewRegistry(), Events: bus})
	a, err := reg.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.DisposeAll(context.Background())
	end, _ := a.Run(context.Background(), content.UserText("one"))
	if end.Reason.Kind != session.EndCompleted {
		t.Fatalf("first turn %+v", end)
	}
	end, _ = a.Run(context.Background(), content.UserText("two"))
	if end.Reason.Kind != session.EndError || end.Reason.Error == nil || !strings.Contains(end.Reason.Error.Message, "no space left on device") {
		t.Fatalf("second turn %+v", end)
	}
	if n := model.Remaining(); n != 1 { // fail-closed: no request whose input could not be stored
		t.Errorf("the model got %d requests, want 1", 2-n)
	}
	if err := a.Dispose(context.Background()); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("dispose: %v, want the write failure reported", err)
	}
	_, events, err := store.Read(a.ID()) // from the backend: the agent is gone
	if err != nil {
		t.Fatal(err)
	}
	if err := session.CheckBalanced(events); err != nil || len(events) == 0 {
		t.Fatalf("stored log (%d events): %v", len(events), err)
	}
}

// A lone tool call (it runs on the agent's goroutine) whose checkpoint
// cannot be written does not run: its result says why.
func TestLoneToolCallNotRunWithoutCheckpoint(t *testing.T) {
	backend := &fullDisk{MemoryBackend: session.NewMemoryBackend(), left: 1} // the request's checkpoint only
	bus := event.New(nil)
	models := llm.NewRegistry()
	models.Register("test", scripted.New(scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "probe", Arguments: `{}`}), scripted.Text("done")))
	tools := tool.NewRegistry()
	ran := false
	tools.Register(tool.Definition{Name: "probe", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		ran = true
		return tool.TextResult("ok"), nil
	}})
	reg := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(backend, bus), LLM: models, Tools: tools, Prompt: prompt.NewRegistry(), Events: bus})
	defer reg.DisposeAll(context.Background())
	a, err := reg.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	a.Run(context.Background(), content.UserText("go"))
	if ran {
		t.Error("the tool ran without its checkpoint")
	}
	var res *session.ToolResult
	for _, e := range a.Session().Events() {
		if r, ok := e.Data.(session.ToolResult); ok {
			res = &r
		}
	}
	if res == nil || res.Error == nil || res.Error.Code != agent.CodeCheckpoint ||
		!strings.Contains(content.JoinText(res.Message.Content[0].Content), "no space left on device") {
		t.Fatalf("tool result %+v", res)
	}
}
