package agent

import (
	"testing"
	"unsafe"
)

// Every live child holds an Agent: the hooks' state only roots and agents
// with tool hooks use is allocated apart, and so is what its model calls
// reported (made by the first that reports usage), and its flags share a
// word, so that the struct stays in the 512-byte size class (it was 744
// bytes, in the 768-byte class, then 592 in the 640-byte one, then 568 in
// the 576-byte one).
func TestAgentFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Agent{}); n > 512 { // objects over 512 B with pointers carry an 8-byte header
		t.Fatalf("an Agent is %d bytes, want at most 512: keep state few agents use behind a pointer, and flags together", n)
	}
}

// Every live child holds its turn's state while parked in its model call:
// keep it in the 288-byte size class.
func TestTurnStateFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(turnState{}); n > 288 {
		t.Fatalf("a turnState is %d bytes, want at most 288", n)
	}
}
