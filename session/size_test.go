package session

import (
	"testing"
	"unsafe"
)

// Every delegation makes a Session, and a parked child keeps one: it fits
// the allocator's 416-byte class (a loaded session's writer is apart, the
// pending chunk's flags share a word), not the 448-byte one.
func TestSessionSize(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 416 {
		t.Errorf("a Session is %d bytes, want at most 416", n)
	}
}
