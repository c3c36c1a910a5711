package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a runtime wired by hand around a scripted model.
type env struct {
	t      *testing.T
	model  *scripted.Model
	store  *session.Store
	tools  *tool.Registry
	agents *agent.Registry
}

func newEnv(t *testing.T, entries ...scripted.Entry) *env {
	t.Helper()
	bus := event.New(nil)
	e := &env{t: t, model: scripted.New(entries...), store: session.NewStore(nil, bus), tools: tool.NewRegistry()}
	reg := llm.NewRegistry()
	if _, err := reg.Register("test", e.model); err != nil {
		t.Fatal(err)
	}
	e.agents = agent.NewRegistry(agent.Deps{Sessions: e.store, LLM: reg, Tools: e.tools, Prompt: prompt.NewRegistry(), Events: bus})
	t.Cleanup(func() {
		if err := e.agents.DisposeAll(context.Background()); err != nil {
			t.Errorf("dispose: %v", err)
		}
	})
	return e
}

func (e *env) create(opts agent.CreateOptions) *agent.Agent {
	e.t.Helper()
	if opts.Options.Provider == "" {
		opts.Options.Provider = "test"
	}
	a, err := e.agents.Create(context.Background(), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) tool(def tool.Definition) {
	e.t.Helper()
	if _, err := e.tools.Register(def); err != nil {
		e.t.Fatal(err)
	}
}

func run(t *testing.T, a *agent.Agent, text string) session.TurnEnd {
	t.Helper()
	end, err := a.Run(context.Background(), content.UserText(text))
	if err != nil {
		t.Fatal(err)
	}
	return end
}

func types(events []session.Event) []string {
	var out []string
	for _, e := range events {
		if e.Type != session.TypeAssistantChunk {
			out = append(out, e.Type)
		}
	}
	return out
}

func results(events []session.Event) []session.ToolResult {
	var out []session.ToolResult
	for _, e := range events {
		if r, ok := e.Data.(session.ToolResult); ok {
			out = append(out, r)
		}
	}
	return out
}

func checkBalanced(t *testing.T, a *agent.Agent) {
	t.Helper()
	if err := session.CheckBalanced(a.Session().Events()); err != nil {
		t.Fatalf("log not balanced: %v", err)
	}
}

func echoTool(name string, safe bool) tool.Definition {
	return tool.Func(name, "echoes its text", safe, func(ctx context.Context, c tool.Call, args struct {
		Text string `json:"text"`
	}) (tool.Result, error) {
		return tool.TextResult(name + ":" + args.Text), nil
	})
}

func TestTextTurn(t *testing.T) {
	e := newEnv(t, scripted.Text("hello there"))
	a := e.create(agent.CreateOptions{Cwd: t.TempDir()})
	end := run(t, a, "hi")
	if end.Reason.Kind != session.EndCompleted || end.Turn != 1 {
		t.Fatalf("end = %+v", end)
	}
	want := []string{session.TypeInboxSpliced, session.TypeTurnStart, session.TypeStepStart, session.TypeUserMessage,
		session.TypeRequestHeader, session.TypeAssistantMessage, session.TypeStepEnd, session.TypeTurnEnd}
	if got := types(a.Session().Events()); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	msgs := a.Session().Messages()
	if len(msgs) != 2 || content.JoinText(msgs[1].Content) != "hello there" {
		t.Fatalf("messages = %+v", msgs)
	}
	if u := a.Usage(); u.Input != 10 || u.Output != 5 {
		t.Fatalf("usage = %+v", u)
	}
	req := e.model.Requests()[0]
	if req.SessionID != a.ID() || len(req.Messages) != 1 || req.System == "" {
		t.Fatalf("request = %+v", req)
	}
	checkBalanced(t, a)
}

func TestMultiStepToolUse(t *testing.T) {
	e := newEnv(t,
		scripted.ToolCalls("let me check", scripted.Call{ID: "c1", Name: "echo", Arguments: `{"text":"a"}`}),
		scripted.Text("done"))
	e.tool(echoTool("echo", false))
	a := e.create(agent.CreateOptions{})
	if end := run(t, a, "go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	rs := results(a.Session().Events())
	if len(rs) != 1 || content.JoinText(rs[0].Message.Content[0].Content) != "echo:a" {
		t.Fatalf("results = %+v", rs)
	}
	second := e.model.Requests()[1]
	if n := len(second.Messages); n != 3 || second.Messages[2].Content[0].Type != content.TypeToolResult {
		t.Fatalf("second request messages = %+v", second.Messages)
	}
	if len(second.Tools) != 1 || second.Tools[0].Name != "echo" {
		t.Fatalf("tools = %+v", second.Tools)
	}
	checkBalanced(t, a)
}

// Two concurrency-safe calls must run at the same time (each waits for the
// other to start) and still be recorded in the model's order. In a bubble
// the first call finishes a fake 20ms after the second, every time; calls
// that never overlap fail at once, when the fake clock reaches the guard.
func TestParallelSafeCallsRecordedInModelOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t,
			scripted.ToolCalls("", scripted.Call{ID: "first", Name: "slow", Arguments: `{}`},
				scripted.Call{ID: "second", Name: "fast", Arguments: `{}`}),
			scripted.Text("ok"))
		var started sync.WaitGroup
		started.Add(2)
		both := make(chan struct{})
		go func() { started.Wait(); close(both) }()
		wait := func(name string, delay bool) tool.Definition {
			return tool.Definition{Name: name, ConcurrencySafe: true, Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				started.Done()
				select {
				case <-both:
				case <-time.After(10 * time.Second):
					return tool.Result{}, errors.New("calls did not overlap")
				}
				if delay {
					time.Sleep(20 * time.Millisecond) // on the bubble's clock: finish last, be recorded first
				}
				return tool.TextResult(name), nil
			}}
		}
		e.tool(wait("slow", true))
		e.tool(wait("fast", false))
		a := e.create(agent.CreateOptions{})
		run(t, a, "go")
		rs := results(a.Session().Events())
		if len(rs) != 2 || rs[0].Message.Source.CallID != "first" || rs[1].Message.Source.CallID != "second" || rs[0].Error != nil || rs[1].Error != nil {
			t.Fatalf("results = %+v", rs)
		}
		checkBalanced(t, a)
	})
}

// An exclusive call is a barrier: calls run strictly in order.
func TestExclusiveCallsRunInOrder(t *testing.T) {
	e := newEnv(t,
		scripted.ToolCalls("", scripted.Call{ID: "1", Name: "rec", Arguments: `{"text":"1"}`},
			scripted.Call{ID: "2", Name: "rec", Arguments: `{"text":"2"}`}, scripted.Call{ID: "3", Name: "rec", Arguments: `{"text":"3"}`}),
		scripted.Text("ok"))
	var mu sync.Mutex
	var order []string
	e.tool(tool.Func("rec", "records", false, func(ctx context.Context, c tool.Call, args struct {
		Text string `json:"text"`
	}) (tool.Result, error) {
		mu.Lock()
		order = append(order, args.Text)
		mu.Unlock()
		return tool.TextResult("ok"), nil
	}))
	a := e.create(agent.CreateOptions{})
	run(t, a, "go")
	if !slices.Equal(order, []string{"1", "2", "3"}) {
		t.Fatalf("order = %v", order)
	}
}

func TestCancelMidStream(t *testing.T) {
	e := newEnv(t, scripted.Hang("partial answer"))
	a := e.create(agent.CreateOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	seen := make(chan struct{})
	var once sync.Once
	a.Session().Observe(func(ev session.Event) {
		// Cancel once the text is out: at the block's start, the delta may
		// meet the cancellation first.
		if c, ok := ev.Data.(session.AssistantChunk); ok && c.Chunk.Type == content.ChunkTextDelta {
			once.Do(func() { close(seen) })
		}
	})
	go func() { <-seen; cancel() }()
	end, err := a.Run(ctx, content.UserText("go"))
	if err != nil {
		t.Fatal(err)
	}
	if end.Reason.Kind != session.EndAborted || end.Reason.Cause == nil || end.Reason.Cause.Kind != agent.CauseUser {
		t.Fatalf("end = %+v", end)
	}
	var interrupted *session.AssistantMessage
	for _, ev := range a.Session().Events() {
		if m, ok := ev.Data.(session.AssistantMessage); ok {
			interrupted = &m
		}
	}
	if interrupted == nil || !interrupted.Interrupted || content.JoinText(interrupted.Message.Content) != "partial answer" {
		t.Fatalf("interrupted message = %+v", interrupted)
	}
	checkBalanced(t, a)
	if a.Status() != agent.StatusIdle {
		if err := a.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Cancelling while a tool runs: the running call's result is committed, the
// unstarted one gets a synthetic aborted-before-dispatch result, and the
// turn ends aborted with a balanced log.
func TestCancelMidTool(t *testing.T) {
	e := newEnv(t, scripted.ToolCalls("", scripted.Call{ID: "block", Name: "block", Arguments: `{}`},
		scripted.Call{ID: "never", Name: "block", Arguments: `{}`}))
	inTool := make(chan struct{}, 2)
	e.tool(tool.Definition{Name: "block", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		inTool <- struct{}{}
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}})
	a := e.create(agent.CreateOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-inTool; cancel() }()
	end, _ := a.Run(ctx, content.UserText("go"))
	if end.Reason.Kind != session.EndAborted {
		t.Fatalf("end = %+v", end)
	}
	rs := results(a.Session().Events())
	if len(rs) != 2 || rs[1].Error == nil || rs[1].Error.Code != tool.CodeAbortedBeforeDispatch {
		t.Fatalf("results = %+v", rs)
	}
	if len(inTool) != 0 {
		t.Fatal("the second call started after cancellation")
	}
	checkBalanced(t, a)
}

func TestMaxTokensEndsTurnWithoutTools(t *testing.T) {
	calls := scripted.ToolCalls("", scripted.Call{ID: "x", Name: "echo", Arguments: `{"text":"a"}`})
	// Turn the finish into max-tokens: the truncated call must not run.
	calls.Chunks[len(calls.Chunks)-1].Finish = &content.Finish{Kind: content.FinishMaxTokens}
	e := newEnv(t, calls, scripted.MaxTokens("trunc"))
	e.tool(echoTool("echo", false))
	a := e.create(agent.CreateOptions{})
	if end := run(t, a, "go"); end.Reason.Kind != session.EndMaxTokens {
		t.Fatalf("end = %+v", end)
	}
	if rs := results(a.Session().Events()); len(rs) != 0 {
		t.Fatalf("tools ran: %+v", rs)
	}
	if end := run(t, a, "again"); end.Reason.Kind != session.EndMaxTokens || end.Turn != 2 {
		t.Fatalf("end = %+v", end)
	}
	checkBalanced(t, a)
}

func TestInvalidToolArgsBecomeErrorResult(t *testing.T) {
	e := newEnv(t, scripted.ToolCalls("", scripted.Call{ID: "bad", Name: "echo", Arguments: `{"text":5}`}), scripted.Text("sorry"))
	e.tool(echoTool("echo", false))
	a := e.create(agent.CreateOptions{})
	if end := run(t, a, "go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	rs := results(a.Session().Events())
	if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != tool.CodeInvalidArgs || !rs[0].Message.Content[0].IsError {
		t.Fatalf("results = %+v", rs)
	}
}

func TestRestrictedToolHiddenAndRefused(t *testing.T) {
	e := newEnv(t, scripted.ToolCalls("", scripted.Call{ID: "s", Name: "secret", Arguments: `{"text":"x"}`}), scripted.Text("ok"))
	e.tool(echoTool("echo", true))
	e.tool(echoTool("secret", true))
	a := e.create(agent.CreateOptions{Setup: func(a *agent.Agent) error {
		_, err := a.Tools().Restrict(tool.Restriction{Deny: []string{"secret"}})
		return err
	}})
	run(t, a, "go")
	req := e.model.Requests()[0]
	if len(req.Tools) != 1 || req.Tools[0].Name != "echo" {
		t.Fatalf("visible tools = %+v", req.Tools)
	}
	rs := results(a.Session().Events())
	if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != tool.CodeUnknownTool {
		t.Fatalf("results = %+v", rs)
	}
}

func TestModelErrorEndsTurnError(t *testing.T) {
	e := newEnv(t, scripted.Fail(llm.CodeServer, "boom"))
	a := e.create(agent.CreateOptions{})
	end := run(t, a, "go")
	if end.Reason.Kind != session.EndError || end.Reason.Error == nil || end.Reason.Error.Code != llm.CodeServer {
		t.Fatalf("end = %+v", end)
	}
	checkBalanced(t, a)
}

func TestUnknownProviderIsAClearError(t *testing.T) {
	e := newEnv(t)
	a := e.create(agent.CreateOptions{Options: agent.Options{Provider: "nope"}})
	end := run(t, a, "go")
	if end.Reason.Error == nil || end.Reason.Error.Code != llm.CodeNoAdapter {
		t.Fatalf("end = %+v", end)
	}
}

// A steer sent while a tool runs enters the next step's request. The
// bubble's Wait returns once the turn is parked in the tool.
func TestSteerEntersNextStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		e := newEnv(t, scripted.ToolCalls("", scripted.Call{ID: "w", Name: "wait", Arguments: `{}`}), scripted.Text("ok"))
		e.tool(tool.Definition{Name: "wait", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			<-gate
			return tool.TextResult("waited"), nil
		}})
		a := e.create(agent.CreateOptions{})
		done := make(chan session.TurnEnd, 1)
		go func() { end, _ := a.Run(context.Background(), content.UserText("go")); done <- end }()
		synctest.Wait()
		if s := a.Status(); s != agent.StatusRunning {
			t.Fatalf("status with the tool parked = %v", s)
		}
		if err := a.Steer(content.UserText("also this")); err != nil {
			t.Fatal(err)
		}
		close(gate)
		<-done
		second := e.model.Requests()[1].Messages
		if last := second[len(second)-1]; content.JoinText(last.Content) != "also this" {
			t.Fatalf("last message of step 2 = %+v", last)
		}
	})
}

// Dispose aborts a turn parked in a hanging model call. The bubble's Wait
// returns once the model call is parked.
func TestDisposeStopsRunningAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, scripted.Hang(""))
		a := e.create(agent.CreateOptions{})
		done := make(chan session.TurnEnd, 1)
		go func() { end, _ := a.Run(context.Background(), content.UserText("go")); done <- end }()
		synctest.Wait()
		if n := a.Session().Len(); n < 5 {
			t.Fatalf("%d events with the model call parked, want at least 5", n)
		}
		if err := a.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := a.Dispose(context.Background()); err != nil {
			t.Fatal("second dispose:", err)
		}
		end := <-done
		if end.Reason.Kind != session.EndAborted || end.Reason.Cause.Kind != agent.CauseDisposed {
			t.Fatalf("end = %+v", end)
		}
		if _, ok := e.agents.Get(a.ID()); ok {
			t.Fatal("agent still registered")
		}
		if _, ok := e.store.Get(a.ID()); ok {
			t.Fatal("session still live")
		}
		if err := a.Followup(content.UserText("late")); !errors.Is(err, &agent.Error{Code: agent.CodeDisposed}) {
			t.Fatalf("followup after dispose: %v", err)
		}
	})
}

func TestSetupFailureLeavesNothing(t *testing.T) {
	e := newEnv(t)
	_, err := e.agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"},
		Setup: func(a *agent.Agent) error {
			_, err := a.Tools().Restrict(tool.Restriction{Allow: []string{"no-such-tool"}})
			return err
		}})
	if !errors.Is(err, &agent.Error{Code: agent.CodeSetup}) || !errors.Is(err, &tool.Error{Code: tool.CodeInvalidRestriction}) {
		t.Fatalf("err = %v", err)
	}
	if len(e.agents.List()) != 0 || len(e.store.Live()) != 0 {
		t.Fatal("something was published")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.agents.Create(ctx, agent.CreateOptions{Options: agent.Options{Provider: "test"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled create: %v", err)
	}
	if len(e.agents.List()) != 0 || len(e.store.Live()) != 0 {
		t.Fatal("cancelled create published something")
	}
}

func TestSeededAgentContinuesTurnNumbering(t *testing.T) {
	e := newEnv(t, scripted.Text("one"), scripted.Echo("child saw: "))
	parent := e.create(agent.CreateOptions{})
	run(t, parent, "first")
	seed := session.CompletedPrefix(parent.Session().Events())
	child := e.create(agent.CreateOptions{Seed: seed, ParentSession: parent.ID(), DelegationDepth: 1, Owner: parent})
	end := run(t, child, "second")
	if end.Turn != 2 || end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	msgs := child.Session().Messages()
	if len(msgs) != 4 || content.JoinText(msgs[3].Content) != "child saw: second" {
		t.Fatalf("child messages = %+v", msgs)
	}
	if h := child.Session().Header(); h.SeedLength != len(seed) || h.ParentSession != parent.ID() || child.Depth() != 1 {
		t.Fatalf("header = %+v", h)
	}
	if err := parent.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.agents.Get(child.ID()); ok {
		t.Fatal("owned child outlived its owner")
	}
}

func TestToolCallerAndCwd(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, scripted.ToolCalls("", scripted.Call{ID: "w", Name: "who", Arguments: `{}`}), scripted.Text("ok"))
	var got tool.Call
	e.tool(tool.Definition{Name: "who", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		got = c
		return tool.Result{Content: []content.Block{content.Text("x")}, Meta: json.RawMessage(`{"k":1}`)}, nil
	}})
	a := e.create(agent.CreateOptions{Cwd: dir})
	run(t, a, "go")
	if got.Cwd != dir || got.Caller != a || got.ID != "w" {
		t.Fatalf("call = %+v", got)
	}
}
