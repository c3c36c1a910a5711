package inproc

import (
	"testing"
	"unsafe"
)

// Every delegation makes a run, and a parked child keeps one: its flags
// share a word and its settled result is made at the settle, so that it
// fits the allocator's 208-byte class, not the 320-byte one.
func TestRunSize(t *testing.T) {
	if n := unsafe.Sizeof(run{}); n > 208 {
		t.Errorf("a run is %d bytes, want at most 208", n)
	}
}
