package subagent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// disposeOnly is a Run whose Dispose does nothing (the rest is not called).
type disposeOnly struct{ Run }

func (disposeOnly) Dispose(context.Context) error { return nil }

// A run whose end was announced before its Dispose makes no channel to
// wait on (one per delegation was made only to be closed); a Dispose that
// came first waits for the end, or for its ctx.
func TestTrackedDisposeWaitsWithoutAChannelOnceEnded(t *testing.T) {
	ended := &tracker{}
	ended.abandon()
	if err := (&tracked{Run: disposeOnly{}, t: ended}).Dispose(t.Context()); err != nil || ended.ended != nil {
		t.Fatalf("Dispose after the end = %v, made a channel: %v", err, ended.ended != nil)
	}
	var seen int
	(&tracked{Run: disposeOnly{}, t: ended}).AfterSettle(func(Result) { seen++ })
	if seen != 1 {
		t.Fatal("AfterSettle of an ended run did not call back at once")
	}

	early := &tracker{}
	errc := make(chan error, 1)
	go func() { errc <- (&tracked{Run: disposeOnly{}, t: early}).Dispose(t.Context()) }()
	for {
		early.mu.Lock()
		waiting := early.ended != nil
		early.mu.Unlock()
		if waiting {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-errc:
		t.Fatalf("Dispose returned %v before the end", err)
	case <-time.After(10 * time.Millisecond):
	}
	early.abandon()
	if err := <-errc; err != nil {
		t.Fatalf("Dispose woken by the end = %v", err)
	}

	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("gone")
	cancel(cause)
	if err := (&tracked{Run: disposeOnly{}, t: &tracker{}}).Dispose(ctx); !errors.Is(err, cause) {
		t.Fatalf("Dispose on an ended ctx = %v, want its cause", err)
	}
}
