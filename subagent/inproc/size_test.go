package inproc

import (
	"testing"
	"unsafe"
)

// Every delegation makes a run, and a parked child keeps one: its flags
// share a word, its settled result is made at the settle and its progress
// callback is the session observer's, so that it fits the allocator's
// 192-byte class, not the 320-byte one. A child without an output schema
// has no capture.
func TestRunSize(t *testing.T) {
	if n := unsafe.Sizeof(run{}); n > 192 {
		t.Errorf("a run is %d bytes, want at most 192", n)
	}
	if c := newCapture(nil); c != nil {
		t.Error("a child without an output schema has a capture")
	}
	if v, ok := (*Capture)(nil).Value(); v != nil || ok {
		t.Errorf("a nil capture's value: %v, %v", v, ok)
	}
}
