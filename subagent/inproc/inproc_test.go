package inproc_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/jsonschema-go/jsonschema"
	"go.uber.org/goleak"

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

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func lastUserText(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == content.RoleUser && m.Source.Kind == content.SourceUser {
			_, task, _ := prompt.SplitChildTask(content.JoinText(m.Content))
			return task
		}
	}
	return ""
}

// conformanceModel behaves by the conformance prompts: complete, hang
// until cancelled, or fail.
func conformanceModel() llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		switch lastUserText(req) {
		case subagenttest.PromptHang:
			return scripted.New(scripted.Hang("working…")).Stream(ctx, req)
		case subagenttest.PromptFail:
			return scripted.New(scripted.Fail(llm.CodeServer, "model down")).Stream(ctx, req)
		}
		return scripted.New(scripted.Text("done")).Stream(ctx, req)
	})
}

// conformance runs the suite on the default road of a CLI run: sessions on
// disk (JSONL), children continuable as well as one-shot.
func conformance(t *testing.T, newProvider func(*agent.Registry) (*inproc.Provider, error)) {
	var parent *subagenttest.Parent
	subagenttest.Conformance(t, subagenttest.Harness{
		Serve: func(t *testing.T, svc *subagent.Service) {
			build, err := inproc.NewBuilder(parent.Agents)
			if err != nil {
				t.Fatal(err)
			}
			continuable.Serve(svc, parent.Agents, parent.Sessions, build)
		},
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			parent = subagenttest.NewParentOn(t, jsonl.New(t.TempDir()), conformanceModel(), 0, agent.Options{})
			p, err := newProvider(parent.Agents)
			if err != nil {
				t.Fatal(err)
			}
			return p, parent.Agent
		},
		Leftovers: func() error {
			if n := len(parent.Agents.List()); n != 1 {
				return fmt.Errorf("%d agents live, want only the parent", n)
			}
			if live := parent.Sessions.Live(); len(live) != 1 {
				return fmt.Errorf("sessions live: %v", live)
			}
			return nil
		},
	})
}

func TestSpawnConformance(t *testing.T) { conformance(t, inproc.NewSpawn) }
func TestForkConformance(t *testing.T)  { conformance(t, inproc.NewFork) }

// world is a parent with a service holding spawn and fork.
type world struct {
	*subagenttest.Parent
	svc   *subagent.Service
	model *scripted.Model
}

func newWorld(t *testing.T, backend session.Backend, entries ...scripted.Entry) *world {
	model := scripted.New(entries...)
	w := &world{Parent: subagenttest.NewParent(t, model, 0, agent.Options{Model: "m1", MaxTokens: 321}), model: model}
	if backend != nil {
		// Rebuild the parent over the given backend.
		w.Sessions = session.NewStore(backend, w.Events)
		w.Agents = agent.NewRegistry(agent.Deps{Sessions: w.Sessions, LLM: w.LLM, Tools: w.Tools, Prompt: w.Prompt, Events: w.Events})
		a, err := w.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test", Model: "m1"}})
		if err != nil {
			t.Fatal(err)
		}
		w.Agent = a
		t.Cleanup(func() { w.Agents.DisposeAll(context.Background()) })
	}
	w.svc = subagent.NewService(w.Events, nil)
	for _, mk := range []func(*agent.Registry) (*inproc.Provider, error){inproc.NewSpawn, inproc.NewFork} {
		p, err := mk(w.Agents)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.svc.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *world) delegate(t *testing.T, provider string, req subagent.StartRequest) subagent.Result {
	t.Helper()
	if req.Parent == nil {
		req.Parent = w.Agent
	}
	run, err := w.svc.Start(context.Background(), provider, req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := run.Dispose(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	res, err := run.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// requestsOf returns the model requests one session made.
func (w *world) requestsOf(id string) []*llm.Request {
	var out []*llm.Request
	for _, r := range w.model.Requests() {
		if r.SessionID == id {
			out = append(out, r)
		}
	}
	return out
}

// delegateTool lets the parent's model delegate, as the subagent tool will.
func delegateTool(svc *subagent.Service, ids *[]string) tool.Definition {
	return tool.Func("delegate", "delegates a task", true, func(ctx context.Context, call tool.Call, args struct {
		Provider string `json:"provider"`
		Prompt   string `json:"prompt"`
	}) (tool.Result, error) {
		run, err := svc.Start(ctx, args.Provider, subagent.StartRequest{Prompt: subagenttest.Prompt(args.Prompt), Parent: call.Caller.(*agent.Agent)})
		if err != nil {
			return tool.Result{}, err
		}
		*ids = append(*ids, run.ID())
		defer run.Dispose(context.WithoutCancel(ctx))
		res, err := run.Wait(ctx)
		if err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult(string(res.StopReason) + ": " + content.JoinText(res.Output)), nil
	})
}

// A parent delegates through spawn and fork in one session and keeps
// working; the fork child sees the completed turn but not the in-flight one.
func TestParentDelegatesThroughSpawnAndFork(t *testing.T) {
	w := newWorld(t, nil,
		scripted.Text("noted: the code word is 'heron'"),                                                                 // parent turn 1
		scripted.ToolCalls("", scripted.Call{Name: "delegate", Arguments: `{"provider":"spawn","prompt":"count to 3"}`}), // parent turn 2, step 1
		scripted.Text("1 2 3"), // spawn child
		scripted.ToolCalls("", scripted.Call{Name: "delegate", Arguments: `{"provider":"fork","prompt":"what is the code word?"}`}),
		scripted.Echo("fork saw: "), // fork child
		scripted.Text("all done"),   // parent
	)
	var ids []string
	if _, err := w.Tools.Register(delegateTool(w.svc, &ids)); err != nil {
		t.Fatal(err)
	}
	if end, _ := w.Agent.Run(context.Background(), content.UserText("remember heron")); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn 1: %+v", end)
	}
	end, _ := w.Agent.Run(context.Background(), content.UserText("delegate please"))
	if end.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn 2: %+v", end)
	}
	var results []string
	for _, e := range w.Agent.Session().Events() {
		if r, ok := e.Data.(session.ToolResult); ok {
			results = append(results, content.JoinText(r.Message.Content[0].Content))
		}
	}
	if len(results) != 2 || results[0] != "completed: 1 2 3" || results[1] != "completed: fork saw: what is the code word?" {
		t.Fatalf("tool results = %q", results)
	}
	spawnReq, forkReq := w.requestsOf(ids[0])[0], w.requestsOf(ids[1])[0]
	if len(spawnReq.Messages) != 1 {
		t.Fatalf("spawn child saw %d messages, want only its prompt", len(spawnReq.Messages))
	}
	var forkTexts []string
	for _, m := range forkReq.Messages {
		_, task, _ := prompt.SplitChildTask(content.JoinText(m.Content))
		forkTexts = append(forkTexts, task)
	}
	want := []string{"remember heron", "noted: the code word is 'heron'", "what is the code word?"}
	if strings.Join(forkTexts, "|") != strings.Join(want, "|") {
		t.Fatalf("fork child saw %q, want %q (the in-flight turn excluded)", forkTexts, want)
	}
	if instr, _, ok := prompt.SplitChildTask(content.JoinText(forkReq.Messages[len(forkReq.Messages)-1].Content)); !ok || instr != inproc.DelegationText ||
		forkReq.System != w.requestsOf(w.Agent.ID())[0].System {
		t.Fatal("the delegation statement must open the child's task, and the child's system prompt be its parent's")
	}
	if forkReq.Model != "m1" || forkReq.MaxTokens != 321 {
		t.Fatalf("fork child route %s/%d, want the parent's", forkReq.Model, forkReq.MaxTokens)
	}
}

func TestForkChildTurnNumberingAndSeed(t *testing.T) {
	w := newWorld(t, nil, scripted.Text("first"), scripted.Text("child answer"))
	w.Agent.Run(context.Background(), content.UserText("hello"))
	res := w.delegate(t, inproc.ForkName, subagent.StartRequest{Prompt: subagenttest.Prompt("go")})
	if content.JoinText(res.Output) != "child answer" {
		t.Fatalf("output %+v: must be the child's own, never seeded text", res.Output)
	}
}

func TestForkWithoutCompletedTurnIsFresh(t *testing.T) {
	w := newWorld(t, nil, scripted.Text("x"))
	run, err := w.svc.Start(context.Background(), inproc.ForkName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent})
	if err != nil {
		t.Fatal(err)
	}
	h := run.LocalAgent().Session().Header()
	run.Wait(context.Background())
	run.Dispose(context.Background())
	if h.SeedLength != 0 {
		t.Fatalf("seedLength = %d", h.SeedLength)
	}
}

func objectSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Required: []string{"answer"},
		Properties: map[string]*jsonschema.Schema{"answer": {Type: "integer"}}}
}

func TestStructuredOutput(t *testing.T) {
	cases := []struct {
		name    string
		entries []scripted.Entry
		stop    subagent.StopReason
		value   any
		check   func(t *testing.T, child []session.Event)
	}{
		{name: "valid", entries: []scripted.Entry{
			scripted.ToolCalls("", scripted.Call{Name: "structured_output", Arguments: `{"answer":42}`}),
		}, stop: subagent.Completed, value: map[string]any{"answer": 42.0}},
		{name: "invalid then valid in the same turn", entries: []scripted.Entry{
			scripted.ToolCalls("", scripted.Call{Name: "structured_output", Arguments: `{"answer":"x"}`}),
			scripted.ToolCalls("", scripted.Call{Name: "structured_output", Arguments: `{"answer":7}`}),
		}, stop: subagent.Completed, value: map[string]any{"answer": 7.0}, check: func(t *testing.T, child []session.Event) {
			rs := toolResults(child)
			if len(rs) != 2 || rs[0].Error == nil || rs[0].Error.Code != tool.CodeInvalidArgs {
				t.Fatalf("results %+v", rs)
			}
		}},
		{name: "none is an error without a re-prompt", entries: []scripted.Entry{scripted.Text("I forgot")},
			stop: subagent.Failed},
		{name: "a call after the capture is refused", entries: []scripted.Entry{
			scripted.ToolCalls("", scripted.Call{Name: "structured_output", Arguments: `{"answer":1}`},
				scripted.Call{Name: "echo", Arguments: `{}`}),
		}, stop: subagent.Completed, value: map[string]any{"answer": 1.0}, check: func(t *testing.T, child []session.Event) {
			rs := toolResults(child)
			if len(rs) != 2 || rs[1].Error == nil || rs[1].Error.Code != tool.CodeDenied {
				t.Fatalf("results %+v", rs)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, nil, tc.entries...)
			w.Tools.Register(tool.Definition{Name: "echo", Execute: func(context.Context, tool.Call) (tool.Result, error) {
				t.Error("echo ran after the capture")
				return tool.TextResult("x"), nil
			}})
			run, err := w.svc.Start(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("answer"),
				Parent: w.Agent, OutputSchema: objectSchema()})
			if err != nil {
				t.Fatal(err)
			}
			child := run.LocalAgent()
			res, _ := run.Wait(context.Background())
			events := child.Session().Events()
			run.Dispose(context.Background())
			if res.StopReason != tc.stop || fmt.Sprint(res.Structured) != fmt.Sprint(tc.value) {
				t.Fatalf("result %+v", res)
			}
			if w.model.Remaining() != 0 || len(w.model.Requests()) != len(tc.entries) {
				t.Fatalf("%d model calls, want %d", len(w.model.Requests()), len(tc.entries))
			}
			req := w.model.Requests()[0]
			if instr, _, _ := prompt.SplitChildTask(content.JoinText(req.Messages[len(req.Messages)-1].Content)); !hasTool(req, "structured_output") ||
				!strings.Contains(instr, inproc.StructuredText) || req.Tools[len(req.Tools)-1].Name != "structured_output" {
				t.Fatal("the child's request lacks structured_output (last of its tools) or the instruction to call it")
			}
			if w.Agent.Tools().Has("structured_output") {
				t.Fatal("structured_output leaked to the parent")
			}
			if tc.check != nil {
				tc.check(t, events)
			}
		})
	}
}

func toolResults(events []session.Event) []session.ToolResult {
	var out []session.ToolResult
	for _, e := range events {
		if r, ok := e.Data.(session.ToolResult); ok {
			out = append(out, r)
		}
	}
	return out
}

func hasTool(req *llm.Request, name string) bool {
	for _, s := range req.Tools {
		if s.Name == name {
			return true
		}
	}
	return false
}

func TestToolFilter(t *testing.T) {
	w := newWorld(t, nil, scripted.ToolCalls("", scripted.Call{Name: "secret", Arguments: `{}`}), scripted.Text("ok"))
	for _, n := range []string{"public", "secret"} {
		w.Tools.Register(tool.Definition{Name: n, Execute: func(context.Context, tool.Call) (tool.Result, error) {
			return tool.TextResult(n), nil
		}})
	}
	run, err := w.svc.Start(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent,
		ToolFilter: &tool.Restriction{Allow: []string{"public", "secret"}, Deny: []string{"secret"}}, OutputSchema: nil})
	if err != nil {
		t.Fatal(err)
	}
	child := run.LocalAgent()
	run.Wait(context.Background())
	events := child.Session().Events()
	run.Dispose(context.Background())
	req := w.model.Requests()[0]
	if hasTool(req, "secret") || !hasTool(req, "public") {
		t.Fatalf("child tools %+v", req.Tools)
	}
	if rs := toolResults(events); len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != tool.CodeUnknownTool {
		t.Fatalf("results %+v", rs)
	}
	if !w.Agent.Tools().Has("secret") {
		t.Fatal("the child's filter reached the parent")
	}
}

func TestToolFilterUnknownNameLeavesNothing(t *testing.T) {
	w := newWorld(t, nil)
	_, err := w.svc.Start(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent,
		ToolFilter: &tool.Restriction{Deny: []string{"no-such-tool"}}})
	if !errors.Is(err, &tool.Error{Code: tool.CodeInvalidRestriction}) {
		t.Fatalf("err = %v", err)
	}
	if len(w.Agents.List()) != 1 || len(w.Sessions.Live()) != 1 {
		t.Fatal("a child was left behind")
	}
}

func TestStructuredOutputSurvivesAllowEmpty(t *testing.T) {
	w := newWorld(t, nil, scripted.ToolCalls("", scripted.Call{Name: "structured_output", Arguments: `{"answer":3}`}))
	w.Tools.Register(tool.Definition{Name: "public", Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{}, nil }})
	res := w.delegate(t, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), OutputSchema: objectSchema(),
		ToolFilter: &tool.Restriction{Allow: []string{}}})
	req := w.model.Requests()[0]
	if len(req.Tools) != 1 || req.Tools[0].Name != "structured_output" || res.StopReason != subagent.Completed {
		t.Fatalf("tools %+v, result %+v", req.Tools, res)
	}
}

func TestPersonaShadowsOnlyTheChild(t *testing.T) {
	w := newWorld(t, nil, scripted.Text("parent"), scripted.Text("child"))
	w.Prompt.Section(prompt.Section{Name: prompt.PersonaSection, Text: "DEPLOYMENT PERSONA"})
	w.Agent.Run(context.Background(), content.UserText("hi"))
	persona := "CHILD PERSONA on {{provider}}"
	w.delegate(t, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Persona: &persona})
	parentReq, childReq := w.model.Requests()[0], w.model.Requests()[1]
	if !strings.Contains(parentReq.System, "DEPLOYMENT PERSONA") || strings.Contains(parentReq.System, "CHILD") {
		t.Fatalf("parent system %q", parentReq.System)
	}
	if !strings.Contains(childReq.System, "CHILD PERSONA on test") || strings.Contains(childReq.System, "DEPLOYMENT") {
		t.Fatalf("child system %q", childReq.System)
	}
	empty := ""
	w2 := newWorld(t, nil, scripted.Text("child"))
	w2.Prompt.Section(prompt.Section{Name: prompt.PersonaSection, Text: "DEPLOYMENT PERSONA"})
	w2.delegate(t, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Persona: &empty})
	if strings.Contains(w2.model.Requests()[0].System, "DEPLOYMENT") {
		t.Fatal("an empty persona must empty the section")
	}
}

func TestPersonaWithUnknownVariableFailsStart(t *testing.T) {
	w := newWorld(t, nil)
	bad := "I am {{nobody}}"
	_, err := w.svc.Start(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent, Persona: &bad})
	if err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("err = %v", err)
	}
	if len(w.Agents.List()) != 1 {
		t.Fatal("a child was left behind")
	}
}

// Depth cap across three levels: with maxDepth 2, a grandchild may start
// but not a great-grandchild.
func TestDepthCapAcrossLevels(t *testing.T) {
	w := newWorld(t, nil, scripted.Hang(""), scripted.Hang(""))
	two := 2
	start := func(parent *agent.Agent) (subagent.Run, error) {
		return w.svc.Start(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: parent, MaxDepth: &two})
	}
	child, err := start(w.Agent)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Dispose(context.Background())
	grandchild, err := start(child.LocalAgent())
	if err != nil {
		t.Fatal(err)
	}
	defer grandchild.Dispose(context.Background())
	if d := grandchild.LocalAgent().Session().Header().DelegationDepth; d != 2 {
		t.Fatalf("grandchild depth %d", d)
	}
	_, err = start(grandchild.LocalAgent())
	var se *subagent.Error
	if !errors.As(err, &se) || se.Code != subagent.CodeDepthExceeded || se.Attempted != 3 || se.Max != 2 {
		t.Fatalf("great-grandchild: %v", err)
	}
}

func TestCancelAfterReadyKeepsPartialText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, nil, scripted.Hang("half an answer"))
		ctx, cancel := context.WithCancel(context.Background())
		run, err := w.svc.Start(ctx, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent})
		if err != nil {
			t.Fatal(err)
		}
		child := run.LocalAgent()
		synctest.Wait() // the child's model call is parked after its streamed text
		if n := child.Session().Len(); n < 6 {
			t.Fatalf("%d events in the parked child's log, want the streamed text (6)", n)
		}
		cancel()
		res, _ := run.Wait(context.Background())
		run.Dispose(context.Background())
		if res.StopReason != subagent.Aborted || content.JoinText(res.Output) != "half an answer" {
			t.Fatalf("result %+v", res)
		}
		var cause *session.Cause
		for _, e := range child.Session().Events() {
			if te, ok := e.Data.(session.TurnEnd); ok {
				cause = te.Reason.Cause
			}
		}
		if cause == nil || cause.Kind != agent.CauseParent {
			t.Fatalf("cancel cause %+v, want parent", cause)
		}
	})
}

func TestSteerAndResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		w := newWorld(t, nil,
			scripted.ToolCalls("", scripted.Call{Name: "wait", Arguments: `{}`}),
			scripted.Echo("steered: "),
			scripted.Echo("resumed: "),
		)
		w.Tools.Register(tool.Definition{Name: "wait", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			<-gate
			return tool.TextResult("waited"), nil
		}})
		run, err := w.svc.Start(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the child's turn is parked in the wait tool
		if n := run.LocalAgent().Session().Len(); n < 8 {
			t.Fatalf("%d events in the parked child's log, want its tool call (8)", n)
		}
		if err := run.(subagent.Steerer).SendMessage(context.Background(), subagenttest.Prompt("look left")); err != nil {
			t.Fatal(err)
		}
		if _, err := run.(subagent.Resumer).Resume(context.Background(), subagent.ResumeRequest{Prompt: subagenttest.Prompt("early")}); err == nil {
			t.Fatal("resume of a running child succeeded")
		}
		close(gate)
		res, _ := run.Wait(context.Background())
		if content.JoinText(res.Output) != "steered: look left" {
			t.Fatalf("first run output %q", content.JoinText(res.Output))
		}
		if err := run.(subagent.Steerer).SendMessage(context.Background(), subagenttest.Prompt("late")); err == nil {
			t.Fatal("steering a settled run succeeded")
		}
		var mu sync.Mutex
		progress := map[string][]subagent.ProgressKind{} // by run id
		stop := event.On(w.Events, func(e subagent.ProgressEvent) {
			mu.Lock()
			defer mu.Unlock()
			progress[e.RunID] = append(progress[e.RunID], e.Kind)
		})
		defer stop()
		next, err := run.(subagent.Resumer).Resume(context.Background(), subagent.ResumeRequest{Prompt: subagenttest.Prompt("and now?")})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		if next.ID() != run.ID() {
			t.Fatal("resume changed the child")
		}
		res2, _ := next.Wait(context.Background())
		if res2.StopReason != subagent.Completed || content.JoinText(res2.Output) != "resumed: and now?" {
			t.Fatalf("resumed result %+v", res2)
		}
		if end := lastTurnEnd(next.LocalAgent().Session().Events()); end.Turn != 2 {
			t.Fatalf("resume ran turn %d, want 2 in the same session", end.Turn)
		}
		mu.Lock()
		if len(progress) != 1 {
			t.Errorf("progress of %d runs, want the resumed one's: %v", len(progress), progress)
		}
		for _, kinds := range progress {
			if !slices.Contains(kinds, subagent.ProgressTurnStart) || !slices.Contains(kinds, subagent.ProgressTurnEnd) {
				t.Errorf("the resumed run reported %v", kinds)
			}
		}
		mu.Unlock()
		if err := next.Dispose(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(w.Agents.List()) != 1 {
			t.Fatal("child outlived its last run")
		}
	})
}

func lastTurnEnd(events []session.Event) session.TurnEnd {
	var end session.TurnEnd
	for _, e := range events {
		if te, ok := e.Data.(session.TurnEnd); ok {
			end = te
		}
	}
	return end
}

func TestUsageAndStopReasons(t *testing.T) {
	w := newWorld(t, nil, scripted.MaxTokens("trunc"), scripted.Fail(llm.CodeRateLimit, "slow down"))
	res := w.delegate(t, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go")})
	if res.StopReason != subagent.MaxTokens || res.Usage["test/m1"].Output != 5 {
		t.Fatalf("result %+v", res)
	}
	res = w.delegate(t, inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go")})
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "RATE_LIMIT") {
		t.Fatalf("result %+v", res)
	}
}

// Child session files carry the lineage header and reload valid.
func TestChildSessionsOnDisk(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, jsonl.New(dir), scripted.Text("parent"), scripted.Text("spawned"), scripted.Text("forked"))
	w.Agent.Run(context.Background(), content.UserText("hi"))
	var ids []string
	for _, p := range []string{inproc.SpawnName, inproc.ForkName} {
		run, err := w.svc.Start(context.Background(), p, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID())
		run.Wait(context.Background())
		run.Dispose(context.Background())
	}
	store := session.NewStore(jsonl.New(dir), nil)
	for i, id := range ids {
		h, events, err := store.Read(id)
		if err != nil {
			t.Fatal(err)
		}
		if h.ParentSession != w.Agent.ID() || h.Origin != session.OriginSubagent || h.DelegationDepth != 1 || h.Cwd != w.Agent.Cwd() {
			t.Fatalf("header %+v", h)
		}
		if i == 1 && h.SeedLength == 0 {
			t.Fatal("fork child header lacks seedLength")
		}
		if err := session.CheckBalanced(events); err != nil {
			t.Fatalf("child %d log: %v", i, err)
		}
	}
}

// A settled child's usage is on disk in its parent's log at once, not at
// the parent's next step: a crash before that step keeps what the child
// cost.
func TestChildUsageReachesTheParentsFileAtOnce(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, jsonl.New(dir), scripted.Text("parent"), scripted.Text("spawned"))
	w.Agent.Run(context.Background(), content.UserText("hi"))
	run, err := w.svc.Start(context.Background(), inproc.SpawnName, subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: w.Agent})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := run.Wait(context.Background()); res.StopReason != subagent.Completed || len(res.Usage) == 0 {
		t.Fatalf("result %+v", res)
	}
	if err := run.Dispose(context.Background()); err != nil { // after its end is announced
		t.Fatal(err)
	}
	_, events, err := session.NewStore(jsonl.New(dir), nil).Read(w.Agent.ID()) // as another process reads it
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(events, func(e session.Event) bool { return e.Type == subagent.UsageType }) {
		t.Fatalf("the parent's stored log has no usage of its child (%d events)", len(events))
	}
}
