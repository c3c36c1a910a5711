package subagenttool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

// cenv is a runtime over a JSONL store whose agents are all answered by
// one function of the request: continuable children are the default.
type cenv struct {
	t     *testing.T
	rt    *dsh.Runtime
	agent *agent.Agent

	mu       sync.Mutex
	requests []*llm.Request
}

// turnInput is what a reply sees of a request: the last message, and
// whether the request is a child's.
type turnInput struct {
	req   *llm.Request
	child bool
	last  content.Message
	text  string // the last message's text, a child's instructions cut off
}

func newCEnv(t *testing.T, backend session.Backend, reply func(in turnInput) scripted.Entry, cfg ...subagenttool.Config) *cenv {
	t.Helper()
	if backend == nil {
		backend = jsonl.New(t.TempDir())
	}
	rt, err := dsh.New(dsh.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	e := &cenv{t: t, rt: rt}
	rt.LLM.Register("test", llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		e.mu.Lock()
		e.requests = append(e.requests, req)
		e.mu.Unlock()
		in := turnInput{req: req, child: isChild(req), last: req.Messages[len(req.Messages)-1]}
		_, in.text, _ = prompt.SplitChildTask(content.JoinText(in.last.Content))
		if in.last.Source.Kind == content.SourceTool {
			in.text = content.JoinText(in.last.Content[0].Content)
		}
		return scripted.New(reply(in)).Stream(ctx, req)
	}))
	p, _ := inproc.NewSpawn(rt.Agents)
	if _, err := rt.Subagents.Register(p); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{}); err != nil {
		t.Fatal(err)
	}
	deps := subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events}
	if len(cfg) == 0 {
		cfg = []subagenttool.Config{{Provider: inproc.SpawnName}}
	}
	for _, c := range cfg {
		if _, err := subagenttool.Mount(deps, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := subagenttool.MountControl(deps); err != nil {
		t.Fatal(err)
	}
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

// settle waits, in the test's bubble, until every other goroutine is
// durably blocked; the parent and every child below it must be idle then.
func (e *cenv) settle() {
	e.t.Helper()
	synctest.Wait()
	if e.agent.Status() == agent.StatusRunning || e.rt.Subagents.Working(e.agent.ID()) {
		e.t.Fatal("the tree is blocked before it settled")
	}
}

func (e *cenv) run(text string) {
	e.t.Helper()
	if _, err := e.agent.Run(context.Background(), content.UserText(text)); err != nil {
		e.t.Fatal(err)
	}
	e.settle()
}

var childIDPattern = regexp.MustCompile(`subagent ([0-9a-f-]{36})`)

func jsonArgs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// userTexts returns the texts of a's user messages of a plugin form.
func userTexts(a *agent.Agent, form string) []string {
	var out []string
	for _, ev := range a.Session().Events() {
		if m, ok := ev.Data.(content.Message); ok && ev.Type == session.TypeUserMessage && m.Source.Form == form {
			out = append(out, content.JoinText(m.Content))
		}
	}
	return out
}

// Z1, 3.1, 3.2, S1 (cold): a foreground delegation returns the child's
// answer and names its id; send_message continues that child, which sees
// its earlier conversation; its settlement notice wakes the parent once;
// list_agents shows it ready.
func TestForegroundChildContinuedBySendMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var childID string
		e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
			switch {
			case in.child:
				return scripted.Text(fmt.Sprintf("child saw %d messages, last %q", len(in.req.Messages), in.text))
			case in.text == "delegate":
				return scripted.ToolCalls("", call("subagent", `{"description":"look around","prompt":"look"}`))
			case strings.Contains(in.text, "send_message continues it"):
				childID = childIDPattern.FindStringSubmatch(in.text)[1]
				return scripted.Text("delegated")
			case in.text == "continue it":
				return scripted.ToolCalls("", call("send_message", jsonArgs(map[string]string{"subagent_id": childID, "message": "look again"})))
			case in.text == "list":
				return scripted.ToolCalls("", call("list_agents", `{}`))
			}
			return scripted.Text("ok")
		})
		e.run("delegate")
		res := results(e.agent)
		if len(res) != 1 || !strings.HasSuffix(resultText(res[0]), "]\n"+`child saw 1 messages, last "look"`) || childID == "" {
			t.Fatalf("foreground result %+v", res)
		}
		if n := len(userTexts(e.agent, subagent.FormSettled)); n != 0 {
			t.Errorf("a foreground child's result also came as %d notices", n)
		}
		e.run("continue it")
		if got := resultText(results(e.agent)[1]); got != "message queued as the next turn for subagent "+childID {
			t.Errorf("send_message result %q", got)
		}
		notices := userTexts(e.agent, subagent.FormSettled)
		if len(notices) != 1 || !strings.Contains(notices[0], `child saw 3 messages, last "look again"`) {
			t.Errorf("notices %q", notices)
		}
		e.run("list")
		if got := resultText(results(e.agent)[2]); got != childID+" [ready] — look around" {
			t.Errorf("list_agents: %q", got)
		}
	})
}

// 3.1 (background), U6, W: a background child returns its id at once and
// its notice wakes the idle parent; the child reports with the report tool
// (offered to the parent too), and the report reaches the parent first.
func TestBackgroundChildReportsAndNotifies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
			switch {
			case in.child && in.text == "dig":
				return scripted.ToolCalls("", call("report", `{"output":"found it early"}`))
			case in.child:
				return scripted.Text("dug deep")
			case in.text == "delegate":
				return scripted.ToolCalls("", call("subagent", `{"description":"dig","prompt":"dig","run_in_background":true}`))
			}
			return scripted.Text("ok")
		})
		e.run("delegate")
		if got := resultText(results(e.agent)[0]); !strings.HasPrefix(got, "started subagent ") || !strings.Contains(got, "in the background") {
			t.Errorf("background result %q", got)
		}
		reports, notices := userTexts(e.agent, subagent.FormReport), userTexts(e.agent, subagent.FormSettled)
		if len(reports) != 1 || !strings.HasSuffix(reports[0], "reported:found it early") || len(notices) != 1 || !strings.Contains(notices[0], "dug deep") {
			t.Errorf("reports %q, notices %q", reports, notices)
		}
		// report is offered to every agent, so that a child's tool list is
		// its parent's (the prompt-cache prefix); it answers only in a child.
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, req := range e.requests {
			has := false
			for _, s := range req.Tools {
				has = has || s.Name == subagenttool.ToolReport
			}
			if !has {
				t.Errorf("report not offered in a request (child: %v)", isChild(req))
			}
		}
	})
}

// Z1, Z2: refusals are error results naming their code; interrupt_agent
// accepts an absent target; a stranger cannot message another's child; the
// root's report says there is no one to report to.
func TestControlToolRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
			switch in.text {
			case "bad":
				return scripted.ToolCalls("", call("send_message", `{"subagent_id":"nope","message":"hi"}`),
					call("interrupt_agent", `{"agent_id":"nope"}`), call("list_agents", `{"scope":"all"}`),
					call("report", `{"output":"from the root"}`))
			}
			return scripted.Text("ok")
		})
		e.run("bad")
		res := results(e.agent)
		if len(res) != 4 {
			t.Fatalf("results %+v", res)
		}
		if res[0].Error == nil || res[0].Error.Code != string(subagent.CodeNotResumable) || !strings.Contains(resultText(res[0]), "unavailable") {
			t.Errorf("send_message to an unknown id: %+v %q", res[0].Error, resultText(res[0]))
		}
		if res[1].Error != nil || resultText(res[1]) != "interrupt requested for agent nope" {
			t.Errorf("interrupt of an absent target: %q", resultText(res[1]))
		}
		if res[2].Error == nil || res[2].Error.Code != tool.CodeInvalidArgs {
			t.Errorf("list_agents with a bad scope: %+v", res[2])
		}
		if res[3].Error == nil || res[3].Error.Code != string(subagent.CodeUnauthorized) || !strings.Contains(resultText(res[3]), "no agent started you") {
			t.Errorf("report from the root: %+v %q", res[3].Error, resultText(res[3]))
		}
	})
}

// P: continuable: false keeps one-shot children (a task in the
// background); continuable: true over a store that does not outlive the
// process fails each call with PERSISTENCE_UNAVAILABLE, creating nothing;
// continuable: true on a provider that cannot continue is a mount error.
func TestContinuableConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		off := false
		e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
			if in.text == "go" {
				return scripted.ToolCalls("", call("subagent", `{"description":"d","prompt":"p","run_in_background":true}`))
			}
			return scripted.Text("ok")
		}, subagenttool.Config{Provider: inproc.SpawnName, Continuable: &off})
		e.run("go")
		if got := resultText(results(e.agent)[0]); !strings.HasPrefix(got, "started background subagent task subagent-1") {
			t.Errorf("one-shot instance: %q", got)
		}

		on := true
		m := newCEnv(t, session.NewMemoryBackend(), func(in turnInput) scripted.Entry {
			if in.text == "go" {
				return scripted.ToolCalls("", call("subagent", `{"description":"d","prompt":"p"}`))
			}
			return scripted.Text("ok")
		}, subagenttool.Config{Provider: inproc.SpawnName, Continuable: &on})
		m.run("go")
		if r := results(m.agent)[0]; r.Error == nil || r.Error.Code != string(subagent.CodePersistenceUnavailable) {
			t.Errorf("continuable over memory: %+v %q", r.Error, resultText(r))
		}
		if n := len(m.rt.Agents.List()); n != 1 {
			t.Errorf("%d agents", n)
		}
		if _, err := m.rt.Subagents.Register(bareProvider{}); err != nil {
			t.Fatal(err)
		}
		_, err := subagenttool.Mount(subagenttool.Deps{Subagents: m.rt.Subagents, Tools: m.rt.Tools, Tasks: m.rt.Tasks, Events: m.rt.Events},
			subagenttool.Config{Provider: "bare", ToolName: "bare", Continuable: &on})
		if err == nil || !strings.Contains(err.Error(), "continuable: false") {
			t.Errorf("continuable on a provider that cannot: %v", err)
		}
		if errors.Is(err, subagent.ErrNoProvider) {
			t.Error("wrong error")
		}

		// An out-of-process product that keeps no conversations (Codex
		// without codexHome) starts one-shot children by default, and
		// refuses continuable: true.
		if _, err := e.rt.Subagents.Register(homelessProvider{}); err != nil {
			t.Fatal(err)
		}
		deps := subagenttool.Deps{Subagents: e.rt.Subagents, Tools: e.rt.Tools, Tasks: e.rt.Tasks, Events: e.rt.Events}
		if _, err := subagenttool.Mount(deps, subagenttool.Config{Provider: "homeless", ToolName: "homeless"}); err != nil {
			t.Fatal(err)
		}
		for _, spec := range e.agent.Tools().Specs() {
			if spec.Name == "homeless" && strings.Contains(spec.Description, "send_message") {
				t.Errorf("a provider that cannot resume got a continuable tool: %q", spec.Description)
			}
		}
		_, err = subagenttool.Mount(deps, subagenttool.Config{Provider: "homeless", ToolName: "homeless_on", Continuable: &on})
		if err == nil || !strings.Contains(err.Error(), "codexHome") {
			t.Errorf("continuable on a product that keeps no conversations: %v", err)
		}
	})
}

// homelessProvider continues conversations in a product that keeps none.
type homelessProvider struct{ bareProvider }

func (homelessProvider) Name() string    { return "homeless" }
func (homelessProvider) CanResume() bool { return false }
func (homelessProvider) ResumeRun(context.Context, subagent.StartRequest, string) (subagent.Run, error) {
	return nil, errors.New("never resumes")
}

// 3.4: list_agents renders children, diagnostics and descendants as pinned.
func TestRenderAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rows := []subagent.ChildRow{
			{ID: "a", Mode: subagent.Continuable, Label: "first", Parent: "root", Depth: 1},
			{ID: "b", Mode: subagent.OneShot, Label: "once", Parent: "root", Depth: 1},
			{ID: "c", Diagnostic: subagent.DiagnosticCorrupt, Parent: "a", Depth: 2},
		}
		status := func(id string) subagent.Residency {
			return map[string]subagent.Residency{"a": subagent.ResidentRunning}[id]
		}
		if got, want := subagenttool.RenderAgents(rows, false, status), "a [running] — first\nc [diagnostic: corrupt]"; got != want {
			t.Errorf("children:\n%s\nwant\n%s", got, want)
		}
		if got, want := subagenttool.RenderAgents(rows, true, status), "a [running] parent=root depth=1 — first\nc [diagnostic: corrupt] parent=a depth=2"; got != want {
			t.Errorf("descendants:\n%s\nwant\n%s", got, want)
		}
		if got := subagenttool.RenderAgents(nil, false, status); got != "(no subagents)" {
			t.Errorf("empty: %q", got)
		}
	})
}

// A foreground continuable call whose turn is cancelled interrupts the
// child: its turn ends aborted, the call returns an aborted error result
// naming the child, no notice follows and nothing is left running; the
// child can be messaged later.
func TestCancelledForegroundCallInterruptsTheChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hung := make(chan struct{}, 1)
		e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
			switch {
			case in.child && in.text == "hang":
				hung <- struct{}{}
				return scripted.Hang("thinking")
			case in.text == "go":
				return scripted.ToolCalls("", call("subagent", `{"description":"slow","prompt":"hang"}`))
			}
			return scripted.Text("ok")
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-hung
			cancel()
		}()
		end, err := e.agent.Run(ctx, content.UserText("go"))
		if err != nil || end.Reason.Kind != session.EndAborted {
			t.Fatalf("turn %+v %v", end, err)
		}
		e.settle()
		res := results(e.agent)
		if len(res) != 1 || res[0].Error == nil || !strings.Contains(resultText(res[0]), "cancelled") || !childIDPattern.MatchString(resultText(res[0])) {
			t.Fatalf("results %+v", res)
		}
		if n := len(userTexts(e.agent, subagent.FormSettled)); n != 0 {
			t.Errorf("%d notices after a foreground call", n)
		}
		if n := len(e.rt.Agents.List()); n != 1 {
			t.Errorf("%d agents left", n)
		}
	})
}

// A background continuable child runs the parent's SubagentStop hooks once
// it settles, before the parent hears of it, as a one-shot child does.
func TestBackgroundContinuableChildRunsSubagentStop(t *testing.T) {
	e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
		switch {
		case in.child:
			return scripted.Text("dug deep")
		case in.text == "delegate":
			return scripted.ToolCalls("", call("subagent", `{"description":"dig","prompt":"dig","run_in_background":true}`))
		}
		return scripted.Text("ok")
	})
	log := filepath.Join(t.TempDir(), "hooks.jsonl")
	hooks, err := hook.New(hook.Config{hook.SubagentStop: {{Hooks: []hook.Command{{Command: "cat >> " + log + "; echo >> " + log}}}}}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	parent, err := e.rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan subagent.Ended, 1)
	defer event.On(e.rt.Events, func(ev subagent.Ended) { ended <- ev })()
	if _, err := parent.Run(context.Background(), content.UserText("delegate")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended: // after the hooks: they run before the end is announced
	case <-time.After(30 * time.Second):
		t.Fatal("the background child never settled")
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var in hook.Input
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &in) != nil {
		t.Fatalf("hook runs %q, want one", lines)
	}
	if in.Event != hook.SubagentStop || in.StopReason != "completed" || in.Output != "dug deep" || in.Description != "dig" {
		t.Fatalf("SubagentStop input %+v", in)
	}
}

// A tool host (the agent of a `dsh mcp` session) starts one-shot
// children: its client cannot continue a child, and no settlement notice
// reaches it. A background call is a task the client collects with
// task_output, and its end opens no turn of the host's.
func TestToolHostChildrenAreOneShotTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newCEnv(t, nil, func(in turnInput) scripted.Entry { return scripted.Text("dug deep") })
		host, err := e.rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}, ToolHost: true})
		if err != nil {
			t.Fatal(err)
		}
		res := host.Tools().Execute(context.Background(), tool.Call{ID: "c1", Name: "subagent", Cwd: host.Cwd(), Caller: host,
			Arguments: json.RawMessage(`{"description":"dig","prompt":"dig","run_in_background":true}`)})
		id, ok := strings.CutPrefix(content.JoinText(res.Content), "started background subagent task ")
		if res.IsError || !ok {
			t.Fatalf("start: %+v", res)
		}
		synctest.Wait()
		out := host.Tools().Execute(context.Background(), tool.Call{ID: "c2", Name: task.ToolOutput, Cwd: host.Cwd(), Caller: host,
			Arguments: json.RawMessage(`{"task_id":"` + id + `"}`)})
		if out.IsError || !strings.Contains(content.JoinText(out.Content), "dug deep") {
			t.Fatalf("task_output: %+v", out)
		}
		if n := host.Session().LastTurn(); n != 0 || len(userTexts(host, subagent.FormSettled)) != 0 {
			t.Fatalf("the tool host ran %d turns, notices %q", n, userTexts(host, subagent.FormSettled))
		}
		fg := host.Tools().Execute(context.Background(), tool.Call{ID: "c3", Name: "subagent", Cwd: host.Cwd(), Caller: host,
			Arguments: json.RawMessage(`{"description":"dig","prompt":"dig"}`)})
		if text := content.JoinText(fg.Content); fg.IsError || text != "dug deep" {
			t.Fatalf("foreground call of a tool host: %q (no continuation line: a one-shot child)", text)
		}
	})
}

// A one-shot child sees report (its tool list is its parent's) and is told,
// as an error result, to put its findings in its final message.
func TestOneShotChildReportRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		off := false
		var refusal string
		e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
			switch {
			case in.child && in.text == "dig":
				return scripted.ToolCalls("", call("report", `{"output":"early"}`))
			case in.child:
				refusal = in.text
				return scripted.Text("dug")
			case in.text == "go":
				return scripted.ToolCalls("", call("oneshot", `{"description":"dig","prompt":"dig"}`))
			}
			return scripted.Text("ok")
		}, subagenttool.Config{Provider: inproc.SpawnName}, subagenttool.Config{Provider: inproc.SpawnName, ToolName: "oneshot", Continuable: &off})
		e.run("go")
		if !strings.HasPrefix(refusal, "Error: ") || !strings.Contains(refusal, "you are a one-shot one") {
			t.Errorf("the one-shot child's report result: %q", refusal)
		}
	})
}
