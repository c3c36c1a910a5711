package llm

import (
	"testing"
	"unsafe"
)

// Every model call has a relay on the heap: it fits the allocator's
// 32-byte class (the model's name for a panic's report is the deferred
// end's argument, not a field).
func TestRelaySize(t *testing.T) {
	if n := unsafe.Sizeof(relay{}); n > 32 {
		t.Errorf("a relay is %d bytes, want at most 32", n)
	}
}
