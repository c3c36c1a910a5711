package subagenttool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// childFunc answers a child's request.
type childFunc func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk]

// env is a runtime whose parent agent plays a script while children are
// answered by a function of their request.
type env struct {
	t      *testing.T
	rt     *dsh.Runtime
	parent *scripted.Model
	agent  *agent.Agent
}

func isChild(req *llm.Request) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Source.Kind == content.SourceUser {
			_, _, child := prompt.SplitChildTask(content.JoinText(m.Content))
			return child
		}
	}
	return false
}

func lastPrompt(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Source.Kind == content.SourceUser {
			_, task, _ := prompt.SplitChildTask(content.JoinText(m.Content))
			return task
		}
	}
	return ""
}

// echoChild answers "child: <prompt>".
func echoChild(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	return scripted.New(scripted.Text("child: "+lastPrompt(req))).Stream(ctx, req)
}

func newEnv(t *testing.T, child childFunc, parent ...scripted.Entry) *env {
	t.Helper()
	rt, err := dsh.New(dsh.Options{MaxTasksPerOwner: 2})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, rt: rt, parent: scripted.New(parent...)}
	rt.LLM.Register("test", llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		if isChild(req) {
			return child(ctx, req)
		}
		return e.parent.Stream(ctx, req)
	}))
	for _, mk := range []func(*agent.Registry) (*inproc.Provider, error){inproc.NewSpawn, inproc.NewFork} {
		p, _ := mk(rt.Agents)
		if _, err := rt.Subagents.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mount(subagenttool.Config{Provider: inproc.SpawnName})
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	e.agent, err = rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) deps() subagenttool.Deps {
	return subagenttool.Deps{Subagents: e.rt.Subagents, Tools: e.rt.Tools, Tasks: e.rt.Tasks, Events: e.rt.Events}
}

func (e *env) mount(cfg subagenttool.Config) func() {
	e.t.Helper()
	d, err := subagenttool.Mount(e.deps(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) run(text string) session.TurnEnd {
	e.t.Helper()
	end, err := e.agent.Run(context.Background(), content.UserText(text))
	if err != nil {
		e.t.Fatal(err)
	}
	return end
}

func results(a *agent.Agent) []session.ToolResult { return toolResults(a.Session().Events()) }

func toolResults(events []session.Event) []session.ToolResult {
	var out []session.ToolResult
	for _, ev := range events {
		if r, ok := ev.Data.(session.ToolResult); ok {
			out = append(out, r)
		}
	}
	return out
}

func resultText(r session.ToolResult) string { return content.JoinText(r.Message.Content[0].Content) }

func call(name, args string) scripted.Call { return scripted.Call{Name: name, Arguments: args} }

func TestForegroundDelegation(t *testing.T) {
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent", `{"description":"echo","prompt":"say hi"}`)),
		scripted.Text("done"))
	if end := e.run("go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end %+v", end)
	}
	rs := results(e.agent)
	if len(rs) != 1 || resultText(rs[0]) != "child: say hi" || rs[0].Error != nil {
		t.Fatalf("results %+v", rs)
	}
	if rs[0].Usage != nil {
		t.Fatalf("the tool result carries usage %+v: a child's usage reaches its parent's log one way (subagent.UsageType)", rs[0].Usage)
	}
	if u := recordedUsage(t, e.agent); len(u) != 1 || u["test/"].Output != 5 {
		t.Fatalf("recorded child usage %+v", u)
	}
	if n := len(e.rt.Agents.List()); n != 1 {
		t.Fatalf("%d agents live after the call: the child was not disposed", n)
	}
	// The parent's usage rolls up what its children used.
	if u := subagent.UsageFromEvents(e.agent.Session().Events()); u["test/"].Output != 15 {
		t.Fatalf("rolled-up usage %+v", u)
	}
}

// A grandchild's usage reaches the root as values: the child's log records
// it, the child's Result.Usage sums it with the child's own, and the
// root's log records that sum. Meta names the child and holds no usage.
func TestGrandchildUsageRollsUpToTheRoot(t *testing.T) {
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		switch {
		case lastPrompt(req) == "grand":
			return scripted.New(scripted.Text("grandchild done")).Stream(ctx, req)
		case slices.ContainsFunc(req.Messages, func(m content.Message) bool { return m.Source.Kind == content.SourceTool }):
			return scripted.New(scripted.Text("child done")).Stream(ctx, req)
		}
		return scripted.New(scripted.ToolCalls("", call("subagent", `{"description":"nest","prompt":"grand"}`))).Stream(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent", `{"description":"nest","prompt":"delegate again"}`)),
		scripted.Text("done"))
	if end := e.run("go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end %+v", end)
	}
	rs := results(e.agent)
	if len(rs) != 1 || resultText(rs[0]) != "child done" {
		t.Fatalf("results %+v", rs)
	}
	// scripted answers cost {Input: 10, Output: 5} each.
	step := content.Usage{Input: 10, Output: 5}
	times := func(n int64) content.Usage { return content.Usage{Input: n * step.Input, Output: n * step.Output} }
	if got := recordedUsage(t, e.agent); len(got) != 1 || got["test/"] != times(3) {
		t.Fatalf("root's recorded child usage %+v, want the child's two steps and the grandchild's one", got)
	}
	dec := json.NewDecoder(bytes.NewReader(rs[0].Meta))
	dec.DisallowUnknownFields()
	var meta subagent.ChildMeta
	if err := dec.Decode(&meta); err != nil || meta.SubagentChild == "" || meta.SubagentProvider != inproc.SpawnName {
		t.Fatalf("meta %s: %v", rs[0].Meta, err)
	}
	_, childEvents, err := e.rt.Sessions.Read(meta.SubagentChild)
	if err != nil {
		t.Fatal(err)
	}
	if u := subagent.UsageFromEvents(childEvents); u["test/"] != times(3) {
		t.Fatalf("child's log counts %+v: want its two steps and the grandchild's one", u)
	}
	if u := subagent.UsageFromEvents(e.agent.Session().Events()); len(u) != 1 || u["test/"] != times(5) {
		t.Fatalf("root's rolled-up usage %+v, want five steps", u)
	}
}

// Two delegations in one assistant message run in parallel: each child's
// model call waits until both children are in flight.
func TestSiblingDelegationsRunInParallel(t *testing.T) {
	var inFlight sync.WaitGroup
	inFlight.Add(2)
	both := make(chan struct{})
	go func() { inFlight.Wait(); close(both) }()
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		inFlight.Done()
		select {
		case <-both:
		case <-time.After(10 * time.Second):
			return scripted.New(scripted.Text("siblings did not overlap")).Stream(ctx, req)
		}
		return echoChild(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent", `{"description":"a","prompt":"one"}`), call("subagent", `{"description":"b","prompt":"two"}`)),
		scripted.Text("done"))
	e.run("go")
	rs := results(e.agent)
	if len(rs) != 2 || resultText(rs[0]) != "child: one" || resultText(rs[1]) != "child: two" {
		t.Fatalf("results %+v", rs)
	}
}

func TestNonCompletedIsAnErrorWithPartialOutput(t *testing.T) {
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		return scripted.New(scripted.MaxTokens("half of it")).Stream(ctx, req)
	}
	e := newEnv(t, child, scripted.ToolCalls("", call("subagent", `{"description":"x","prompt":"long"}`)), scripted.Text("ok"))
	e.run("go")
	rs := results(e.agent)
	want := "Error: subagent run hit the token limit\nPartial output before the run ended:\nhalf of it"
	if len(rs) != 1 || rs[0].Error == nil || resultText(rs[0]) != want {
		t.Fatalf("result %q", resultText(rs[0]))
	}
}

func TestFailureWording(t *testing.T) {
	for _, tc := range []struct {
		res  subagent.Result
		want string
	}{
		{subagent.Result{StopReason: subagent.Aborted}, "subagent run cancelled"},
		{subagent.Result{StopReason: subagent.Failed, Diagnostic: "SERVER: down"}, "subagent run failed\nDiagnostic: SERVER: down"},
		{subagent.Result{StopReason: subagent.Refusal}, "subagent declined the task"},
		{subagent.Result{StopReason: "exploded", Output: []content.Block{content.Text("bits")}},
			"subagent run ended abnormally (exploded)\nPartial output before the run ended:\nbits"},
	} {
		if got := subagenttool.Failure(tc.res); got != tc.want {
			t.Errorf("Failure(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
}

// The tool's model-visible schema and wording.
func TestSchemaAndWording(t *testing.T) {
	e := newEnv(t, echoChild)
	e.mount(subagenttool.Config{Provider: inproc.ForkName, ToolName: "subagent_fork", EnableRunInBackground: new(bool)})
	specs := map[string]content.ToolSpec{}
	for _, s := range e.agent.Tools().Specs() {
		specs[s.Name] = s
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	json.Unmarshal(specs["subagent"].Parameters, &schema)
	if len(schema.Properties) != 3 || schema.Properties["run_in_background"] == nil || strings.Join(schema.Required, ",") != "description,prompt" {
		t.Fatalf("subagent schema %s", specs["subagent"].Parameters)
	}
	if d := specs["subagent"].Description; !strings.Contains(d, "does NOT see this conversation") || !strings.Contains(d, "task_output") {
		t.Fatalf("spawn wording %q", d)
	}
	schema.Properties = nil
	json.Unmarshal(specs["subagent_fork"].Parameters, &schema)
	if len(schema.Properties) != 2 || schema.Properties["run_in_background"] != nil {
		t.Fatalf("fork schema %s", specs["subagent_fork"].Parameters)
	}
	if d := specs["subagent_fork"].Description; !strings.Contains(d, "already sees the completed turns") ||
		strings.Contains(d, "task_output") || !strings.Contains(d, "waits for the subagent's result") {
		t.Fatalf("fork wording %q", d)
	}
}

func TestForcedBackgroundRefusedWhenDisabled(t *testing.T) {
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent_fg", `{"description":"x","prompt":"y","run_in_background":true}`)),
		scripted.Text("ok"))
	e.mount(subagenttool.Config{Provider: inproc.SpawnName, ToolName: "subagent_fg", EnableRunInBackground: new(bool)})
	e.run("go")
	rs := results(e.agent)
	if len(rs) != 1 || !strings.Contains(resultText(rs[0]), "run_in_background is disabled for this tool instance") {
		t.Fatalf("results %+v", rs)
	}
	if n := len(e.rt.Tasks.List(e.agent)); n != 0 {
		t.Fatalf("%d tasks started", n)
	}
}

func TestMountRules(t *testing.T) {
	e := newEnv(t, echoChild)
	if _, err := subagenttool.Mount(e.deps(), subagenttool.Config{Provider: inproc.SpawnName}); err == nil {
		t.Fatal("a duplicate tool name was accepted")
	}
	if _, err := subagenttool.Mount(e.deps(), subagenttool.Config{}); err == nil {
		t.Fatal("a tool without provider was accepted")
	}
	neg := -1
	if _, err := subagenttool.Mount(e.deps(), subagenttool.Config{Provider: inproc.SpawnName, ToolName: "x", MaxDepth: &neg}); err == nil {
		t.Fatal("a negative maxDepth was accepted")
	}
	if _, err := subagenttool.Mount(e.deps(), subagenttool.Config{Provider: inproc.SpawnName, ToolName: "y", ToolFilter: &tool.Restriction{}}); err == nil {
		t.Fatal("an empty toolFilter was accepted")
	}
	// A provider without capabilities refuses configured ones at mount.
	e.rt.Subagents.Register(&bareProvider{})
	depth := 2
	_, err := subagenttool.Mount(e.deps(), subagenttool.Config{Provider: "bare", ToolName: "z", MaxDepth: &depth})
	if err == nil || !strings.Contains(err.Error(), "depthLimit") {
		t.Fatalf("capability mismatch: %v", err)
	}
	if _, err := subagenttool.Mount(e.deps(), subagenttool.Config{Provider: "bare", ToolName: "z"}); err != nil {
		t.Fatalf("the default depth must not apply to a provider without depthLimit: %v", err)
	}
}

type bareProvider struct{}

func (bareProvider) Name() string                        { return "bare" }
func (bareProvider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (bareProvider) InheritsParentContext() bool         { return false }
func (bareProvider) Start(context.Context, subagent.StartRequest) (subagent.Run, error) {
	return nil, errors.New("bare provider never starts")
}

// The tool follows its provider: mounted when it is added, gone when it is
// removed, and never back after the tool is disposed.
func TestToolFollowsItsProvider(t *testing.T) {
	e := newEnv(t, echoChild)
	dispose := e.mount(subagenttool.Config{Provider: "late", ToolName: "subagent_late"})
	if e.agent.Tools().Has("subagent_late") {
		t.Fatal("tool mounted before its provider exists")
	}
	p, _ := inproc.New(inproc.Config{Name: "late", Agents: e.rt.Agents})
	un, _ := e.rt.Subagents.Register(p)
	if !e.agent.Tools().Has("subagent_late") {
		t.Fatal("tool not mounted when its provider arrived")
	}
	un()
	if e.agent.Tools().Has("subagent_late") {
		t.Fatal("tool still mounted after its provider left")
	}
	dispose()
	e.rt.Subagents.Register(p)
	if e.agent.Tools().Has("subagent_late") {
		t.Fatal("a disposed tool came back")
	}
}

// A background child: the parent keeps working, is woken by the
// completion notice, and collects the output with task_output. In a
// bubble, so that the notice's turn is awaited by Wait, not by polling.
func TestBackgroundDelegationAndNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
			<-release
			return echoChild(ctx, req)
		}
		e := newEnv(t, child,
			scripted.ToolCalls("", call("subagent", `{"description":"slow job","prompt":"work","run_in_background":true}`)),
			scripted.Text("started it; working on other things"),
			scripted.ToolCalls("", call("task_output", `{"task_id":"subagent-1"}`)),
			scripted.Text("collected"),
		)
		if end := e.run("go"); end.Reason.Kind != session.EndCompleted {
			t.Fatalf("end %+v", end)
		}
		if rs := results(e.agent); resultText(rs[0]) != "started background subagent task subagent-1" {
			t.Fatalf("ack %q", resultText(rs[0]))
		}
		close(release)
		// The notice wakes the idle parent: once the bubble is blocked,
		// its second turn has ended.
		synctest.Wait()
		if n, s := e.agent.Session().LastTurn(), e.agent.Status(); n != 2 || s != agent.StatusIdle {
			t.Fatalf("turn %d, status %s: the notice did not run a turn of its own to its end", n, s)
		}
		var notice string
		for _, ev := range e.agent.Session().Events() {
			if m, ok := ev.Data.(content.Message); ok && m.Source.Plugin == task.NoticePlugin {
				notice = content.JoinText(m.Content)
			}
		}
		if notice != "background task subagent-1 (subagent: slow job) finished [status: completed]. Read its output with task_output." {
			t.Fatalf("notice %q", notice)
		}
		rs := results(e.agent)
		if got := resultText(rs[len(rs)-1]); got != "child: work\n[status: completed]" {
			t.Fatalf("task_output %q", got)
		}
		// The child's usage is in the parent's log once, from its
		// settlement, however often task_output reads the outcome.
		if u := rs[len(rs)-1].Usage; u != nil {
			t.Fatalf("task_output carries usage %+v: a second read would count it again", u)
		}
		records := 0
		for _, ev := range e.agent.Session().Events() {
			if ev.Type == subagent.UsageType {
				records++
			}
		}
		var own content.Usage // the parent's own steps
		for _, ev := range e.agent.Session().Events() {
			if m, ok := ev.Data.(session.AssistantMessage); ok && m.Usage != nil {
				own = own.Add(*m.Usage)
			}
		}
		total := subagent.UsageFromEvents(e.agent.Session().Events())
		if records != 1 || total["test/"] != own.Add(content.Usage{Input: 10, Output: 5}) {
			t.Fatalf("%d usage records, total %+v, the parent's own %+v: want one record of the child's usage", records, total, own)
		}
	})
}

func TestTaskKillMidRun(t *testing.T) {
	started := make(chan struct{}, 1)
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		started <- struct{}{}
		return scripted.New(scripted.Hang("")).Stream(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent", `{"description":"forever","prompt":"spin","run_in_background":true}`)),
		scripted.Text("started"),
		scripted.ToolCalls("", call("task_kill", `{"task_id":"subagent-1","reason":"not needed"}`)),
		scripted.ToolCalls("", call("task_output", `{"task_id":"subagent-1","wait":true,"timeout_ms":10000}`)),
		scripted.Text("killed it"),
	)
	e.run("go")
	<-started
	e.run("kill it")
	rs := results(e.agent)
	if got := resultText(rs[1]); got != "requested cancellation of task subagent-1" {
		t.Fatalf("kill %q", got)
	}
	if got := resultText(rs[2]); got != "(no new output)\n[status: killed, not needed]" {
		t.Fatalf("output after kill %q", got)
	}
	if n := len(e.rt.Agents.List()); n != 1 {
		t.Fatalf("%d agents live: the killed child remains", n)
	}
}

func TestDisposingTheParentCancelsBackgroundChildren(t *testing.T) {
	started := make(chan struct{}, 1)
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		started <- struct{}{}
		return scripted.New(scripted.Hang("")).Stream(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent", `{"description":"bg","prompt":"spin","run_in_background":true}`)),
		scripted.Text("started"))
	e.run("go")
	<-started
	if err := e.agent.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.rt.Agents.List()); n != 0 {
		t.Fatalf("%d agents live after the parent was disposed", n)
	}
	if ids := e.rt.Sessions.Live(); len(ids) != 0 {
		t.Fatalf("sessions live: %v", ids)
	}
}

func TestAdmissionLimitHitAndRecovered(t *testing.T) {
	release := make(chan struct{})
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return echoChild(ctx, req)
	}
	bg := func(d string) scripted.Call {
		return call("subagent", `{"description":"`+d+`","prompt":"p","run_in_background":true}`)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", bg("a"), bg("b"), bg("c")),
		scripted.Text("two started"),
		scripted.ToolCalls("", call("task_output", `{"task_id":"subagent-1","wait":true}`), call("task_output", `{"task_id":"subagent-2","wait":true}`)),
		scripted.ToolCalls("", bg("d")),
		scripted.Text("ok"),
	)
	e.run("go")
	// The three calls run in parallel: whichever comes third is refused.
	refused := 0
	for _, r := range results(e.agent)[:3] {
		if text := resultText(r); strings.Contains(text, "too many background tasks") && strings.Contains(text, "task_kill") {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d of three starts refused at a limit of two", refused)
	}
	close(release)
	e.run("collect and start another")
	rs := results(e.agent)
	if got := resultText(rs[len(rs)-1]); got != "started background subagent task subagent-3" {
		t.Fatalf("after recovery %q", got)
	}
	e.agent.WaitIdle(context.Background())
}

// A fork instance that changes the child's persona, tools or model says
// that it forfeits the prompt cache; a plain one does not.
func TestForkDescriptionNamesTheCacheCost(t *testing.T) {
	persona := "You are a reviewer."
	for _, tc := range []struct {
		cfg  subagenttool.Config
		note bool
	}{
		{subagenttool.Config{Provider: "fork", ToolName: "plain_fork"}, false},
		{subagenttool.Config{Provider: "fork", ToolName: "persona_fork", Persona: &persona}, true},
		{subagenttool.Config{Provider: "fork", ToolName: "model_fork", AgentOptions: &agent.Options{Model: "other"}}, true},
		{subagenttool.Config{Provider: "spawn", ToolName: "persona_spawn", Persona: &persona}, false},
	} {
		rt, err := dsh.New(dsh.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, fork := range []bool{false, true} {
			name := map[bool]string{false: "spawn", true: "fork"}[fork]
			p, _ := inproc.New(inproc.Config{Name: name, Agents: rt.Agents, Fork: fork})
			rt.Subagents.Register(p)
		}
		if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events}, tc.cfg); err != nil {
			t.Fatal(err)
		}
		var desc string
		for _, spec := range rt.Tools.NewScope().Specs() {
			if spec.Name == tc.cfg.ToolName {
				desc = spec.Description
			}
		}
		if got := strings.Contains(desc, "full price"); got != tc.note {
			t.Errorf("%s: cache note %v, want %v: %q", tc.cfg.ToolName, got, tc.note, desc)
		}
		rt.Close(context.Background())
	}
}

// A seam error keeps its code on its way to the model: the tool result
// (and so the session log) says DEPTH_EXCEEDED, not TOOL_FAILED.
func TestSeamErrorCodeReachesTheToolResult(t *testing.T) {
	rt, err := dsh.New(dsh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	p, _ := inproc.New(inproc.Config{Name: "spawn", Agents: rt.Agents})
	rt.Subagents.Register(p)
	zero := 0
	if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events},
		subagenttool.Config{Provider: "spawn", MaxDepth: &zero}); err != nil {
		t.Fatal(err)
	}
	rt.LLM.Register("test", scripted.New())
	a, err := rt.Agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	res := a.Tools().Execute(context.Background(), tool.Call{ID: "c1", Name: "subagent",
		Arguments: []byte(`{"description":"x","prompt":"go"}`), Caller: a})
	if !res.IsError || res.Code != string(subagent.CodeDepthExceeded) {
		t.Fatalf("result %+v", res)
	}
}

// recordedUsage sums the usage a's log records for its children
// (subagent.UsageType events).
func recordedUsage(t *testing.T, a *agent.Agent) map[string]content.Usage {
	t.Helper()
	var sum map[string]content.Usage
	for _, e := range a.Session().Events() {
		if e.Type != subagent.UsageType {
			continue
		}
		r, ok := e.Data.(subagent.UsageRecord) // in memory as appended; as JSON once stored
		if !ok {
			if err := json.Unmarshal(e.Data.(json.RawMessage), &r); err != nil {
				t.Fatal(err)
			}
		}
		for k, u := range r.Usage {
			sum = subagent.AddUsage(sum, k, u)
		}
	}
	return sum
}
