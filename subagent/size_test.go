package subagent

import (
	"testing"
	"unsafe"
)

// Every delegation makes a tracker, and a parked child keeps one: its
// result is apart and its flags share a word, so that it fits the
// allocator's 208-byte class, not the 320-byte one.
func TestTrackerSize(t *testing.T) {
	if n := unsafe.Sizeof(tracker{}); n > 208 {
		t.Errorf("a tracker is %d bytes, want at most 208", n)
	}
}
