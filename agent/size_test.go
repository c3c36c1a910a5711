package agent

import (
	"testing"
	"unsafe"
)

// Every live child holds an Agent: the hooks' state only roots and agents
// with tool hooks use is allocated apart, so that the struct stays in the
// 640-byte size class (it was 744 bytes, in the 768-byte class).
func TestAgentFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Agent{}); n > 640 {
		t.Fatalf("an Agent is %d bytes, want at most 640: keep state few agents use behind a pointer", n)
	}
}

// Every live child holds its turn's state while parked in its model call:
// keep it in the 288-byte size class.
func TestTurnStateFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(turnState{}); n > 288 {
		t.Fatalf("a turnState is %d bytes, want at most 288", n)
	}
}
