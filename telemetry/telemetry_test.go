package telemetry_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// answer streams a scripted entry with usage of 7 uncached, 3 cached input
// and 5 output tokens.
func answer(ctx context.Context, req *llm.Request, e scripted.Entry) iter.Seq[content.Chunk] {
	u := content.Chunk{Type: content.ChunkUsage, Usage: &content.Usage{Input: 7, CacheRead: 3, Output: 5}}
	for i, c := range e.Chunks {
		if c.Type == content.ChunkUsage {
			e.Chunks[i] = u
		}
	}
	return scripted.New(e).Stream(ctx, req)
}

// model delegates to a child (in the background when background is set);
// the child calls probe, then answers; the parent then answers too.
func model(background bool) llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		child, results := false, 0
		for _, m := range req.Messages {
			if _, _, ok := prompt.SplitChildTask(content.JoinText(m.Content)); ok {
				child = true
			}
			if m.Source.Kind == content.SourceTool {
				results++
			}
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case child && results == 0:
			return answer(ctx, req, scripted.ToolCalls("", scripted.Call{ID: "c_probe", Name: "probe", Arguments: `{"target":"disk"}`}))
		case child:
			return answer(ctx, req, scripted.Text("probed"))
		case last.Source.Plugin == task.NoticePlugin:
			return answer(ctx, req, scripted.Text("noted"))
		case results == 0:
			bg := ""
			if background {
				bg = `,"run_in_background":true`
			}
			return answer(ctx, req, scripted.ToolCalls("", scripted.Call{ID: "c_sub", Name: "subagent",
				Arguments: `{"description":"probe it","prompt":"Probe the disk."` + bg + `}`}))
		}
		return answer(ctx, req, scripted.Text("done"))
	})
}

// traced runs one prompt on a runtime traced into an in-memory exporter,
// under a span of the test's own (the prompt's Run has it; so does the
// agent's creation in the background case, for the notice's turn), waits
// for background work, and returns the spans.
func traced(t *testing.T, opts telemetry.Options, background bool) (tracetest.SpanStubs, trace.SpanContext, int) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	rt, err := dsh.New(dsh.Options{Tracer: telemetry.New(tp, opts)})
	if err != nil {
		t.Fatal(err)
	}
	rt.LLM.Register("test", model(background))
	spawn, _ := inproc.NewSpawn(rt.Agents)
	rt.Subagents.Register(spawn)
	subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events},
		subagenttool.Config{Provider: "spawn"})
	task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{})
	type probeArgs struct {
		Target string `json:"target"`
	}
	rt.Tools.Register(tool.Func("probe", "Probe something.", true, func(_ context.Context, _ tool.Call, a probeArgs) (tool.Result, error) {
		return tool.TextResult(a.Target + " is fine"), nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, root := tp.Tracer("test").Start(ctx, "test")
	createCtx := context.Background()
	if background {
		createCtx = ctx
	}
	a, err := rt.Agents.Create(createCtx, agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test", Model: "m1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(ctx, content.UserText("Probe the disk through a subagent.")); err != nil {
		t.Fatal(err)
	}
	for background { // the answer to the child's notice ends the run
		ms := a.Session().Messages()
		if content.JoinText(ms[len(ms)-1].Content) == "noted" && a.Status() == agent.StatusIdle {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the background child's notice never came")
		case <-time.After(5 * time.Millisecond):
		}
	}
	turns := a.Session().LastTurn()
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	root.End()
	return exp.GetSpans(), root.SpanContext(), turns
}

// tree indexes spans by id.
type tree map[trace.SpanID]tracetest.SpanStub

func index(spans tracetest.SpanStubs) tree {
	out := tree{}
	for _, s := range spans {
		out[s.SpanContext.SpanID()] = s
	}
	return out
}

// children returns the names of the spans under parent, sorted.
func (tr tree) children(parent trace.SpanID) []string {
	var out []string
	for _, s := range tr {
		if s.Parent.SpanID() == parent {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out
}

// one returns the only span named name under parent.
func (tr tree) one(t *testing.T, parent trace.SpanID, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range tr {
		if s.Parent.SpanID() == parent && s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q under %s, want one; children: %v", len(found), name, parent, tr.children(parent))
	}
	return found[0]
}

func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]any) {
	t.Helper()
	for k, v := range want {
		if got := attr(s, k).AsInterface(); !equal(got, v) {
			t.Errorf("span %q: %s = %v, want %v", s.Name, k, got, v)
		}
	}
}

func equal(got, want any) bool {
	switch w := want.(type) {
	case int:
		g, ok := got.(int64)
		return ok && g == int64(w)
	case []string:
		g, ok := got.([]string)
		return ok && slices.Equal(g, w)
	}
	return got == want
}

// The spans of a nested run form one tree, as the delegation does: turn →
// model calls and tool calls → the subagent call's child run → the child's
// turn → its model calls and tool calls; each with the GenAI attributes.
func TestSpanTreeOfANestedRun(t *testing.T) {
	spans, root, _ := traced(t, telemetry.Options{}, false)
	for _, s := range spans {
		if s.SpanContext.TraceID() != root.TraceID() {
			t.Errorf("span %q is in trace %s, want %s", s.Name, s.SpanContext.TraceID(), root.TraceID())
		}
	}
	tr := index(spans)
	turn := tr.one(t, root.SpanID(), "turn")
	wantAttrs(t, turn, map[attribute.Key]any{telemetry.Turn: 1, telemetry.Depth: 0, telemetry.TurnEnd: "completed",
		telemetry.UsageInputTokens: 20, telemetry.UsageCachedTokens: 6, telemetry.UsageOutputTokens: 10})
	if got, want := tr.children(turn.SpanContext.SpanID()), []string{"chat m1", "chat m1", "execute_tool subagent"}; !slices.Equal(got, want) {
		t.Fatalf("under the turn: %v, want %v", got, want)
	}
	for _, s := range spans {
		if s.Name == "chat m1" && s.Parent.SpanID() == turn.SpanContext.SpanID() {
			wantAttrs(t, s, map[attribute.Key]any{telemetry.OperationName: "chat", telemetry.ProviderName: "test",
				telemetry.RequestModel: "m1", telemetry.UsageInputTokens: 10, telemetry.UsageCachedTokens: 3, telemetry.UsageOutputTokens: 5})
			if s.SpanKind != trace.SpanKindClient {
				t.Errorf("a model call's span is %v, want client", s.SpanKind)
			}
		}
	}
	call := tr.one(t, turn.SpanContext.SpanID(), "execute_tool subagent")
	wantAttrs(t, call, map[attribute.Key]any{telemetry.OperationName: "execute_tool", telemetry.ToolName: "subagent",
		telemetry.ToolCallID: "c_sub", telemetry.ToolOutcome: "ok"})
	run := tr.one(t, call.SpanContext.SpanID(), "invoke_agent spawn")
	wantAttrs(t, run, map[attribute.Key]any{telemetry.OperationName: "invoke_agent", telemetry.SubagentProvider: "spawn",
		telemetry.AgentName: "spawn · probe it", telemetry.RunID: "run-1", telemetry.Depth: 1, telemetry.StopReason: "completed",
		telemetry.UsageInputTokens: 20, telemetry.UsageCachedTokens: 6, telemetry.UsageOutputTokens: 10})
	childTurn := tr.one(t, run.SpanContext.SpanID(), "turn")
	wantAttrs(t, childTurn, map[attribute.Key]any{telemetry.Depth: 1, telemetry.TurnEnd: "completed",
		telemetry.ConversationID: attr(run, telemetry.AgentID).AsString()})
	if got, want := tr.children(childTurn.SpanContext.SpanID()), []string{"chat m1", "chat m1", "execute_tool probe"}; !slices.Equal(got, want) {
		t.Fatalf("under the child's turn: %v, want %v", got, want)
	}
	var finishes []string
	for _, s := range spans {
		if s.Name == "chat m1" && s.Parent.SpanID() == childTurn.SpanContext.SpanID() {
			finishes = append(finishes, attr(s, telemetry.FinishReasons).AsStringSlice()...)
		}
	}
	slices.Sort(finishes)
	if !slices.Equal(finishes, []string{"stop", "tool_call"}) {
		t.Errorf("the child's finish reasons: %v", finishes)
	}
	probe := tr.one(t, childTurn.SpanContext.SpanID(), "execute_tool probe")
	wantAttrs(t, probe, map[attribute.Key]any{telemetry.ToolOutcome: "ok"})
	// Content is not recorded unless asked for.
	for _, s := range spans {
		for _, k := range []attribute.Key{telemetry.InputMessages, telemetry.OutputMessages, telemetry.ToolArguments,
			telemetry.ToolResult, telemetry.SystemInstructions} {
			if attr(s, k).Type() != attribute.EMPTY {
				t.Errorf("span %q records %s without the opt-in", s.Name, k)
			}
		}
	}
}

func TestContentIsRecordedOnlyWhenOptedIn(t *testing.T) {
	spans, _, _ := traced(t, telemetry.Options{Content: true}, false)
	var inputs, args, results string
	for _, s := range spans {
		inputs += attr(s, telemetry.InputMessages).AsString()
		args += attr(s, telemetry.ToolArguments).AsString()
		results += attr(s, telemetry.ToolResult).AsString()
	}
	for what, want := range map[string][2]string{"input messages": {inputs, "Probe the disk through a subagent."},
		"tool arguments": {args, `{"target":"disk"}`}, "tool results": {results, "disk is fine"}} {
		if !strings.Contains(want[0], want[1]) {
			t.Errorf("%s lack %q: %s", what, want[1], want[0])
		}
	}
}

// A background child outlives the call that started it: its run still
// hangs under that call, in the same trace.
func TestBackgroundChildStaysInTheTrace(t *testing.T) {
	spans, root, parentTurns := traced(t, telemetry.Options{}, true)
	tr := index(spans)
	var turns []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "turn" && s.Parent.SpanID() == root.SpanID() {
			turns = append(turns, s)
		}
		if s.SpanContext.TraceID() != root.TraceID() {
			t.Errorf("span %q left the trace", s.Name)
		}
	}
	// The notice opens a turn of its own, or joins the running one: every
	// turn of the parent is under the span the agent was created in.
	if len(turns) != parentTurns {
		t.Fatalf("%d top-level turns under the test's span, want the parent's %d", len(turns), parentTurns)
	}
	var run tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "invoke_agent spawn" {
			run = s
		}
	}
	call, ok := tr[run.Parent.SpanID()]
	if !ok || call.Name != "execute_tool subagent" {
		t.Fatalf("the background run hangs under %q, want the subagent call", call.Name)
	}
	tr.one(t, run.SpanContext.SpanID(), "turn")
}

// A failed tool call and a failed child are errors in their spans, with
// the code as error.type.
func TestFailuresMarkSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := telemetry.New(tp, telemetry.Options{})
	_, span := tr.Start(context.Background(), "x", trace.SpanKindInternal)
	telemetry.FailErr(span, &tool.Error{Code: tool.CodeDenied, Msg: "no"})
	span.End()
	got := exp.GetSpans()[0]
	if got.Status.Code != codes.Error || attr(got, telemetry.ErrorType).AsString() != tool.CodeDenied {
		t.Fatalf("status %v, error.type %q", got.Status, attr(got, telemetry.ErrorType).AsString())
	}
}

// Without a tracer nothing is made and nothing crosses a process boundary.
func TestNilTracerIsFree(t *testing.T) {
	var tr *telemetry.Tracer
	ctx := context.Background()
	got, span := tr.Start(ctx, "x", trace.SpanKindInternal)
	if got != ctx || span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("a nil tracer made a span")
	}
	if telemetry.Carrier(got) != nil || telemetry.Env(got) != nil || telemetry.SetMeta(nil, telemetry.Carrier(got)) != nil {
		t.Fatal("a context without a span produced a trace context")
	}
	if n := testing.AllocsPerRun(100, func() { tr.Start(ctx, "x", trace.SpanKindInternal) }); n != 0 {
		t.Fatalf("a nil tracer allocates %v times a span", n)
	}
}

// The W3C trace context survives ACP's `_meta` and a child's environment.
func TestTraceContextCrossesProcesses(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "parent")
	defer span.End()
	meta := telemetry.SetMeta(map[string]any{"dsh": map[string]any{"depth": 1}}, telemetry.Carrier(ctx))
	if meta["dsh"] == nil || meta["traceparent"] == nil {
		t.Fatalf("meta %v", meta)
	}
	got := trace.SpanContextFromContext(telemetry.FromMeta(context.Background(), meta))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("from meta: %v", got)
	}
	env := map[string]string{}
	for _, kv := range telemetry.Env(ctx) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got = trace.SpanContextFromContext(telemetry.FromEnv(context.Background(), func(k string) string { return env[k] }))
	if got.TraceID() != span.SpanContext().TraceID() {
		t.Fatalf("from the environment %v: %v", env, got)
	}
	// Garbage is ignored, not trusted.
	for _, bad := range []any{"00-zz-00-01", 42, "", nil} {
		if sc := trace.SpanContextFromContext(telemetry.FromMeta(context.Background(), map[string]any{"traceparent": bad})); sc.IsValid() {
			t.Errorf("traceparent %v gave %v", bad, sc)
		}
	}
}
