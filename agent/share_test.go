package agent_test

import (
	"testing"
	"unsafe"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/llm/scripted"
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
