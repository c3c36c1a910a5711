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

// Every streamed chunk's event boxes an AssistantChunk once: it fits the
// allocator's 144-byte class, not the 160-byte one.
func TestAssistantChunkSize(t *testing.T) {
	if n := unsafe.Sizeof(AssistantChunk{}); n > 144 {
		t.Errorf("an AssistantChunk is %d bytes, want at most 144", n)
	}
}
