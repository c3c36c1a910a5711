package inproc

import (
	"context"
	"testing"
	"unsafe"
)

// Every delegation makes a run, and a parked child keeps one: its flags
// share a word, its settled result is made at the settle and its progress
// callback is the session observer's, and its settlement's callbacks are
// one function, so that it fits the allocator's 176-byte class, not the
// 320-byte one. A child without an output schema has no capture.
func TestRunSize(t *testing.T) {
	if n := unsafe.Sizeof(run{}); n > 176 {
		t.Errorf("a run is %d bytes, want at most 176", n)
	}
	if c := newCapture(nil); c != nil {
		t.Error("a child without an output schema has a capture")
	}
	if v, ok := (*Capture)(nil).Value(); v != nil || ok {
		t.Errorf("a nil capture's value: %v, %v", v, ok)
	}
}

// A run started under a ctx that cannot end registers nothing on it (an
// AfterFunc there would cost 128 bytes per parked child for a relay that
// never fires); under one that can, it relays the cancellation.
func TestRunRelaysOnlyACtxThatCanEnd(t *testing.T) {
	r := &run{}
	if stop := r.relay(context.Background()); stop != nil {
		t.Fatal("a run relays the cancellation of a ctx that cannot end")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := r.relay(ctx)
	if stop == nil || !stop() {
		t.Fatal("a run does not relay the cancellation of a ctx that can end")
	}
}
