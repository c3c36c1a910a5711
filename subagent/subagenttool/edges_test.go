package subagenttool_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

// A background start for an owner that cannot read the result (no
// task_output among its tools) is refused up front: a clear error, no task
// and no child.
func TestBackgroundRefusedWithoutTaskOutput(t *testing.T) {
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent", `{"description":"x","prompt":"y","run_in_background":true}`)),
		scripted.Text("ok"))
	if _, err := e.agent.Tools().Restrict(tool.Restriction{Deny: []string{task.ToolOutput}}); err != nil {
		t.Fatal(err)
	}
	e.run("go")
	rs := results(e.agent)
	if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != tool.CodeInvalidArgs || !strings.Contains(resultText(rs[0]), "no task_output tool") ||
		!strings.Contains(resultText(rs[0]), "no subagent was started") {
		t.Fatalf("results %+v", rs)
	}
	if n := len(e.rt.Tasks.List(e.agent)); n != 0 {
		t.Errorf("%d tasks started", n)
	}
	if n := len(e.rt.Agents.List()); n != 1 {
		t.Errorf("%d agents live, want the parent alone", n)
	}
}
