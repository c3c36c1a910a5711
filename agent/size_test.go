package agent

import (
	"context"
	"testing"
	"unsafe"

	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// Every live child holds an Agent: the hooks' state only roots and agents
// with tool hooks use is allocated apart, and so is what its model calls
// reported (made by the first that reports usage), and so is what it keeps
// of its own children (made by the first), its options are interned, and
// its flags share a word, so that the struct stays in the 416-byte size
// class (it was 744 bytes, in the 768-byte class, then 592 in the 640-byte
// one, 568 in the 576-byte one, 512, 448).
func TestAgentFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Agent{}); n > 416 { // objects over 512 B with pointers carry an 8-byte header
		t.Fatalf("an Agent is %d bytes, want at most 416: keep state few agents use behind a pointer, and flags together", n)
	}
}

// Every live child holds its turn's state while parked in its model call:
// keep it in the 256-byte size class (the answer's seqs are the answer's,
// made at its first chunk).
func TestTurnStateFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(turnState{}); n > 256 {
		t.Fatalf("a turnState is %d bytes, want at most 256", n)
	}
}

// A parent's children, created with alike options, hold one interned copy
// of them (80 B per child otherwise), and each still reads its own.
func TestChildrenShareTheirOptions(t *testing.T) {
	bus := event.New(nil)
	agents := NewRegistry(Deps{Sessions: session.NewStore(nil, bus), LLM: llm.NewRegistry(), Tools: tool.NewRegistry(),
		Prompt: prompt.NewRegistry(), Events: bus})
	t.Cleanup(func() {
		if err := agents.DisposeAll(context.Background()); err != nil {
			t.Errorf("dispose: %v", err)
		}
	})
	cwd := t.TempDir()
	parent, err := agents.Create(context.Background(), CreateOptions{Cwd: cwd, Options: Options{Provider: "p", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	var kids []*Agent
	for _, depth := range []int{1, 1, 2} {
		kid, err := agents.Create(context.Background(), CreateOptions{Cwd: cwd, Owner: parent,
			Options: Options{Provider: "p", Model: "m", SubagentDepth: depth}})
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, kid)
	}
	if kids[0].opts != kids[1].opts {
		t.Error("two children with alike options hold a copy each")
	}
	if kids[0].opts == kids[2].opts || kids[2].Depth() != 2 || kids[0].Depth() != 1 {
		t.Errorf("a child with other options shares its sibling's: depths %d, %d", kids[0].Depth(), kids[2].Depth())
	}
	if o := kids[0].Options(); o.Provider != "p" || o.Model != "m" || o.MaxSteps != DefaultMaxSteps {
		t.Errorf("a child's options read back as %+v", o)
	}
}

// A queued message is the inbox splice's logged copy, referred to: an
// inbox item is 48 B, not 208 (a copy of the message), garbage once the
// child's turn logs it.
func TestInboxItemRefersToItsMessage(t *testing.T) {
	if n := unsafe.Sizeof(item{}); n > 48 {
		t.Fatalf("an inbox item is %d bytes, want at most 48", n)
	}
}
