package subagent

import (
	"context"
	"sync"
)

// SettleNotifier is a run that calls back with its result once it has
// settled, so that a consumer can follow it without a goroutine of its own
// or a Wait. Settlement implements it, and so does every run the Service
// returns (after its end is announced).
type SettleNotifier interface {
	AfterSettle(fn func(Result))
}

// Settlement is the settle-once outcome of a run. Providers embed it to
// implement Run.Done and Run.Wait; the zero value is ready to use.
type Settlement struct {
	init    sync.Once
	settled sync.Once
	done    chan struct{}
	result  Result

	mu    sync.Mutex
	after []func(Result)
	fired bool
}

func (s *Settlement) ch() chan struct{} {
	s.init.Do(func() { s.done = make(chan struct{}) })
	return s.done
}

// Settle records r as the run's result; only the first call counts. It
// reports whether this call settled the run.
func (s *Settlement) Settle(r Result) (first bool) {
	var after []func(Result)
	s.settled.Do(func() {
		s.result = r
		close(s.ch())
		first = true
		s.mu.Lock()
		after = s.after
		s.after, s.fired = nil, true
		s.mu.Unlock()
	})
	for _, fn := range after {
		fn(r)
	}
	return first
}

// AfterSettle calls fn with the result once the run has settled: on the
// settling goroutine, or at once when it already has. It lets the service
// follow a run without a goroutine of its own.
func (s *Settlement) AfterSettle(fn func(Result)) {
	s.mu.Lock()
	if !s.fired {
		s.after = append(s.after, fn)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	fn(s.result)
}

// Done is closed once the run has settled.
func (s *Settlement) Done() <-chan struct{} { return s.ch() }

// Wait returns the result once the run has settled, or ctx's cause if ctx
// ends first.
func (s *Settlement) Wait(ctx context.Context) (Result, error) {
	select { // a settled run's result, even for a ctx that has ended
	case <-s.ch():
		return s.result, nil
	default:
	}
	select {
	case <-s.ch():
		return s.result, nil
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}
