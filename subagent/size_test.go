package subagent

import (
	"testing"
	"unsafe"
)

// Every delegation makes a tracker, and a parked child keeps one: its
// result and early progress are apart and its flags share a word, so that
// it fits the allocator's 192-byte class, not the 320-byte one.
func TestTrackerSize(t *testing.T) {
	if n := unsafe.Sizeof(tracker{}); n > 192 {
		t.Errorf("a tracker is %d bytes, want at most 192", n)
	}
}

// A parked child's run and delegation embed a Settlement each: its result
// is made at the settle, so that a Delegation fits the allocator's 128-byte
// class, not the 224-byte one.
func TestSettlementSize(t *testing.T) {
	if n := unsafe.Sizeof(Settlement{}); n > 64 {
		t.Errorf("a Settlement is %d bytes, want at most 64", n)
	}
	if n := unsafe.Sizeof(Delegation{}); n > 128 {
		t.Errorf("a Delegation is %d bytes, want at most 128", n)
	}
}
