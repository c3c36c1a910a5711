package subagent

import (
	"slices"
	"testing"
	"unsafe"
)

// Every delegation makes a tracker, and a parked child keeps one: its
// result and early progress are apart, its flags share a word and its
// callbacks are one function, so that it fits the allocator's 176-byte
// class, not the 320-byte one.
func TestTrackerSize(t *testing.T) {
	if n := unsafe.Sizeof(tracker{}); n > 176 {
		t.Errorf("a tracker is %d bytes, want at most 176", n)
	}
}

// A parked child's run and delegation embed a Settlement each: its result
// is made at the settle and its callbacks are one function, so that a
// Delegation fits the allocator's 112-byte class, not the 224-byte one.
func TestSettlementSize(t *testing.T) {
	if n := unsafe.Sizeof(Settlement{}); n > 48 {
		t.Errorf("a Settlement is %d bytes, want at most 48", n)
	}
	if n := unsafe.Sizeof(Delegation{}); n > 112 {
		t.Errorf("a Delegation is %d bytes, want at most 112", n)
	}
}

// A Settlement's callbacks, held as one function, run once each, in the
// order they were added, also when added after the settle.
func TestAfterSettleRunsEachCallbackInOrder(t *testing.T) {
	var s Settlement
	var got []string
	for _, name := range []string{"a", "b", "c"} {
		s.AfterSettle(func(r Result) { got = append(got, name+string(r.StopReason)) })
	}
	s.Settle(Result{StopReason: Completed})
	s.Settle(Result{StopReason: Failed})
	s.AfterSettle(func(r Result) { got = append(got, "d"+string(r.StopReason)) })
	want := []string{"a" + string(Completed), "b" + string(Completed), "c" + string(Completed), "d" + string(Completed)}
	if !slices.Equal(got, want) {
		t.Fatalf("callbacks ran %v, want %v", got, want)
	}
}
