package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/tool"
)

// A session is continued from its stored log alone, by a registry of
// another runtime (as a new process would): the model sees the earlier
// turns, turn numbering goes on, and the header is the stored one.
func TestResumeContinuesAStoredSession(t *testing.T) {
	root := t.TempDir()
	first := newRuntime(t, jsonl.New(root), scripted.Text("first answer"))
	a, err := first.agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "first question")
	id, cwd := a.ID(), a.Cwd()
	if err := a.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}

	second := newRuntime(t, jsonl.New(root), scripted.Text("second answer"))
	b, err := second.agents.Create(context.Background(), agent.CreateOptions{SessionID: id, Resume: true, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if end := run(t, b, "second question"); end.Reason.Kind != session.EndCompleted || end.Turn != 2 {
		t.Fatalf("end = %+v", end)
	}
	if b.Cwd() != cwd {
		t.Errorf("cwd = %q, want the stored %q", b.Cwd(), cwd)
	}
	req := second.model.Requests()[0]
	var texts []string
	for _, m := range req.Messages {
		texts = append(texts, content.JoinText(m.Content))
	}
	if len(texts) != 3 || texts[0] != "first question" || texts[1] != "first answer" || texts[2] != "second question" {
		t.Errorf("the resumed request holds %q", texts)
	}
	if err := b.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, events, err := session.NewStore(jsonl.New(root), nil).Read(id)
	if err != nil || h.ID != id || session.CheckBalanced(events) != nil {
		t.Fatalf("stored: %v %v", err, session.CheckBalanced(events))
	}
}

// Resuming refuses what it cannot do, and a failed resume (setup error,
// cancelled ctx) releases the stored session for the next writer.
func TestResumeRefusalsReleaseTheSession(t *testing.T) {
	root := t.TempDir()
	rt := newRuntime(t, jsonl.New(root), scripted.Text("answer"))
	a, err := rt.agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "hello")
	id := a.ID()
	if _, err := rt.agents.Create(context.Background(), agent.CreateOptions{SessionID: id, Resume: true, Options: agent.Options{Provider: "test"}}); err == nil {
		t.Fatal("resumed a session that is live")
	}
	a.Dispose(context.Background())

	for name, opts := range map[string]agent.CreateOptions{
		"unknown":     {SessionID: "nope", Resume: true},
		"header":      {SessionID: id, Resume: true, Cwd: t.TempDir()},
		"no id":       {Resume: true},
		"setup fails": {SessionID: id, Resume: true, Setup: func(*agent.Agent) error { return errors.New("no") }},
	} {
		opts.Options.Provider = "test"
		if _, err := rt.agents.Create(context.Background(), opts); err == nil {
			t.Errorf("%s: resumed", name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.agents.Create(ctx, agent.CreateOptions{SessionID: id, Resume: true, Options: agent.Options{Provider: "test"}}); err == nil {
		t.Fatal("resumed with a cancelled ctx")
	}
	// Nothing above kept the writer lock: a resume now succeeds.
	b, err := rt.agents.Create(context.Background(), agent.CreateOptions{SessionID: id, Resume: true, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Dispose(context.Background())
}

// Cancel with keepInbox parks what is queued: the running turn ends
// aborted, the queued turns wait, and the next waking send runs them first,
// in order.
func TestCancelKeepingTheInboxParksIt(t *testing.T) {
	e := newEnv(t, scripted.Hang("working"), scripted.Text("one"), scripted.Text("two"), scripted.Text("three"))
	a := e.create(agent.CreateOptions{})
	var mu sync.Mutex
	var ends []string
	record := func(name string) func(session.TurnEnd) {
		return func(end session.TurnEnd) {
			mu.Lock()
			defer mu.Unlock()
			ends = append(ends, name+":"+end.Reason.Kind)
		}
	}
	streaming := make(chan struct{})
	var once sync.Once
	stop := a.Session().Observe(func(ev session.Event) {
		if ev.Type == session.TypeAssistantChunk {
			once.Do(func() { close(streaming) })
		}
	})
	defer stop()
	if err := a.Submit(content.UserText("long"), record("long")); err != nil {
		t.Fatal(err)
	}
	<-streaming
	for _, n := range []string{"q1", "q2"} {
		if err := a.Submit(content.UserText(n), record(n)); err != nil {
			t.Fatal(err)
		}
	}
	a.Cancel(session.Cause{Kind: agent.CauseParent}, true)
	if err := a.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.Queued() != 2 || a.Status() != agent.StatusIdle {
		t.Fatalf("queued %d, status %s: want the two follow-ups parked", a.Queued(), a.Status())
	}
	done := make(chan struct{})
	if err := a.Submit(content.UserText("q3"), func(end session.TurnEnd) { record("q3")(end); close(done) }); err != nil {
		t.Fatal(err)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	want := []string{"long:aborted", "q1:completed", "q2:completed", "q3:completed"}
	if len(ends) != len(want) {
		t.Fatalf("ends = %v, want %v", ends, want)
	}
	for i := range want {
		if ends[i] != want[i] {
			t.Fatalf("ends = %v, want %v", ends, want)
		}
	}
}

// harness is a registry over a given backend and a scripted model.
type harness struct {
	model  *scripted.Model
	agents *agent.Registry
}

func newRuntime(t *testing.T, backend session.Backend, entries ...scripted.Entry) *harness {
	t.Helper()
	bus := event.New(nil)
	rt := &harness{model: scripted.New(entries...)}
	reg := llm.NewRegistry()
	if _, err := reg.Register("test", rt.model); err != nil {
		t.Fatal(err)
	}
	rt.agents = agent.NewRegistry(agent.Deps{Sessions: session.NewStore(backend, bus), LLM: reg, Tools: tool.NewRegistry(),
		Prompt: prompt.NewRegistry(), Events: bus})
	t.Cleanup(func() { rt.agents.DisposeAll(context.Background()) })
	return rt
}
