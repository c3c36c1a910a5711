package subagenttool

import (
	"testing"
	"unsafe"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
)

// A background child's settlement lives as long as the child: it keeps
// what ending the child needs (32 B), not the delegation with its request
// (240 B), and that is enough to end it: the hooks' description of the
// child is the one the call made.
func TestFollowIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(follow{}); n > 32 {
		t.Errorf("a follow is %d bytes, want at most 32", n)
	}
	sub := &agent.Subagent{Type: "explore", Provider: "spawn", Description: "look", Prompt: "look around"}
	d := &delegation{follow: follow{sub: sub}, provider: "spawn", typ: "explore",
		req: subagent.StartRequest{Label: "look", Prompt: []content.Block{content.Text("look around")}, Subagent: sub}}
	f := d.following()
	if f == &d.follow || f.sub != sub {
		t.Fatalf("following = %p (%+v), want a copy of the delegation's %p", f, f, &d.follow)
	}
}
