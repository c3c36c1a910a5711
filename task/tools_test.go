package task_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

var taskTools = []string{"task_list", "task_output", "task_kill"}

func wantText(t *testing.T, res tool.Result, want string) {
	t.Helper()
	if res.IsError || text(res) != want {
		t.Fatalf("result %q (error %v, code %s), want %q", text(res), res.IsError, res.Code, want)
	}
}

func wantError(t *testing.T, res tool.Result, code, msg string) {
	t.Helper()
	if !res.IsError || res.Code != code || text(res) != "Error: "+msg {
		t.Fatalf("result %q (error %v, code %s), want error %s %q", text(res), res.IsError, res.Code, code, msg)
	}
}

func TestMountRegistersToolsAndGuidance(t *testing.T) {
	e := newEnv(t, envConfig{})
	dispose, err := task.Mount(e.rt.Tasks, e.rt.Tools, e.rt.Prompt, task.ToolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := e.agent()
	for _, name := range taskTools {
		if !a.Tools().Has(name) {
			t.Errorf("%s not visible to an agent", name)
		}
		if !a.Tools().ConcurrencySafe(name) {
			t.Errorf("%s is not concurrency-safe", name)
		}
	}
	var found bool
	for _, s := range a.Prompt().Sections() {
		if s.Name == task.GuidanceSection {
			found = s.Order == 106 && strings.Contains(s.Text, "task_output") && strings.Contains(s.Text, "task_kill")
		}
	}
	if !found {
		t.Fatalf("no guidance section %q among %+v", task.GuidanceSection, a.Prompt().Sections())
	}

	// A second mount is refused and leaves the first intact.
	if _, err := task.Mount(e.rt.Tasks, e.rt.Tools, e.rt.Prompt, task.ToolOptions{}); err == nil {
		t.Fatal("a second Mount on the same registries succeeded")
	}
	wantText(t, call(a, "task_list", `{}`), "(no background tasks)")

	dispose()
	for _, name := range taskTools {
		if a.Tools().Has(name) {
			t.Errorf("%s still registered after dispose", name)
		}
	}
	for _, s := range a.Prompt().Sections() {
		if s.Name == task.GuidanceSection {
			t.Fatal("guidance section still registered after dispose")
		}
	}
	// Mounting again works once the first mount is gone.
	again, err := task.Mount(e.rt.Tasks, e.rt.Tools, e.rt.Prompt, task.ToolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again()
}

func TestMountRollsBackWhenGuidanceSectionExists(t *testing.T) {
	e := newEnv(t, envConfig{})
	if _, err := e.rt.Prompt.Section(prompt.Section{Name: task.GuidanceSection, Text: "taken"}); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Mount(e.rt.Tasks, e.rt.Tools, e.rt.Prompt, task.ToolOptions{}); err == nil {
		t.Fatal("Mount succeeded although its prompt section exists")
	}
	for _, name := range taskTools {
		if e.agent().Tools().Has(name) {
			t.Errorf("%s left registered by a failed Mount", name)
		}
	}
}

func TestToolList(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a, other := e.agent(), e.agent()
	wantText(t, call(a, "task_list", `{}`), "(no background tasks)")
	wantText(t, call(a, "task_list", ``), "(no background tasks)")

	done := newProducer(t, false)
	doneID := start(t, e.rt.Tasks, spec("bash", "go test ./...", a, done))
	start(t, e.rt.Tasks, spec("subagent", "review\nthe diff", nil, newProducer(t, false)))
	start(t, e.rt.Tasks, spec("bash", "not yours", other, newProducer(t, false)))
	done.complete("ok")
	settled(t, e.rt.Tasks, doneID, a)
	wantText(t, call(a, "task_list", `{}`), "bash-1 [bash] completed — go test ./...\nsubagent-1 [subagent] running — review the diff")
	wantText(t, call(other, "task_list", `{}`), "subagent-1 [subagent] running — review the diff\nbash-2 [bash] running — not yours")
}

func TestToolOutput(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("subagent", "research", a, p))
	args := `{"task_id":"` + id + `"}`
	wantText(t, call(a, "task_output", args), "(no new output)\n[status: running]")

	p.finish <- task.Outcome{Status: task.Completed, Output: "the findings"}
	settled(t, e.rt.Tasks, id, a)
	for range 2 { // idempotent
		res := call(a, "task_output", args)
		wantText(t, res, "the findings\n[status: completed]")
	}
	if s, _ := e.rt.Tasks.Get(id, a); !s.Reported {
		t.Fatal("task_output of a finished task did not mark it reported")
	}
}

func TestToolOutputFailedAndKilled(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a := e.agent()
	failed := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "build", a, failed))
	failed.finish <- task.Outcome{Status: task.Failed, Detail: "exit status 1"}
	settled(t, e.rt.Tasks, id, a)
	wantText(t, call(a, "task_output", `{"task_id":"bash-1"}`), "(no new output)\n[status: failed, exit status 1]")

	failed = newProducer(t, false)
	id = start(t, e.rt.Tasks, spec("bash", "build", a, failed))
	failed.finish <- task.Outcome{Status: task.Failed, Detail: "exit status 2", Output: "compile error"}
	settled(t, e.rt.Tasks, id, a)
	wantText(t, call(a, "task_output", `{"task_id":"bash-2"}`), "compile error\n[status: failed, exit status 2]")

	killed := newProducer(t, false)
	start(t, e.rt.Tasks, spec("bash", "serve", a, killed))
	wantText(t, call(a, "task_kill", `{"task_id":"bash-3","reason":"done with it"}`), "requested cancellation of task bash-3")
	wantText(t, call(a, "task_output", `{"task_id":"bash-3","wait":true}`), "(no new output)\n[status: killed, done with it]")
}

func TestToolOutputWaitTimesOutLeavingTaskRunning(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "slow", a, p))
	wantText(t, call(a, "task_output", `{"task_id":"`+id+`","wait":true,"timeout_ms":1}`), "(no new output)\n[status: running]")
	if p.wasCancelled() {
		t.Fatal("a timed-out wait cancelled the task")
	}
	// The default wait (WaitTimeout) is bounded too.
	e2 := newEnv(t, envConfig{Tools: &task.ToolOptions{WaitTimeout: time.Millisecond}})
	b := e2.agent()
	start(t, e2.rt.Tasks, spec("bash", "slow", b, newProducer(t, false)))
	wantText(t, call(b, "task_output", `{"task_id":"bash-1","wait":true}`), "(no new output)\n[status: running]")
	// So is a timeout_ms above MaxWaitTimeout.
	e3 := newEnv(t, envConfig{Tools: &task.ToolOptions{MaxWaitTimeout: time.Millisecond}})
	c := e3.agent()
	start(t, e3.rt.Tasks, spec("bash", "slow", c, newProducer(t, false)))
	wantText(t, call(c, "task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":3600000}`), "(no new output)\n[status: running]")
}

func TestToolOutputWaitReturnsWhenTaskSettles(t *testing.T) {
	for _, args := range []string{`"wait":true`, `"wait":true,"timeout_ms":3600000`} {
		t.Run(args, func(t *testing.T) {
			e := newEnv(t, envConfig{Tools: &task.ToolOptions{WaitTimeout: time.Hour}})
			a := e.agent()
			p := newProducer(t, false)
			id := start(t, e.rt.Tasks, spec("bash", "slow", a, p))
			got := make(chan tool.Result, 1)
			go func() { got <- call(a, "task_output", `{"task_id":"`+id+`",`+args+`}`) }()
			p.complete("finally")
			wantText(t, <-got, "finally\n[status: completed]")
		})
	}
}

func TestToolOutputRefusesNegativeTimeout(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a := e.agent()
	start(t, e.rt.Tasks, spec("bash", "slow", a, newProducer(t, false)))
	for _, args := range []string{`{"task_id":"bash-1","wait":true,"timeout_ms":-1}`, `{"task_id":"bash-1","timeout_ms":-5}`} {
		wantError(t, call(a, "task_output", args), tool.CodeInvalidArgs, "timeout_ms must not be negative")
	}
}

func TestToolOutputKeepsTheTail(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{OutputLimit: 10}})
	a := e.agent()
	for _, tc := range []struct{ output, want string }{
		{"0123456789", "0123456789"},
		{"0123456789abcdefghij", "[… 10 bytes omitted …]\nabcdefghij"},
		// The cut moves forward to a rune boundary: "é" is two bytes.
		{"xxxxxxxxxé123456789", "[… 11 bytes omitted …]\n123456789"},
	} {
		p := newProducer(t, false)
		id := start(t, e.rt.Tasks, spec("bash", "noisy", a, p))
		p.complete(tc.output)
		settled(t, e.rt.Tasks, id, a)
		wantText(t, call(a, "task_output", `{"task_id":"`+id+`"}`), tc.want+"\n[status: completed]")
	}
}

func TestToolKill(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "server", a, p))
	wantText(t, call(a, "task_kill", `{"task_id":"`+id+`"}`), "requested cancellation of task "+id)
	if got := p.killReason(t); got != "killed by its owner" {
		t.Fatalf("reason %q", got)
	}
	settled(t, e.rt.Tasks, id, a)
	wantText(t, call(a, "task_kill", `{"task_id":"`+id+`"}`), "task "+id+" had already finished [status: killed, killed by its owner]")

	q := newProducer(t, false)
	id = start(t, e.rt.Tasks, spec("bash", "quick", a, q))
	q.complete("")
	settled(t, e.rt.Tasks, id, a)
	wantText(t, call(a, "task_kill", `{"task_id":"`+id+`","reason":"whatever"}`), "task "+id+" had already finished [status: completed]")
	if q.wasCancelled() {
		t.Fatal("task_kill of a finished task cancelled it")
	}
}

func TestToolsRequireCallingAgent(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	start(t, e.rt.Tasks, spec("bash", "shared", nil, newProducer(t, false)))
	scope := e.rt.Tools.NewScope()
	for _, caller := range []any{nil, (*agent.Agent)(nil), "agent-1"} {
		for _, name := range taskTools {
			res := scope.Execute(context.Background(), tool.Call{Name: name, Arguments: json.RawMessage(`{"task_id":"bash-1"}`), Caller: caller})
			wantError(t, res, tool.CodeFailed, "task tools require a calling agent")
		}
	}
}

func TestToolsReportTaskErrors(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a, other := e.agent(), e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "mine", a, p))
	for _, tc := range []struct{ name, args string }{
		{"task_output", `{"task_id":"` + id + `"}`},
		{"task_output", `{"task_id":"` + id + `","wait":true}`},
		{"task_kill", `{"task_id":"` + id + `"}`},
	} {
		wantError(t, call(other, tc.name, tc.args), task.CodeForbidden, "task "+id+" belongs to another session")
		wantError(t, call(a, tc.name, strings.Replace(tc.args, id, "bash-42", 1)), task.CodeUnknown, "unknown task bash-42")
	}
	if p.wasCancelled() {
		t.Fatal("a forbidden task_kill cancelled the task")
	}
	wantText(t, call(other, "task_list", `{}`), "(no background tasks)")
}

// A timeout_ms large enough to overflow time.Duration once multiplied by
// time.Millisecond wraps to a negative duration: the wait must not return
// at once but be capped at MaxWaitTimeout (exactly, on the bubble's clock).
func TestToolOutputHugeTimeoutIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxWait = 200 * time.Millisecond
		e := newEnv(t, envConfig{Tools: &task.ToolOptions{MaxWaitTimeout: maxWait}})
		a := e.agent()
		start(t, e.rt.Tasks, spec("bash", "slow", a, newProducer(t, false)))
		begin := time.Now()
		// 9223372036854775807 ms * 1e6 wraps to -1ms.
		wantText(t, call(a, "task_output", `{"task_id":"bash-1","wait":true,"timeout_ms":9223372036854775807}`), "(no new output)\n[status: running]")
		if waited := time.Since(begin); waited != maxWait {
			t.Fatalf("waited %v on the bubble's clock, want the %v cap", waited, maxWait)
		}
	})
}

func TestNoticeText(t *testing.T) {
	for _, tc := range []struct {
		snap task.Snapshot
		want string
	}{
		{task.Snapshot{ID: "bash-3", Kind: "bash", Label: "go test ./...", Status: task.Completed},
			"background task bash-3 (bash: go test ./...) finished [status: completed]. Read its output with task_output."},
		{task.Snapshot{ID: "subagent-1", Kind: "subagent", Label: "review", Status: task.Failed, Detail: "max-tokens"},
			"background task subagent-1 (subagent: review) finished [status: failed, max-tokens]. Read its output with task_output."},
	} {
		m := task.Notice(tc.snap)
		if got := content.JoinText(m.Content); got != tc.want {
			t.Errorf("notice %q, want %q", got, tc.want)
		}
		if m.Role != content.RoleUser || m.ID == "" {
			t.Errorf("notice role %q id %q", m.Role, m.ID)
		}
		if want := (content.Source{Kind: content.SourcePlugin, Plugin: task.NoticePlugin, Form: "notice"}); m.Source != want {
			t.Errorf("notice source %+v, want %+v", m.Source, want)
		}
	}
}

// notices returns a channel receiving the owner's notice messages as its
// session logs them.
func notices(t *testing.T, a *agent.Agent) <-chan content.Message {
	ch := make(chan content.Message, 16)
	stop := a.Session().Observe(func(ev session.Event) {
		if m, ok := ev.Data.(content.Message); ok && ev.Type == session.TypeUserMessage && m.Source.Plugin == task.NoticePlugin {
			ch <- m
		}
	})
	t.Cleanup(stop)
	return ch
}

// lastEvent returns the owner's last logged event.
func lastEvent(a *agent.Agent) session.Event {
	evs := a.Session().Events()
	return evs[len(evs)-1]
}

func noticeFor(id, kind, label string) string {
	return "background task " + id + " (" + kind + ": " + label + ") finished [status: completed]. Read its output with task_output."
}

// finish completes a task and waits until its Done was handled (the
// recorder listens after the notice delivery).
func (e *env) finish(t *testing.T, p *producer, id string) {
	t.Helper()
	p.complete("out")
	e.done.next(t, id)
}

func TestNoticeWakesIdleOwner(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}, Script: []scripted.Entry{scripted.Text("noted")}})
	a := e.agent()
	seen := notices(t, a)
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "build", a, p))
	p.complete("built")
	m := <-seen
	if err := a.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := content.JoinText(m.Content); got != noticeFor(id, "bash", "build") {
		t.Fatalf("notice %q", got)
	}
	if n := a.Session().LastTurn(); n != 1 {
		t.Fatalf("%d turns, want 1 opened by the notice", n)
	}
	reqs := e.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(reqs))
	}
	msgs := reqs[0].Messages
	if last := msgs[len(msgs)-1]; last.Source.Plugin != task.NoticePlugin {
		t.Fatalf("the woken turn's model call ended with %+v", last)
	}
	// The notice does not count as reading the output.
	if s, _ := e.rt.Tasks.Get(id, a); s.Reported {
		t.Fatal("the notice marked the task reported")
	}
}

func TestNoticeSkipsUnownedTasks(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "shared", nil, p))
	e.finish(t, p, id)
	if n := a.Session().Len(); n != 0 || a.Status() != agent.StatusIdle || len(e.model.Requests()) != 0 {
		t.Fatalf("an unowned task's completion reached an agent: %d events, status %s", n, a.Status())
	}
}

func TestNoticeJoinsRunningTurn(t *testing.T) {
	entered, gate := make(chan struct{}), make(chan struct{})
	busy := scripted.Entry{Reply: func(*llm.Request) []content.Chunk {
		close(entered)
		<-gate
		return scripted.Text("working").Chunks
	}}
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}, Script: []scripted.Entry{busy, scripted.Text("noted")}})
	a := e.agent()
	seen := notices(t, a)
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "build", a, p))

	ended := make(chan session.TurnEnd, 1)
	go func() {
		end, _ := a.Run(context.Background(), content.UserText("do something"))
		ended <- end
	}()
	<-entered
	e.finish(t, p, id) // delivered while the owner is running: injected
	close(gate)
	if end := <-ended; end.Reason.Kind != session.EndCompleted || end.Turn != 1 {
		t.Fatalf("turn end %+v", end)
	}
	m := <-seen
	if got := content.JoinText(m.Content); got != noticeFor(id, "bash", "build") {
		t.Fatalf("notice %q", got)
	}
	if err := a.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := a.Session().LastTurn(); n != 1 {
		t.Fatalf("%d turns, want the notice to join the running one", n)
	}
	if n := len(e.model.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2 (one step more for the notice)", n)
	}
}

func TestNoticeWakeBudget(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{MaxWakes: 2},
		Script: []scripted.Entry{scripted.Text("1"), scripted.Text("2"), scripted.Text("user turn"), scripted.Text("3")}})
	a := e.agent()
	seen := notices(t, a)
	ps := make([]*producer, 4)
	tasks := make([]string, 4)
	for i := range ps {
		ps[i] = newProducer(t, false)
		tasks[i] = start(t, e.rt.Tasks, spec("bash", "job", a, ps[i]))
	}
	wake := func(i, turn int) {
		t.Helper()
		e.finish(t, ps[i], tasks[i])
		m := <-seen
		if got := content.JoinText(m.Content); got != noticeFor(tasks[i], "bash", "job") {
			t.Fatalf("notice %q, want the one of %s", got, tasks[i])
		}
		if err := a.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := a.Session().LastTurn(); n != turn {
			t.Fatalf("%d turns after the notice of %s, want %d", n, tasks[i], turn)
		}
	}
	wake(0, 1)
	wake(1, 2)

	// The budget is spent: the third notice is queued without a turn.
	e.finish(t, ps[2], tasks[2])
	if st := a.Status(); st != agent.StatusIdle {
		t.Fatalf("status %s, want idle", st)
	}
	if n := a.Session().LastTurn(); n != 2 {
		t.Fatalf("%d turns, want 2: a notice past the budget opened a turn", n)
	}
	last := lastEvent(a)
	splice, ok := last.Data.(session.InboxSpliced)
	if last.Type != session.TypeInboxSpliced || !ok || len(splice.Inserted) != 1 || splice.Target != "next-step" ||
		content.JoinText(splice.Inserted[0].Content) != noticeFor(tasks[2], "bash", "job") {
		t.Fatalf("last event %s %+v, want the notice injected for the next step", last.Type, last.Data)
	}

	// A user message reads the pending notice and resets the budget.
	end, err := a.Run(context.Background(), content.UserText("what happened?"))
	if err != nil || end.Reason.Kind != session.EndCompleted || end.Turn != 3 {
		t.Fatalf("user turn %+v, %v", end, err)
	}
	if m := <-seen; content.JoinText(m.Content) != noticeFor(tasks[2], "bash", "job") {
		t.Fatalf("the user turn logged notice %q", content.JoinText(m.Content))
	}
	wake(3, 4)
}

// A task whose outcome task_output waited for and returned gets no
// completion notice afterwards: whether the notice was steered in while
// the call waited (it is withdrawn from the inbox) or the read came first
// (none is sent), the owner's next step holds the tool result alone and no
// turn follows. Each round races the producer's completion against the
// waiting call.
func TestNoNoticeAfterTaskOutputReturnedTheResult(t *testing.T) {
	for round := range 10 {
		e := newEnv(t, envConfig{Tools: &task.ToolOptions{}, Script: []scripted.Entry{
			scripted.ToolCalls("", scripted.Call{Name: "task_output", Arguments: `{"task_id":"bash-1","wait":true,"timeout_ms":60000}`}),
			scripted.Text("got it"),
		}})
		a := e.agent()
		p := newProducer(t, false)
		id := start(t, e.rt.Tasks, spec("bash", "build", a, p))
		stop := a.Session().Observe(func(ev session.Event) {
			if c, ok := ev.Data.(session.ToolCall); ok && c.Name == "task_output" {
				go p.complete("built")
			}
		})
		end, err := a.Run(context.Background(), content.UserText("wait for the build"))
		stop()
		if err != nil || end.Reason.Kind != session.EndCompleted {
			t.Fatalf("round %d: %+v %v", round, end, err)
		}
		e.done.next(t, id)
		if err := a.WaitIdle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := a.Session().LastTurn(); n != 1 {
			t.Fatalf("round %d: %d turns: a notice opened one", round, n)
		}
		reqs := e.model.Requests()
		if len(reqs) != 2 {
			t.Fatalf("round %d: %d model calls, want 2", round, len(reqs))
		}
		for _, m := range reqs[1].Messages {
			if m.Source.Plugin == task.NoticePlugin {
				t.Fatalf("round %d: the step after task_output holds the notice", round)
			}
		}
		if !strings.Contains(text(tool.Result{Content: reqs[1].Messages[len(reqs[1].Messages)-1].Content[0].Content}), "built") {
			t.Fatalf("round %d: task_output did not return the result", round)
		}
		if a.Queued() != 0 {
			t.Fatalf("round %d: %d messages left queued", round, a.Queued())
		}
	}
}

// A task the user stopped ends killed, and its notice waits for the
// owner's next turn instead of waking it; other kinds keep running.
func TestStopQueuesTheNoticeWithoutWaking(t *testing.T) {
	e := newEnv(t, envConfig{Tools: &task.ToolOptions{}, Script: []scripted.Entry{scripted.Text("noted")}})
	a := e.agent()
	p := newProducer(t, true)
	id := start(t, e.rt.Tasks, spec("subagent", "child", a, p))
	other := newProducer(t, true)
	bash := start(t, e.rt.Tasks, spec("bash", "build", a, other))
	if got := e.rt.Tasks.Stop(a, "subagent", "Esc"); len(got) != 1 || got[0] != id {
		t.Fatalf("Stop = %v, want [%s]", got, id)
	}
	if got := p.killReason(t); got != "Esc" {
		t.Fatalf("kill reason %q", got)
	}
	p.release()
	e.done.next(t, id)
	if s, _ := e.rt.Tasks.Get(id, a); s.Status != task.Killed || s.Reported {
		t.Fatalf("stopped task %+v, want killed and unread", s)
	}
	if a.Status() != agent.StatusIdle || a.Session().LastTurn() != 0 || len(e.model.Requests()) != 0 || a.Queued() != 1 {
		t.Fatalf("the stopped task's notice woke its owner (status %s, %d turns, %d queued)", a.Status(), a.Session().LastTurn(), a.Queued())
	}
	if s, _ := e.rt.Tasks.Get(bash, a); s.Status.Terminal() {
		t.Fatal("Stop of kind subagent stopped a bash task")
	}
	other.release()
}
