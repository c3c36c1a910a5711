package agent_test

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
)

// Children of one agent that render the same system text hold one copy of
// it: many parked children of a tool cost one string, not one each.
func TestChildrenShareEqualSystemText(t *testing.T) {
	e := newEnv(t, scripted.Text("one"), scripted.Text("two"))
	cwd := t.TempDir()
	parent := e.create(agent.CreateOptions{Cwd: cwd})
	run(t, e.create(agent.CreateOptions{Cwd: cwd, Owner: parent, ParentSession: parent.ID(), DelegationDepth: 1}), "hi")
	run(t, e.create(agent.CreateOptions{Cwd: cwd, Owner: parent, ParentSession: parent.ID(), DelegationDepth: 1}), "hi")
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	a, b := reqs[0].System, reqs[1].System
	if a == "" || a != b {
		t.Fatalf("system texts differ: %q, %q", a, b)
	}
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("two agents with the same system text hold a copy each")
	}
}

// A child's prompt is held once by its log and history: while it waits
// for its first answer, its history (what the model is sent) is the inbox
// splice's copy, and
// after a turn of two steps the splice, the user message logged and the
// history still hold the prompt as it was sent (nothing wrote to the
// shared copy).
func TestChildHistoryIsTheSplicesCopy(t *testing.T) {
	e := newEnv(t,
		scripted.ToolCalls("checking", scripted.Call{ID: "c1", Name: "echo", Arguments: `{"text":"a"}`}),
		scripted.Text("done"))
	e.tool(echoTool("echo", false))
	cwd := t.TempDir()
	parent := e.create(agent.CreateOptions{Cwd: cwd})
	child := e.create(agent.CreateOptions{Cwd: cwd, Owner: parent, ParentSession: parent.ID(), DelegationDepth: 1})
	run(t, child, "the task")
	var spliced, logged []content.Message
	for _, ev := range child.Session().Events() {
		switch d := ev.Data.(type) {
		case session.InboxSpliced:
			spliced = append(spliced, d.Inserted...)
		case content.Message:
			logged = append(logged, d)
		}
	}
	hist := child.Session().Messages()
	if len(spliced) != 1 || len(logged) != 1 || len(hist) != 4 {
		t.Fatalf("%d spliced, %d logged, %d in the history", len(spliced), len(logged), len(hist))
	}
	if !reflect.DeepEqual(spliced[0], logged[0]) || !reflect.DeepEqual(hist[0], logged[0]) ||
		content.JoinText(hist[0].Content) != "the task" {
		t.Fatalf("the prompt changed after it was logged: spliced %+v, logged %+v, history %+v", spliced[0], logged[0], hist[0])
	}
	var splicedAt *content.Message
	for _, ev := range child.Session().Events() {
		if d, ok := ev.Data.(session.InboxSpliced); ok {
			splicedAt = &d.Inserted[0]
		}
	}
	if req := e.model.Requests()[0]; len(req.Messages) != 1 || &req.Messages[0] != splicedAt {
		t.Fatal("the child's first request holds a copy of its prompt apart from the splice's")
	}
}

// Children of one agent that send the same request shape hold one copy of
// its logged header; an agent of another owner holds its own.
func TestChildrenShareTheirRequestHeader(t *testing.T) {
	e := newEnv(t, scripted.Text("one"), scripted.Text("two"), scripted.Text("three"))
	cwd := t.TempDir()
	parent := e.create(agent.CreateOptions{Cwd: cwd})
	a := e.create(agent.CreateOptions{Cwd: cwd, Owner: parent, ParentSession: parent.ID(), DelegationDepth: 1})
	b := e.create(agent.CreateOptions{Cwd: cwd, Owner: parent, ParentSession: parent.ID(), DelegationDepth: 1})
	run(t, a, "hi")
	run(t, b, "hi")
	header := func(x *agent.Agent) any {
		for _, ev := range x.Session().Events() {
			if ev.Type == session.TypeRequestHeader {
				return ev.Data
			}
		}
		t.Fatalf("agent %s logged no request header", x.ID())
		return nil
	}
	ha, hb := header(a), header(b)
	if !reflect.DeepEqual(ha, hb) || ha.(session.RequestHeader).Reason != "initial" {
		t.Fatalf("headers differ: %+v, %+v", ha, hb)
	}
	if boxOf(ha) != boxOf(hb) {
		t.Fatal("two children with the same request header hold a copy each")
	}
	if hp := header(parent2(t, e)); boxOf(hp) == boxOf(ha) {
		t.Fatal("an agent of another owner shares a child's header")
	}
}

// parent2 is a root agent that has run one turn.
func parent2(t *testing.T, e *env) *agent.Agent {
	t.Helper()
	p := e.create(agent.CreateOptions{Cwd: t.TempDir()})
	run(t, p, "hi")
	return p
}

// boxOf is the address of the value an interface holds.
func boxOf(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }
