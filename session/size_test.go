package session

import (
	"testing"
	"unsafe"
)

// Every delegation makes a Session, and a parked child keeps one: it fits
// the allocator's 288-byte class (a loaded session's writer is apart, and
// so are the pending delta chunk, made by the first delta: a child parked
// before its answer has none, and a write error; the event indexes are
// int32, beside the closed flag), not the 416-byte one.
func TestSessionSize(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 288 {
		t.Errorf("a Session is %d bytes, want at most 288", n)
	}
}

// Every streamed chunk's event boxes an AssistantChunk once: it fits the
// allocator's 144-byte class, not the 160-byte one.
func TestAssistantChunkSize(t *testing.T) {
	if n := unsafe.Sizeof(AssistantChunk{}); n > 144 {
		t.Errorf("an AssistantChunk is %d bytes, want at most 144", n)
	}
}
