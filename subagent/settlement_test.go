package subagent

import (
	"context"
	"testing"
	"time"
)

// A run that settles before anyone waits on it makes no done channel (two
// per delegation were made only to be closed); Wait still returns its
// result, even for an ended ctx, and Done is closed at once. A Wait that
// blocked before the settle is woken by it.
func TestSettlementMakesNoChannelUntilWaited(t *testing.T) {
	var s Settlement
	var got []StopReason
	s.AfterSettle(func(r Result) { got = append(got, r.StopReason) })
	if !s.Settle(Result{StopReason: Completed}) || s.Settle(Result{StopReason: Failed}) {
		t.Fatal("only the first Settle settles")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r, err := s.Wait(ctx); err != nil || r.StopReason != Completed {
		t.Fatalf("Wait = %v, %v; want the settled result", r.StopReason, err)
	}
	s.AfterSettle(func(r Result) { got = append(got, r.StopReason) })
	if len(got) != 2 || got[0] != Completed || got[1] != Completed {
		t.Fatalf("AfterSettle saw %v", got)
	}
	s.mu.Lock()
	made := s.done != nil
	s.mu.Unlock()
	if made {
		t.Fatal("a run settled before anyone waited made a done channel")
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done of a settled run is not closed")
	}

	var w Settlement
	waited := make(chan Result, 1)
	go func() {
		r, _ := w.Wait(t.Context())
		waited <- r
	}()
	for {
		w.mu.Lock()
		blocked := w.done != nil
		w.mu.Unlock()
		if blocked {
			break
		}
		time.Sleep(time.Millisecond)
	}
	done := w.Done()
	w.Settle(Result{StopReason: Completed})
	if r := <-waited; r.StopReason != Completed {
		t.Fatalf("a blocked Wait got %v", r.StopReason)
	}
	<-done
}
