package continuable_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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
	"github.com/dsh-go/dsh/subagent/continuable"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
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
			_, task, _ := prompt.SplitChildTask(content.JoinText(m.Content))
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
			_, task, _ := prompt.SplitChildTask(t)
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
	build, err := inproc.NewBuilder(w.agents)
	if err != nil {
		t.Fatal(err)
	}
	continuable.Serve(w.svc, w.agents, w.store, build)
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

// waitFor polls cond on the real clock until it holds; a minute without it
// fails the test (a hang, not a slow run). It is for tests that race
// goroutines on purpose: the others run in a bubble and use onceBlocked.
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

// onceBlocked waits, in the test's bubble, until every other goroutine is
// durably blocked; cond must hold then.
func onceBlocked(t *testing.T, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	if !cond() {
		t.Fatalf("every goroutine is blocked, and still not: %s", what)
	}
}

// settled waits until every goroutine is blocked and requires at least n
// activations to have ended then.
func (w *world) settled(n int) []subagent.Ended {
	w.t.Helper()
	synctest.Wait()
	w.mu.Lock()
	ended := slices.Clone(w.ended)
	w.mu.Unlock()
	if len(ended) < n {
		w.t.Fatalf("every goroutine is blocked, and %d activations ended, want %d", len(ended), n)
	}
	return ended
}

// quiet reports whether a's driver stopped and nothing below it works.
func (w *world) quiet(a *agent.Agent) bool {
	return a.Status() == agent.StatusIdle && !w.svc.Working(a.ID())
}

// idle waits until every goroutine is blocked and requires a to be quiet
// then.
func (w *world) idle(a *agent.Agent) {
	w.t.Helper()
	onceBlocked(w.t, a.ID()+" and all below it idle", func() bool { return w.quiet(a) })
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
	synctest.Test(t, func(t *testing.T) {
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
		// D10-D12: one subagent/start and one subagent/end per epoch, paired.
		w.mu.Lock()
		if len(w.started) != 2 || len(w.ended) != 2 || w.started[0].RunID != w.ended[0].RunID || w.started[1].RunID != w.ended[1].RunID ||
			w.started[0].RunID == w.started[1].RunID || w.started[1].ChildID != acc.ChildID {
			t.Errorf("starts %+v, ends %+v", w.started, w.ended)
		}
		w.mu.Unlock()
		relayed := false
		for _, e := range events {
			if m, ok := e.Data.(content.Message); ok && m.Source.Form == subagent.FormRelay && m.Source.Sender == parent.ID() {
				relayed = true
			}
		}
		if !relayed {
			t.Error("the follow-up does not name its sender")
		}
	})
}

// Settlement notices wake an idle parent at most LimitWakes times in a row:
// the next one waits, unclaimed, for the parent's next turn, and a message
// of its user renews the budget. A model that sends its child more work at
// every notice cannot keep itself busy forever.
func TestSettlementNoticesWakeAtMostLimitTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.svc.LimitWakes(2)
		w.provider("spawn", false)
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "round 1", subagent.ContinuableOptions{})
		w.settled(1)
		w.idle(parent)
		w.followup(parent, acc.ChildID, "round 2")
		w.settled(2)
		w.idle(parent)
		if got := parent.Session().LastTurn(); got != 2 {
			t.Fatalf("two notices opened %d turns, want 2", got)
		}
		w.followup(parent, acc.ChildID, "round 3")
		w.settled(3)
		w.idle(parent)
		if got := parent.Session().LastTurn(); got != 2 {
			t.Fatalf("the third notice opened a turn past the budget of 2 (%d turns)", got)
		}
		if n := len(notices(parent, subagent.FormSettled)); n != 2 {
			t.Fatalf("%d notices claimed, want 2 (the third waits)", n)
		}

		if _, err := parent.Run(context.Background(), content.UserText("go on")); err != nil {
			t.Fatal(err)
		}
		if n := len(notices(parent, subagent.FormSettled)); n != 3 {
			t.Fatalf("the user's turn claimed %d notices in all, want 3", n)
		}
		w.followup(parent, acc.ChildID, "round 4")
		w.settled(4)
		w.idle(parent)
		if got := parent.Session().LastTurn(); got != 4 {
			t.Fatalf("after the user's turn a notice opened no turn (%d turns, want 4)", got)
		}
	})
}

// S7, C6, R4: a child is continued by another process (a second world over
// the same store), from its log alone, after its parent was resumed too and
// with no provider registered at all; lifecycle events still name the
// provider that started it. A reserved id is used verbatim and cannot be
// taken again, not even after the first child settled.
func TestColdResumeInANewProcessWithoutItsProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		first := newWorld(t, dir, nil)
		first.provider("fork", true)
		parent := first.newParent("")
		if _, err := parent.Run(context.Background(), content.UserText("context the fork inherits")); err != nil {
			t.Fatal(err)
		}
		acc := first.start(parent, "fork", "first task", subagent.ContinuableOptions{ChildID: "child-1", Foreground: true})
		res, err := acc.Wait(context.Background())
		if err != nil || res.StopReason != subagent.Completed || content.JoinText(res.Output) != "answer to first task" || acc.ChildID != "child-1" {
			t.Fatalf("foreground result %+v, %v", res, err)
		}
		first.settled(1)
		if n := len(notices(parent, subagent.FormSettled)); n != 0 {
			t.Errorf("a foreground start's result came with %d notices too", n)
		}
		_, err = first.svc.StartContinuable(context.Background(), "fork", subagent.StartRequest{Label: "again",
			Prompt: []content.Block{content.Text("x")}, Parent: parent}, subagent.ContinuableOptions{ChildID: "child-1"})
		if !errors.Is(err, subagent.ErrDuplicateChild) {
			t.Errorf("reusing a stored child id: %v", err)
		}
		first.close()

		second := newWorld(t, dir, nil)
		resumed := second.newParent(parent.ID())
		second.followup(resumed, "child-1", "second task")
		ends := second.settled(1)
		second.idle(resumed)
		if ends[0].Provider != "fork" || ends[0].StopReason != subagent.Completed {
			t.Errorf("end %+v", ends[0])
		}
		reqs := second.childRequests("child-1")
		if got := requestTexts(reqs[0]); !slices.Equal(got, []string{"context the fork inherits", "answer to context the fork inherits",
			"first task", "answer to first task", "second task"}) {
			t.Errorf("the rebuilt fork child's request holds %q", got)
		}
		if got := notices(resumed, subagent.FormSettled); len(got) != 1 || !strings.Contains(content.JoinText(got[0].Content), "answer to second task") {
			t.Errorf("notices %+v", got)
		}
	})
}

// blocker is a model reply that holds a turn until released.
type blocker struct {
	release chan struct{}
	entered chan string
}

func newBlocker() *blocker {
	return &blocker{release: make(chan struct{}), entered: make(chan string, 16)}
}

func (b *blocker) entry(text string) scripted.Entry {
	return scripted.Entry{Reply: func(*llm.Request) []content.Chunk {
		b.entered <- text
		<-b.release
		return scripted.Text(text).Chunks
	}}
}

// S1, S2, T1: follow-ups to a running child queue as later turns of the
// same agent, in the order accepted; the child settles once, after the
// last.
func TestFollowupsToARunningChildQueueInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		b := newBlocker()
		w.setReply(func(req *llm.Request, last string) scripted.Entry {
			if last == "slow" {
				return b.entry("slow done")
			}
			return scripted.Text("answer to " + last)
		})
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "slow", subagent.ContinuableOptions{})
		<-b.entered
		child, ok := w.agents.Get(acc.ChildID)
		if !ok {
			t.Fatal("no live child")
		}
		ids := []string{w.followup(parent, acc.ChildID, "one"), w.followup(parent, acc.ChildID, "two")}
		if ids[0] == ids[1] || ids[0] == acc.MessageID {
			t.Errorf("message ids %v, %s are not distinct", ids, acc.MessageID)
		}
		if again, _ := w.agents.Get(acc.ChildID); again != child {
			t.Error("a follow-up replaced the running agent")
		}
		if got := w.svc.Residency(acc.ChildID); got != subagent.ResidentRunning {
			t.Errorf("residency %s", got)
		}
		close(b.release)
		ends := w.settled(1)
		w.idle(parent)
		if len(ends) != 1 {
			t.Fatalf("%d settlements", len(ends))
		}
		var turns []string
		for _, e := range child.Session().Events() {
			if m, ok := e.Data.(content.Message); ok && e.Type == session.TypeUserMessage {
				_, task, _ := prompt.SplitChildTask(content.JoinText(m.Content))
				turns = append(turns, task)
			}
		}
		if !slices.Equal(turns, []string{"slow", "one", "two"}) || child.Session().LastTurn() != 3 {
			t.Errorf("turns %q (%d)", turns, child.Session().LastTurn())
		}
		if got := notices(parent, subagent.FormSettled); len(got) != 1 || !strings.Contains(content.JoinText(got[0].Content), "answer to two") {
			t.Errorf("notices %v", got)
		}
	})
}

// R2, R3, R4, S4, S6, CONTINUATION_UNAVAILABLE: the refusals, each before
// anything is created.
func TestContinuationRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newWorld(t, t.TempDir(), session.NewMemoryBackend())
		mem.provider("spawn", false)
		memParent := mem.newParent("")
		_, err := mem.svc.StartContinuable(context.Background(), "spawn", subagent.StartRequest{Label: "x", Prompt: []content.Block{content.Text("x")}, Parent: memParent}, subagent.ContinuableOptions{})
		if !errors.Is(err, subagent.ErrPersistence) {
			t.Errorf("memory store: %v", err)
		}
		if mem.svc.CanContinue("spawn") {
			t.Error("CanContinue over a memory store")
		}

		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		parent := w.newParent("")
		req := subagent.StartRequest{Label: "x", Prompt: []content.Block{content.Text("x")}, Parent: parent}
		if _, err := w.svc.StartContinuable(context.Background(), "nope", req, subagent.ContinuableOptions{}); !errors.Is(err, subagent.ErrNoProvider) {
			t.Errorf("unknown provider: %v", err)
		}
		if _, err := w.svc.Register(scriptedProvider("oneshot")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.StartContinuable(context.Background(), "oneshot", req, subagent.ContinuableOptions{}); !errors.Is(err, subagent.ErrUnsupportedCapability) {
			t.Errorf("a provider that cannot continue: %v", err)
		}
		if _, err := w.svc.StartContinuable(context.Background(), "spawn", req, subagent.ContinuableOptions{ChildID: parent.ID()}); !errors.Is(err, subagent.ErrDuplicateChild) {
			t.Errorf("a live id: %v", err)
		}
		if _, err := subagent.NewService(nil, nil).StartContinuable(context.Background(), "spawn", req, subagent.ContinuableOptions{}); err == nil ||
			!strings.Contains(err.Error(), "continuation") {
			t.Errorf("no continuation: %v", err)
		}
		if _, err := w.svc.Followup(context.Background(), parent, "unknown", []content.Block{content.Text("x")}); !errors.Is(err, subagent.ErrNotResumable) ||
			!strings.Contains(err.Error(), "unavailable") {
			t.Errorf("unknown child: %v", err)
		}

		// A one-shot child is not resumable; another agent's child is not
		// the caller's; a stale caller is nobody.
		run, err := w.svc.Start(context.Background(), "spawn", req)
		if err != nil {
			t.Fatal(err)
		}
		run.Wait(context.Background())
		run.Dispose(context.Background())
		if _, err := w.svc.Followup(context.Background(), parent, run.ID(), []content.Block{content.Text("x")}); !errors.Is(err, subagent.ErrNotResumable) ||
			!strings.Contains(err.Error(), "do not retry") {
			t.Errorf("one-shot child: %v", err)
		}
		acc := w.start(parent, "spawn", "mine", subagent.ContinuableOptions{})
		w.settled(2)
		stranger := w.newParent("")
		if _, err := w.svc.Followup(context.Background(), stranger, acc.ChildID, []content.Block{content.Text("x")}); !errors.Is(err, subagent.ErrUnauthorized) ||
			!strings.Contains(err.Error(), "another parent") {
			t.Errorf("stranger: %v", err)
		}
		stranger.Dispose(context.Background())
		if _, err := w.svc.Followup(context.Background(), stranger, acc.ChildID, []content.Block{content.Text("x")}); !errors.Is(err, subagent.ErrUnauthorized) {
			t.Errorf("stale caller: %v", err)
		}
		if got := len(w.agents.List()); got != 1 {
			t.Errorf("%d live agents after the refusals, want only the parent", got)
		}
	})
}

func scriptedProvider(name string) subagent.Provider {
	return &subagenttest.Provider{ProviderName: name}
}

// V1-V5: the parent interrupts its running child: the turn ends aborted,
// the queued follow-up waits parked in the same resident agent, and the
// next follow-up runs the parked one first. Self, a stranger and a stale
// caller are refused without touching the child; an absent target is an
// accepted no-op.
func TestInterruptParksTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		hung := make(chan struct{}, 4)
		w.setReply(func(req *llm.Request, last string) scripted.Entry {
			if last == "long" {
				hung <- struct{}{}
				return scripted.Hang("working")
			}
			return scripted.Text("answer to " + last)
		})
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "long", subagent.ContinuableOptions{})
		<-hung
		child, _ := w.agents.Get(acc.ChildID)
		w.followup(parent, acc.ChildID, "parked")

		stranger := w.newParent("")
		for name, caller := range map[string]*agent.Agent{"self": child, "stranger": stranger} {
			if err := w.svc.Interrupt(caller, acc.ChildID); !errors.Is(err, subagent.ErrUnauthorized) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if child.Status() != agent.StatusRunning {
			t.Fatal("a refused interrupt touched the child")
		}
		if err := w.svc.Interrupt(parent, "nobody"); err != nil {
			t.Errorf("absent target: %v", err)
		}
		if err := w.svc.Interrupt(parent, acc.ChildID); err != nil {
			t.Fatal(err)
		}
		onceBlocked(t, "the interrupted turn ended", func() bool { return child.Status() == agent.StatusIdle })
		if child.Queued() != 1 || w.svc.Residency(acc.ChildID) != subagent.ResidentIdle {
			t.Fatalf("queued %d, residency %s: want the follow-up parked in a resident child", child.Queued(), w.svc.Residency(acc.ChildID))
		}
		if w.svc.Working(parent.ID()) {
			t.Error("a parked child counts as working")
		}
		w.followup(parent, acc.ChildID, "wake")
		ends := w.settled(1)
		w.idle(parent)
		var kinds []string
		for _, e := range child.Session().Events() {
			if d, ok := e.Data.(session.TurnEnd); ok {
				kinds = append(kinds, d.Reason.Kind)
			}
		}
		if !slices.Equal(kinds, []string{"aborted", "completed", "completed"}) || ends[0].StopReason != subagent.Completed {
			t.Errorf("turns %v, end %s", kinds, ends[0].StopReason)
		}
		got := requestTexts(w.childRequests(acc.ChildID)[1])
		if got[len(got)-1] != "parked" {
			t.Errorf("the parked follow-up did not run first: %q", got)
		}
		stranger.Dispose(context.Background())
		if err := w.svc.Interrupt(stranger, acc.ChildID); !errors.Is(err, subagent.ErrUnauthorized) {
			t.Errorf("stale caller: %v", err)
		}
	})
}

// U3: an interrupted child with nothing queued settles "stopped".
func TestInterruptedChildSettlesStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		hung := make(chan struct{}, 1)
		w.setReply(func(req *llm.Request, last string) scripted.Entry {
			if last == "long" {
				hung <- struct{}{}
				return scripted.Hang("half")
			}
			return scripted.Text("ok")
		})
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "long", subagent.ContinuableOptions{})
		<-hung
		if err := w.svc.Interrupt(parent, acc.ChildID); err != nil {
			t.Fatal(err)
		}
		ends := w.settled(1)
		w.idle(parent)
		got := notices(parent, subagent.FormSettled)
		if ends[0].StopReason != subagent.Aborted || len(got) != 1 ||
			!strings.HasPrefix(content.JoinText(got[0].Content), "Background subagent "+acc.ChildID+" was stopped before it finished.") {
			t.Errorf("end %s, notices %v", ends[0].StopReason, got)
		}
	})
}

// W1-W5: a child reports to its parent while it works: the parent gets
// "reported:" and the output, then the settlement notice, in that order;
// reporting neither ends the child's turn nor its activation. A root, a
// one-shot child and a child whose parent is gone cannot report.
func TestReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		b := newBlocker()
		w.setReply(func(req *llm.Request, last string) scripted.Entry {
			if last == "dig" {
				return b.entry("dug")
			}
			return scripted.Text("ok")
		})
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "dig", subagent.ContinuableOptions{})
		<-b.entered
		child, _ := w.agents.Get(acc.ChildID)
		id, err := w.svc.Report(context.Background(), child, []content.Block{content.Text("found a bug")}, false)
		if err != nil || id == "" {
			t.Fatalf("report: %q, %v", id, err)
		}
		if child.Status() != agent.StatusRunning {
			t.Error("reporting ended the child's turn")
		}
		if _, err := w.svc.Report(context.Background(), parent, []content.Block{content.Text("x")}, false); !errors.Is(err, subagent.ErrUnauthorized) {
			t.Errorf("a root reports: %v", err)
		}
		close(b.release)
		w.settled(1)
		w.idle(parent)
		var forms []string
		for _, e := range parent.Session().Events() {
			if m, ok := e.Data.(content.Message); ok && m.Source.Plugin == subagent.SourcePlugin {
				forms = append(forms, m.Source.Form+":"+content.JoinText(m.Content))
			}
		}
		if len(forms) != 2 || forms[0] != "report:Background subagent "+acc.ChildID+" reported:found a bug" || !strings.HasPrefix(forms[1], "settled:") {
			t.Errorf("the parent received %q", forms)
		}
	})
}

// T3, U7, U8: a child that started a grandchild stays resident, waiting,
// until the grandchild settled; the grandchild's notice reaches the child
// (a later turn of the same agent), never the root; the child settles
// after it, so the root's one notice comes last.
func TestChildWaitsForItsOwnChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		middle, b := newBlocker(), newBlocker()
		w.setReply(func(req *llm.Request, last string) scripted.Entry {
			switch last {
			case "middle":
				return middle.entry("middle done")
			case "grand":
				return b.entry("grand done")
			}
			return scripted.Text("answer to " + last)
		})
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "middle", subagent.ContinuableOptions{})
		<-middle.entered
		child, ok := w.agents.Get(acc.ChildID)
		if !ok {
			t.Fatal("no child")
		}
		grand := w.start(child, "spawn", "grand", subagent.ContinuableOptions{})
		<-b.entered
		close(middle.release)
		onceBlocked(t, "the child's first turn ended", func() bool { return child.Status() == agent.StatusIdle })
		if w.svc.Residency(acc.ChildID) != subagent.ResidentIdle || !w.svc.Working(parent.ID()) {
			t.Fatalf("residency %s, working %v: the child must wait for its grandchild", w.svc.Residency(acc.ChildID), w.svc.Working(parent.ID()))
		}
		close(b.release)
		w.settled(2)
		w.idle(parent)
		if again, _ := w.agents.Get(acc.ChildID); again != nil {
			t.Error("the child is still live")
		}
		if got := notices(child, subagent.FormSettled); len(got) != 1 || got[0].Source.Sender != grand.ChildID {
			t.Errorf("the child's notices: %v", got)
		}
		if got := notices(parent, subagent.FormSettled); len(got) != 1 || got[0].Source.Sender != acc.ChildID {
			t.Errorf("the root's notices: %v", got)
		}
		if child.Session().LastTurn() != 2 {
			t.Errorf("the grandchild's notice opened %d turns in the child, want a second one", child.Session().LastTurn())
		}
	})
}

// V4: a deep ancestor may interrupt a grandchild.
func TestDeepAncestorInterrupts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		middle := newBlocker()
		hung := make(chan struct{}, 1)
		w.setReply(func(req *llm.Request, last string) scripted.Entry {
			switch last {
			case "middle":
				return middle.entry("middle done")
			case "grand":
				hung <- struct{}{}
				return scripted.Hang("…")
			}
			return scripted.Text("ok")
		})
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "middle", subagent.ContinuableOptions{})
		<-middle.entered
		child, _ := w.agents.Get(acc.ChildID)
		grand := w.start(child, "spawn", "grand", subagent.ContinuableOptions{})
		<-hung
		close(middle.release)
		if err := w.svc.Interrupt(parent, grand.ChildID); err != nil {
			t.Fatalf("deep ancestor interrupt: %v", err)
		}
		for _, e := range w.settled(2) {
			if e.ChildID == grand.ChildID && e.StopReason != subagent.Aborted {
				t.Errorf("the interrupted grandchild ended %s", e.StopReason)
			}
		}
		w.idle(parent)
	})
}

// S9: a follow-up racing an activation's final disposal is never lost and
// never delivered twice: it enters the live inbox or waits and resumes the
// child cold. Every accepted message reaches the child's log exactly once.
func TestFollowupRacingDisposal(t *testing.T) {
	w := newWorld(t, t.TempDir(), nil)
	w.provider("spawn", false)
	parent := w.newParent("")
	acc := w.start(parent, "spawn", "start", subagent.ContinuableOptions{})
	const rounds = 40
	sent := map[string]bool{}
	routes := map[subagent.Residency]int{}
	for range rounds {
		// Each follow-up lands while the child settles, or after it is
		// gone, or, now and then, while it still runs.
		if rand.IntN(4) > 0 {
			waitFor(t, "the turn's end", func() bool { return w.svc.Residency(acc.ChildID) != subagent.ResidentRunning })
		}
		routes[w.svc.Residency(acc.ChildID)]++
		sent[w.followup(parent, acc.ChildID, "again")] = true
		for range rand.IntN(3) {
			runtime.Gosched()
		}
	}
	waitFor(t, "idle "+parent.ID(), func() bool { return w.quiet(parent) })
	t.Logf("routes before each follow-up: %v", routes)
	_, events, err := w.store.Read(acc.ChildID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range events {
		if m, ok := e.Data.(content.Message); ok && e.Type == session.TypeUserMessage {
			seen[m.ID]++
		}
	}
	for id := range sent {
		if seen[id] != 1 {
			t.Errorf("message %s is in the log %d times", id, seen[id])
		}
	}
	if n := len(descriptors(t, events)); n != 1 {
		t.Errorf("%d descriptors after %d cold resumes", n, rounds)
	}
}

// Y2-Y9: children are listed from the store and the live sessions, oldest
// first, continuable and one-shot alike, live or not; a child whose log
// holds no descriptor is a corrupt diagnostic; descendants come in
// pre-order with their parent and depth. A cancelled listing fails whole.
func TestListChildrenAndDescendants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		b := newBlocker()
		w.setReply(func(req *llm.Request, last string) scripted.Entry {
			if last == "busy" {
				return b.entry("done")
			}
			return scripted.Text("ok")
		})
		parent := w.newParent("")
		first := w.start(parent, "spawn", "first", subagent.ContinuableOptions{})
		w.settled(1)
		time.Sleep(time.Millisecond) // the bubble's clock moves on: every later child is younger (CreatedAt is in ms)
		run, err := w.svc.Start(context.Background(), "spawn", subagent.StartRequest{Label: "once", Prompt: []content.Block{content.Text("once")}, Parent: parent})
		if err != nil {
			t.Fatal(err)
		}
		run.Wait(context.Background())
		run.Dispose(context.Background())
		// A child session with no descriptor: written by something else.
		_, detach, err := w.store.Create(session.CreateOptions{ID: "bare", ParentSession: parent.ID(), Origin: session.OriginSubagent})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := w.store.Get("bare")
		s.Append(session.TypeTurnStart, session.TurnStart{Turn: 1})
		s.Append(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}})
		detach()
		busy := w.start(parent, "spawn", "busy", subagent.ContinuableOptions{})
		<-b.entered
		child, _ := w.agents.Get(busy.ChildID)
		grand := w.start(child, "spawn", "busy", subagent.ContinuableOptions{})
		<-b.entered

		rows, err := w.svc.ListChildren(context.Background(), parent.ID())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]subagent.ChildRow{}
		for _, r := range rows {
			got[r.ID] = r
		}
		if len(rows) != 4 || rows[0].ID != first.ChildID {
			t.Fatalf("rows %+v", rows)
		}
		if r := got[first.ChildID]; r.Mode != subagent.Continuable || r.Label != "lbl first" || r.Live || r.HasChildren || r.Diagnostic != "" {
			t.Errorf("settled child %+v", r)
		}
		if r := got[run.ID()]; r.Mode != subagent.OneShot || r.Label != "once" {
			t.Errorf("one-shot child %+v", r)
		}
		if r := got["bare"]; r.Diagnostic != subagent.DiagnosticCorrupt {
			t.Errorf("bare child %+v", r)
		}
		if r := got[busy.ChildID]; !r.Live || !r.HasChildren {
			t.Errorf("live child %+v", r)
		}
		desc, err := w.svc.ListDescendants(context.Background(), parent.ID())
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, r := range desc {
			order = append(order, r.ID)
			if r.ID == grand.ChildID && (r.Parent != busy.ChildID || r.Depth != 2) {
				t.Errorf("grandchild row %+v", r)
			}
		}
		if i := slices.Index(order, busy.ChildID); i < 0 || i+1 >= len(order) || order[i+1] != grand.ChildID || len(order) != 5 {
			t.Errorf("descendants in order %v: want the grandchild right after its parent", order)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := w.svc.ListChildren(ctx, parent.ID()); err == nil || !strings.Contains(err.Error(), "cancelled") {
			t.Errorf("cancelled listing: %v", err)
		}
		close(b.release)
		w.settled(4)
		w.idle(parent)
	})
}

// T7, S11: draining tears every resident child down, refuses new ones
// (DRAINING) and leaves no goroutine (goleak checks at exit); the parent
// is not woken by the notices.
func TestDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		w.setReply(func(req *llm.Request, last string) scripted.Entry { return scripted.Hang("…") })
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "forever", subagent.ContinuableOptions{})
		child, _ := w.agents.Get(acc.ChildID)
		w.start(child, "spawn", "below", subagent.ContinuableOptions{})
		if err := w.svc.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(w.agents.List()); n != 1 {
			t.Errorf("%d agents after the drain, want the parent alone", n)
		}
		if _, err := w.svc.Followup(context.Background(), parent, acc.ChildID, []content.Block{content.Text("x")}); !errors.Is(err, subagent.ErrDraining) {
			t.Errorf("follow-up after the drain: %v", err)
		}
		if parent.Status() != agent.StatusIdle || parent.Session().LastTurn() != 0 {
			t.Error("a drained child's notice woke its parent")
		}
		for _, e := range w.settled(2) {
			if e.StopReason != subagent.Aborted {
				t.Errorf("a drained child ended %s", e.StopReason)
			}
		}
	})
}

// T10, S11: a follow-up racing the service's drain is either refused
// (DRAINING, and nothing of it reaches the child's log) or admitted, and
// then enqueued before the drain cancels the child: its insertion is in the
// child's log, which stays balanced. Several rounds race the two.
func TestFollowupRacingDrain(t *testing.T) {
	for round := range 8 {
		w := newWorld(t, t.TempDir(), nil)
		w.provider("spawn", false)
		w.setReply(func(req *llm.Request, last string) scripted.Entry { return scripted.Hang("…") })
		parent := w.newParent("")
		acc := w.start(parent, "spawn", "work", subagent.ContinuableOptions{})
		var wg sync.WaitGroup
		ids := make(chan string, 1)
		wg.Go(func() {
			for range rand.IntN(50) {
				runtime.Gosched()
			}
			id, err := w.svc.Followup(context.Background(), parent, acc.ChildID, []content.Block{content.Text("late")})
			if err != nil && !errors.Is(err, subagent.ErrDraining) {
				t.Errorf("round %d: follow-up: %v", round, err)
			}
			ids <- id
		})
		if err := w.svc.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		id := <-ids
		_, events, err := w.store.Read(acc.ChildID)
		if err != nil {
			t.Fatal(err)
		}
		if err := session.CheckBalanced(events); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
		inserted := false
		for _, e := range events {
			if sp, ok := e.Data.(session.InboxSpliced); ok && slices.ContainsFunc(sp.Inserted, func(m content.Message) bool { return m.ID == id }) {
				inserted = true
			}
		}
		if (id != "") != inserted {
			t.Errorf("round %d: accepted %q, in the log %v", round, id, inserted)
		}
		w.close()
	}
}
