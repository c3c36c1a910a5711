package subagent_test

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/tool"
)

// world is one process's runtime over a JSONL store: a second world over
// the same directory is what a new process sees.
type world struct {
	t      *testing.T
	dir    string
	bus    *event.Bus
	store  *session.Store
	tools  *tool.Registry
	agents *agent.Registry
	svc    *subagent.Service
	parent *agent.Agent

	mu       sync.Mutex
	requests []*llm.Request // every model request, in arrival order
	ended    []subagent.Ended
	started  []subagent.Started
	reply    func(req *llm.Request, last string) scripted.Entry
}

// lastTask is the text of a request's last user message, a child's
// instructions cut off.
func lastTask(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == content.RoleUser && m.Content[0].Type == content.TypeText {
			_, task, _ := inproc.SplitTask(content.JoinText(m.Content))
			return task
		}
	}
	return ""
}

// requestTexts returns the texts of a request's messages.
func requestTexts(req *llm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if t := content.JoinText(m.Content); t != "" {
			_, task, _ := inproc.SplitTask(t)
			out = append(out, task)
		}
	}
	return out
}

func newWorld(t *testing.T, dir string, backend session.Backend) *world {
	t.Helper()
	if backend == nil {
		backend = jsonl.New(dir)
	}
	w := &world{t: t, dir: dir, bus: event.New(nil), tools: tool.NewRegistry()}
	w.reply = func(_ *llm.Request, last string) scripted.Entry { return scripted.Text("answer to " + last) }
	w.store = session.NewStore(backend, w.bus)
	models := llm.NewRegistry()
	models.Register("test", llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		w.mu.Lock()
		w.requests = append(w.requests, req)
		reply := w.reply
		w.mu.Unlock()
		return scripted.New(reply(req, lastTask(req))).Stream(ctx, req)
	}))
	w.agents = agent.NewRegistry(agent.Deps{Sessions: w.store, LLM: models, Tools: w.tools, Prompt: prompt.NewRegistry(), Events: w.bus})
	w.svc = subagent.NewService(w.bus, nil)
	w.svc.ServeContinuation(w.agents, w.store)
	event.On(w.bus, func(e subagent.Ended) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ended = append(w.ended, e)
	})
	event.On(w.bus, func(e subagent.Started) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.started = append(w.started, e)
	})
	t.Cleanup(w.close)
	return w
}

func (w *world) close() {
	if err := w.svc.Drain(context.Background()); err != nil {
		w.t.Errorf("drain: %v", err)
	}
	if err := w.agents.DisposeAll(context.Background()); err != nil {
		w.t.Errorf("dispose: %v", err)
	}
}

func (w *world) setReply(fn func(req *llm.Request, last string) scripted.Entry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reply = fn
}

// provider registers spawn (or fork) under name.
func (w *world) provider(name string, fork bool) func() {
	w.t.Helper()
	p, err := inproc.New(inproc.Config{Name: name, Agents: w.agents, Fork: fork})
	if err != nil {
		w.t.Fatal(err)
	}
	un, err := w.svc.Register(p)
	if err != nil {
		w.t.Fatal(err)
	}
	return un
}

// newParent creates a top-level agent (or resumes stored session id).
func (w *world) newParent(id string) *agent.Agent {
	w.t.Helper()
	opts := agent.CreateOptions{Options: agent.Options{Provider: "test"}}
	if id != "" {
		opts.SessionID, opts.Resume = id, true
	} else {
		opts.Cwd = w.dir
	}
	a, err := w.agents.Create(context.Background(), opts)
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

func (w *world) start(parent *agent.Agent, provider, task string, opts subagent.ContinuableOptions) *subagent.Accepted {
	w.t.Helper()
	acc, err := w.svc.StartContinuable(context.Background(), provider,
		subagent.StartRequest{Label: "lbl " + task, Prompt: []content.Block{content.Text(task)}, Parent: parent}, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	return acc
}

func (w *world) followup(parent *agent.Agent, id, text string) string {
	w.t.Helper()
	mid, err := w.svc.Followup(context.Background(), parent, id, []content.Block{content.Text(text)})
	if err != nil {
		w.t.Fatal(err)
	}
	return mid
}

// waitFor polls cond until it holds; a minute without it fails the test
// (a hang, not a slow run).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settled waits until n activations ended and every agent but the
// parents went idle.
func (w *world) settled(n int) []subagent.Ended {
	w.t.Helper()
	waitFor(w.t, "settlements", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.ended) >= n
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ended)
}

// idle waits until a's driver stopped and nothing below it works.
func (w *world) idle(a *agent.Agent) {
	w.t.Helper()
	waitFor(w.t, "idle "+a.ID(), func() bool { return a.Status() == agent.StatusIdle && !w.svc.Working(a.ID()) })
}

// notices returns the settlement notices and reports a's log holds.
func notices(a *agent.Agent, form string) []content.Message {
	var out []content.Message
	for _, e := range a.Session().Events() {
		if m, ok := e.Data.(content.Message); ok && e.Type == session.TypeUserMessage && m.Source.Plugin == subagent.SourcePlugin && m.Source.Form == form {
			out = append(out, m)
		}
	}
	return out
}

func descriptors(t *testing.T, events []session.Event) []subagent.Descriptor {
	t.Helper()
	var out []subagent.Descriptor
	for _, e := range events {
		if e.Type == subagent.DescriptorType {
			raw, _ := e.Data.(json.RawMessage)
			d, ok, err := subagent.ParseDescriptor(raw)
			if err != nil || !ok {
				t.Fatalf("descriptor %s: %v", e.Data, err)
			}
			out = append(out, d)
		}
	}
	return out
}

// childRequests returns the model requests of session id.
func (w *world) childRequests(id string) []*llm.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*llm.Request
	for _, r := range w.requests {
		if r.SessionID == id {
			out = append(out, r)
		}
	}
	return out
}

// R1, R9, C8, U1-U3, T2, S1 (cold), S3, S6-S7: a continuable child is
// accepted before any model request, settles with one notice that wakes
// its idle parent, leaves no agent behind, and a follow-up rebuilds it
// from its log: the model sees its earlier conversation, and the log keeps
// exactly one descriptor.
func TestContinuableChildSettlesAndResumesCold(t *testing.T) {
	w := newWorld(t, t.TempDir(), nil)
	w.provider("spawn", false)
	parent := w.newParent("")
	acc := w.start(parent, "spawn", "count the files", subagent.ContinuableOptions{})
	if acc.ChildID == "" || acc.MessageID == "" {
		t.Fatalf("accepted %+v", acc)
	}
	ends := w.settled(1)
	w.idle(parent)
	if ends[0].ChildID != acc.ChildID || ends[0].Provider != "spawn" || ends[0].StopReason != subagent.Completed {
		t.Errorf("end %+v", ends[0])
	}
	if _, live := w.agents.Get(acc.ChildID); live {
		t.Error("the settled child's agent is still live")
	}
	got := notices(parent, subagent.FormSettled)
	if len(got) != 1 {
		t.Fatalf("%d notices, want 1", len(got))
	}
	want := "Background subagent " + acc.ChildID + " finished and will do no further work unless you send it more.\nIts closing message:\nanswer to count the files"
	if text := content.JoinText(got[0].Content); text != want || got[0].Source.Sender != acc.ChildID {
		t.Errorf("notice %q from %q, want %q", text, got[0].Source.Sender, want)
	}
	if parent.Session().LastTurn() != 1 {
		t.Errorf("the notice opened %d turns in the idle parent, want 1", parent.Session().LastTurn())
	}

	w.followup(parent, acc.ChildID, "and the directories?")
	w.settled(2)
	w.idle(parent)
	reqs := w.childRequests(acc.ChildID)
	last := requestTexts(reqs[len(reqs)-1])
	if !slices.Equal(last, []string{"count the files", "answer to count the files", "and the directories?"}) {
		t.Errorf("the resumed child's request holds %q", last)
	}
	_, events, err := w.store.Read(acc.ChildID)
	if err != nil {
		t.Fatal(err)
	}
	ds := descriptors(t, events)
	if len(ds) != 1 || ds[0].Mode != subagent.Continuable || ds[0].Provider != "spawn" || ds[0].Label != "lbl count the files" ||
		ds[0].AgentProvider != "test" || ds[0].Policy == nil {
		t.Errorf("descriptors %+v", ds)
	}
	if i := slices.IndexFunc(events, func(e session.Event) bool { return e.Type == subagent.DescriptorType }); i < 0 ||
		i > slices.IndexFunc(events, func(e session.Event) bool { return e.Type == session.TypeTurnStart }) {
		t.Error("the descriptor does not come before the first turn")
	}
	if n := len(notices(parent, subagent.FormSettled)); n != 2 {
		t.Errorf("%d notices after the follow-up, want 2", n)
	}
	relayed := false
	for _, e := range events {
		if m, ok := e.Data.(content.Message); ok && m.Source.Form == subagent.FormRelay && m.Source.Sender == parent.ID() {
			relayed = true
		}
	}
	if !relayed {
		t.Error("the follow-up does not name its sender")
	}
}
