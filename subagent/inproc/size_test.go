package inproc

import (
	"testing"
	"unsafe"
)

// Every delegation makes a run, and a parked child keeps one: its flags
// share a word, so that it fits the allocator's 320-byte class, not the
// 352-byte one.
func TestRunSize(t *testing.T) {
	if n := unsafe.Sizeof(run{}); n > 320 {
		t.Errorf("a run is %d bytes, want at most 320", n)
	}
}
