package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memLog is a child's log as its workflow keeps it: it applies a
// checkpoint by the workflow's own check. fail, when set, refuses a write.
type memLog struct {
	mu      sync.Mutex
	state   logState
	events  []session.Event
	headers []session.Header
	writes  int // checkpoints written, tails included
	tails   int // tails of outcomes among them
	fail    func(cp Checkpoint) error
	onWrite func(cp Checkpoint)
}

func (m *memLog) read(_ context.Context, _ execution, n int) ([]session.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > len(m.events) {
		return nil, fmt.Errorf("the log has %d events, not %d", len(m.events), n)
	}
	return append([]session.Event(nil), m.events[:n]...), nil
}

func (m *memLog) write(_ context.Context, _ execution, cp Checkpoint) error {
	m.mu.Lock()
	if m.fail != nil {
		if err := m.fail(cp); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	if err := m.state.check(cp); err != nil {
		m.mu.Unlock()
		return err
	}
	m.writes++
	m.state.length += len(cp.Events)
	m.events = append(m.events, cp.Events...)
	if cp.Header != nil {
		m.headers = append(m.headers, *cp.Header)
	}
	on := m.onWrite
	m.mu.Unlock()
	if on != nil {
		on(cp)
	}
	return nil
}

func (m *memLog) log() []session.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]session.Event(nil), m.events...)
}

// host is a worker's runtime around a model, running children into log.
type host struct {
	acts   *activities
	agents *agent.Registry
	tools  *tool.Registry
	llm    *llm.Registry
	log    *memLog
}

func newHost(t *testing.T, model llm.Model, log *memLog) *host {
	t.Helper()
	bus := event.New(nil)
	sess := &sessions{inner: session.NewMemoryBackend()}
	h := &host{tools: tool.NewRegistry(), llm: llm.NewRegistry(), log: log}
	if _, err := h.llm.Register("test", model); err != nil {
		t.Fatal(err)
	}
	h.agents = agent.NewRegistry(agent.Deps{Sessions: session.NewStore(sess, bus), LLM: h.llm, Tools: h.tools,
		Prompt: prompt.NewRegistry(), Events: bus, Log: slog.New(slog.DiscardHandler)})
	driver, err := inproc.New(inproc.Config{Name: Kind, Agents: h.agents})
	if err != nil {
		t.Fatal(err)
	}
	h.acts = &activities{driver: driver, host: Host{Agents: h.agents, Options: agent.Options{Provider: "test", Model: "m"}, Cwd: t.TempDir()},
		store: log, sessions: sess, caps: &depthCaps{}, heartbeat: 5 * time.Millisecond, timeout: 10 * time.Second}
	t.Cleanup(func() {
		if n := len(h.agents.List()); n != 0 {
			t.Errorf("%d agents outlived their attempt", n)
		}
	})
	return h
}

// attempt runs one attempt in a test activity environment; stop, when
// non-nil, is the worker's stop channel.
func (h *host) attempt(t *testing.T, at Attempt, stop chan struct{}) (Outcome, error) {
	t.Helper()
	env := suite().NewTestActivityEnvironment()
	if stop != nil {
		env.SetWorkerStopChannel(stop)
	}
	env.RegisterActivityWithOptions(h.acts.RunChild, activity.RegisterOptions{Name: ActivityName})
	h.log.mu.Lock()
	h.log.state.attempt = at.Attempt
	h.log.mu.Unlock()
	val, err := env.ExecuteActivity(ActivityName, at)
	if err != nil {
		return Outcome{}, err
	}
	var out Outcome
	if err := val.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.Tail != nil { // the workflow adds it to the log
		h.log.mu.Lock()
		h.log.state.running = nil
		err := h.log.state.continues(*out.Tail)
		h.log.mu.Unlock()
		if err != nil {
			t.Fatalf("the outcome's tail: %v", err)
		}
		h.log.tails++
		if err := h.log.write(context.Background(), execution{}, *out.Tail); err != nil {
			t.Fatal(err)
		}
	}
	return out, nil
}

func errType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// A new child runs with the in-process driver: its log reaches the
// workflow at step boundaries, claimed first with the child's lineage;
// persona, filter, output schema and policy apply.
func TestRunChild(t *testing.T) {
	model := scripted.New(
		scripted.ToolCalls("", scripted.Call{Name: "look", Arguments: `{}`}),
		scripted.ToolCalls("", scripted.Call{Name: inproc.StructuredTool, Arguments: `{"answer":3}`}))
	h := newHost(t, model, &memLog{})
	var ran []string
	for _, name := range []string{"look", "hidden", "denied"} {
		h.tools.Register(tool.Definition{Name: name, Execute: func(context.Context, tool.Call) (tool.Result, error) {
			ran = append(ran, name)
			return tool.TextResult("seen"), nil
		}})
	}
	deny, _ := permission.New(permission.Rules{Tools: map[string]permission.Decision{"denied": permission.Deny}})
	h.acts.host.Policy = deny
	in := testInput()
	persona := "Answer in numbers."
	in.Persona, in.ToolFilter = &persona, &tool.Restriction{Deny: []string{"hidden"}}
	schema, _ := json.Marshal(&jsonschema.Schema{Type: "object", Required: []string{"answer"},
		Properties: map[string]*jsonschema.Schema{"answer": {Type: "integer"}}})
	in.OutputSchema = schema
	out, err := h.attempt(t, Attempt{Input: in, Attempt: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.StopReason != subagent.Completed {
		t.Fatalf("outcome %+v", out)
	}
	log := h.log.log()
	if err := session.CheckBalanced(log); err != nil {
		t.Errorf("the workflow's log: %v", err)
	}
	res, ok := inproc.LogResult(log, true)
	if !ok || fmt.Sprint(res.Structured) != "map[answer:3]" || res.StopReason != subagent.Completed {
		t.Errorf("the workflow's log shows %+v, %v", res, ok)
	}
	if hs := h.log.headers; len(hs) != 1 || hs[0].ID != "child" || hs[0].ParentSession != "parent" || hs[0].DelegationDepth != 1 ||
		hs[0].Origin != session.OriginSubagent || hs[0].Cwd != h.acts.host.Cwd {
		t.Errorf("claims %+v: want one, with the child's lineage and the worker's workspace", hs)
	}
	if h.log.writes != 5 || h.log.tails != 1 {
		t.Errorf("%d checkpoints (%d tails) for two steps of one tool call each: want one before each model call (the first claims the log) and each tool call, "+
			"and the turn's end with the outcome (4 + 1 tail)", h.log.writes, h.log.tails)
	}
	req := model.Requests()[0]
	var tools []string
	for _, s := range req.Tools {
		tools = append(tools, s.Name)
	}
	if !strings.Contains(req.System, persona) || strings.Contains(fmt.Sprint(tools), "hidden") || !strings.Contains(fmt.Sprint(tools), inproc.StructuredTool) {
		t.Errorf("the child's request: tools %v, system %q", tools, req.System)
	}
	if fmt.Sprint(ran) != "[look]" {
		t.Errorf("tools that ran: %v", ran)
	}
}

// cut returns a child's log up to and including the end of step n of its
// turn.
func cut(t *testing.T, log []session.Event, n int) []session.Event {
	t.Helper()
	for i, e := range log {
		if s, ok := e.Data.(session.Step); ok && e.Type == session.TypeStepEnd && s.Step == n {
			return log[: i+1 : i+1]
		}
	}
	t.Fatalf("the log has no end of step %d", n)
	return nil
}

// An attempt that continues a child reads the log so far and goes on from
// it: the model answers already in the log are not asked again, and the log
// grows without a gap.
func TestRunChildContinuesTheLog(t *testing.T) {
	first := newHost(t, scripted.New(
		scripted.ToolCalls("", scripted.Call{Name: "look", Arguments: `{}`}),
		scripted.Text("finished")), &memLog{})
	first.tools.Register(tool.Definition{Name: "look", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("seen"), nil
	}})
	if _, err := first.attempt(t, Attempt{Input: testInput(), Attempt: 1}, nil); err != nil {
		t.Fatal(err)
	}
	// The first worker died after step 1: the workflow holds that much.
	done := cut(t, first.log.log(), 1)
	model := scripted.New(scripted.Text("finished"))
	second := newHost(t, model, &memLog{state: logState{length: len(done)}, events: done})
	second.tools = first.tools
	out, err := second.attempt(t, Attempt{Input: testInput(), Attempt: 2, From: len(done)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.StopReason != subagent.Completed || len(model.Requests()) != 1 {
		t.Fatalf("outcome %+v after %d model calls: want completed after one", out, len(model.Requests()))
	}
	log := second.log.log()
	if err := session.CheckBalanced(log); err != nil {
		t.Errorf("continued log: %v", err)
	}
	if res, _ := inproc.LogResult(log, false); content.JoinText(res.Output) != "finished" {
		t.Errorf("continued log's output %q", content.JoinText(res.Output))
	}
	msgs := model.Requests()[0].Messages
	if !strings.Contains(content.JoinText(msgs[len(msgs)-1].Content), inproc.ResumeText) || !strings.Contains(fmt.Sprint(msgs), "seen") {
		t.Errorf("the continued child's request does not hold its earlier work and the note to continue")
	}

	// A worker that died after the child's turn ended but before it
	// reported: the next attempt reports from the log, without the model.
	idle := scripted.New()
	third := newHost(t, idle, &memLog{state: logState{length: len(log)}, events: log})
	out, err = third.attempt(t, Attempt{Input: testInput(), Attempt: 3, From: len(log)}, nil)
	if err != nil || out.StopReason != subagent.Completed || len(idle.Requests()) != 0 {
		t.Errorf("attempt on an ended log: %+v, %v, %d model calls", out, err, len(idle.Requests()))
	}
}

// A worker that stops hands the child back: the attempt fails
// ErrHandedBack at once, and nothing of the interrupted step reaches the
// log.
func TestRunChildHandsBackOnStop(t *testing.T) {
	stop := make(chan struct{})
	log := &memLog{}
	log.onWrite = func(cp Checkpoint) {
		for _, e := range cp.Events {
			if e.Type == session.TypeTurnStart {
				close(stop)
			}
		}
	}
	h := newHost(t, scripted.New(scripted.Hang("thinking")), log)
	_, err := h.attempt(t, Attempt{Input: testInput(), Attempt: 1}, stop)
	if errType(err) != ErrHandedBack {
		t.Fatalf("attempt error %v: want %s", err, ErrHandedBack)
	}
	for _, e := range log.log() {
		if e.Type == session.TypeTurnEnd || e.Type == session.TypeAssistantChunk {
			t.Errorf("the log holds %s from the interrupted step", e.Type)
		}
	}
}

// An attempt that is not the workflow's current one writes nothing and runs
// no model; a log that cannot be written hands the child on.
func TestRunChildWriteFailures(t *testing.T) {
	model := scripted.New(scripted.Text("never"))
	stale := &memLog{}
	h := newHost(t, model, stale)
	stale.fail = func(cp Checkpoint) error {
		return temporal.NewNonRetryableApplicationError("attempt 7 runs the child", ErrSuperseded, nil)
	}
	if _, err := h.attempt(t, Attempt{Input: testInput(), Attempt: 1}, nil); errType(err) != ErrSuperseded {
		t.Errorf("a superseded attempt: %v, want %s", err, ErrSuperseded)
	}
	if len(model.Requests()) != 0 || len(stale.log()) != 0 {
		t.Errorf("a superseded attempt ran the model %d times, wrote %d events", len(model.Requests()), len(stale.log()))
	}

	gone := &memLog{}
	gone.fail = func(cp Checkpoint) error {
		if cp.Header == nil {
			return errors.New("the cluster is unreachable")
		}
		return nil
	}
	h = newHost(t, scripted.New(scripted.ToolCalls("", scripted.Call{Name: "look", Arguments: `{}`}), scripted.Text("lost")), gone)
	h.tools.Register(tool.Definition{Name: "look", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("seen"), nil
	}})
	if _, err := h.attempt(t, Attempt{Input: testInput(), Attempt: 1}, nil); errType(err) != ErrCheckpoint {
		t.Errorf("an unwritable log: %v, want %s", err, ErrCheckpoint)
	}
}

// A worker does not trust its input: a child it cannot start fails
// ErrChild, which the workflow does not retry.
func TestRunChildRefusesBadInput(t *testing.T) {
	one := 1
	for name, mutate := range map[string]func(*Input){
		"no prompt":       func(in *Input) { in.Prompt = nil },
		"past its cap":    func(in *Input) { in.Depth, in.MaxDepth = 2, &one },
		"a bad schema":    func(in *Input) { in.OutputSchema = json.RawMessage(`{"type":"array"}`) },
		"an unknown tool": func(in *Input) { in.ToolFilter = &tool.Restriction{Allow: []string{"nope"}} },
	} {
		t.Run(name, func(t *testing.T) {
			log := &memLog{}
			h := newHost(t, scripted.New(), log)
			in := testInput()
			mutate(&in)
			if _, err := h.attempt(t, Attempt{Input: in, Attempt: 1}, nil); errType(err) != ErrChild {
				t.Errorf("attempt: %v, want %s", err, ErrChild)
			}
		})
	}
}

// A worker whose runtime does not keep its sessions through the worker's
// backend cannot ship a log: it refuses the child instead of running it
// unseen.
func TestRunChildNeedsTheWorkersSessions(t *testing.T) {
	model := scripted.New(scripted.Hang(""))
	h := newHost(t, model, &memLog{})
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, nil), LLM: h.llm, Tools: h.tools,
		Prompt: prompt.NewRegistry(), Log: slog.New(slog.DiscardHandler)})
	h.acts.driver, _ = inproc.New(inproc.Config{Name: Kind, Agents: agents})
	if _, err := h.attempt(t, Attempt{Input: testInput(), Attempt: 1}, nil); errType(err) != ErrChild || !strings.Contains(err.Error(), "Worker.Sessions") {
		t.Errorf("attempt: %v", err)
	}
	if n := len(agents.List()); n != 0 {
		t.Errorf("%d agents left", n)
	}
}

// The child of a temporal child is held to the parent's depth cap, which
// goes on with the request.
func TestCapDepth(t *testing.T) {
	p := subagenttestParent(t)
	caps := &depthCaps{}
	var got *int
	inner := providerFunc(func(_ context.Context, req subagent.StartRequest) (subagent.Run, error) {
		got = req.MaxDepth
		return nil, errors.New("stop here")
	})
	w := &Worker{caps: caps}
	wrapped := w.CapDepth(inner)
	caps.set(p.ID(), 2)
	if _, err := wrapped.Start(context.Background(), subagent.StartRequest{Parent: p, Depth: 3}); !errors.Is(err, subagent.ErrDepthExceeded) {
		t.Errorf("a start past the cap: %v", err)
	}
	five := 5
	wrapped.Start(context.Background(), subagent.StartRequest{Parent: p, Depth: 2, MaxDepth: &five})
	if got == nil || *got != 2 {
		t.Errorf("the request went on with maxDepth %v, want the cap 2", got)
	}
	caps.forget(p.ID())
	got = nil
	wrapped.Start(context.Background(), subagent.StartRequest{Parent: p, Depth: 3})
	if got != nil {
		t.Errorf("a start outside any temporal child got maxDepth %d", *got)
	}
}

// The sink ships a step's events in checkpoints of at most 1 MiB, and
// refuses an event no Temporal payload can hold.
func TestSinkChunks(t *testing.T) {
	log := &memLog{state: logState{attempt: 1}}
	s := &sink{store: log, attempt: 1, ctx: context.Background(), timeout: time.Second}
	big := strings.Repeat("x", 300<<10)
	var evs []session.Event
	for i := range 7 {
		evs = append(evs, session.Event{Seq: int64(i), Type: session.TypeUserMessage, Data: content.UserText(big)})
	}
	evs = append(evs, session.Event{Seq: 7, Type: session.TypeStepStart, Data: session.Step{Turn: 1, Step: 1}})
	if err := s.Append(evs); err != nil {
		t.Fatal(err)
	}
	if len(log.log()) != 8 || log.writes < 3 {
		t.Errorf("%d events in %d checkpoints: want 8 in at least 3", len(log.log()), log.writes)
	}
	huge := session.Event{Seq: 8, Type: session.TypeToolCall, Data: content.UserText(strings.Repeat("y", 3<<20))}
	if err := s.Append([]session.Event{huge}); errType(err) != ErrChild || !strings.Contains(err.Error(), "larger than a Temporal payload") {
		t.Errorf("a 3 MiB event: %v", err)
	}
	if err := s.Close(); err == nil {
		t.Error("the sink forgot its failure")
	}
	if _, err := s.finish(); err == nil {
		t.Error("finish forgot the sink's failure")
	}
}

// The end of a turn goes with the attempt's outcome, not through a
// checkpoint: finish returns it, claiming the log when nothing else did,
// and writes first what one checkpoint cannot hold.
func TestSinkFinish(t *testing.T) {
	log := &memLog{state: logState{attempt: 1}}
	s := &sink{store: log, attempt: 1, ctx: context.Background(), timeout: time.Second}
	s.open(session.Header{ID: "child"})
	if err := s.Append([]session.Event{{Seq: 0, Type: session.TypeTurnStart, Data: session.TurnStart{Turn: 1}},
		{Seq: 1, Type: session.TypeTurnEnd, Data: session.TurnEnd{Turn: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil || log.writes != 0 {
		t.Fatalf("close: %v, %d writes: want the turn's end kept for the outcome", err, log.writes)
	}
	tail, err := s.finish()
	if err != nil || tail == nil || tail.Header == nil || tail.Header.ID != "child" || tail.From != 0 || len(tail.Events) != 2 {
		t.Fatalf("finish: %+v, %v: want both events, with the claim", tail, err)
	}
	if tail, err := s.finish(); tail != nil || err != nil {
		t.Errorf("a second finish: %+v, %v", tail, err)
	}

	big := strings.Repeat("x", 300<<10)
	log = &memLog{state: logState{attempt: 1}}
	s = &sink{store: log, attempt: 1, ctx: context.Background(), timeout: time.Second}
	s.open(session.Header{ID: "child"})
	var evs []session.Event
	for i := range 7 {
		evs = append(evs, session.Event{Seq: int64(i), Type: session.TypeUserMessage, Data: content.UserText(big)})
	}
	if err := s.Append(evs); err != nil {
		t.Fatal(err)
	}
	tail, err = s.finish()
	if err != nil || tail == nil || tail.Header != nil || len(log.headers) != 1 {
		t.Fatalf("finish: %+v, %v; %d claims: want the first written checkpoint to claim the log", tail, err, len(log.headers))
	}
	if b, _ := json.Marshal(tail); len(b) > maxCheckpointBytes+64<<10 || log.writes == 0 || len(log.log())+len(tail.Events) != 7 || tail.From != len(log.log()) {
		t.Errorf("tail of %d bytes from %d after %d writes of %d events", len(b), tail.From, log.writes, len(log.log()))
	}
}

func subagenttestParent(t *testing.T) *agent.Agent {
	return subagenttest.NewParent(t, nil, 0, agent.Options{}).Agent
}

// providerFunc is a provider that starts with a function.
type providerFunc func(ctx context.Context, req subagent.StartRequest) (subagent.Run, error)

func (f providerFunc) Name() string { return "func" }
func (f providerFunc) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{DepthLimit: true}
}
func (f providerFunc) InheritsParentContext() bool { return false }
func (f providerFunc) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	return f(ctx, req)
}

// Only the workflow's cancellation aborts the child. When the SDK gives an
// attempt up for another reason (a heartbeat the overloaded cluster did not
// answer, the activity gone), the child is handed back unwritten: before,
// it was aborted and its aborted end written to the log, and the parent got
// an aborted child from a cluster that was only slow.
func TestFollowAbortsOnlyOnCancellation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cause      error
		handedBack bool
	}{
		{"the workflow cancelled", temporal.NewCanceledError(), false},
		{"a heartbeat unanswered", serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_SYSTEM_OVERLOADED, "busy"), true},
		{"the activity gone", serviceerror.NewNotFound("no such activity"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &activities{heartbeat: time.Millisecond}
			s := &sink{}
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan struct{})
			beats := 0
			heartbeat := func() {
				if beats++; beats == 3 {
					cancel(tc.cause)
				}
			}
			stopped := false
			stop := func() {
				stopped = true
				close(done)
			}
			if got := a.follow(ctx, done, nil, heartbeat, s, stop); got != tc.handedBack || !stopped || s.silenced.Load() != tc.handedBack {
				t.Errorf("handed back %v, child stopped %v, log silenced %v: want %v, true, %v", got, stopped, s.silenced.Load(), tc.handedBack, tc.handedBack)
			}
		})
	}
}
