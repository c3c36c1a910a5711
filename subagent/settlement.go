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
//
// A parked child's run and delegation embed one each: the result is made
// at the settle, and the callbacks are one function (see chain), so that
// an unsettled Settlement is 48 bytes, not 168.
type Settlement struct {
	settled sync.Once
	fired   bool    // guarded by mu (in the Once's padding)
	result  *Result // set once, before fired

	mu    sync.Mutex
	done  chan struct{} // made by the first Done, or Wait that must block; nil until then
	after func(Result)  // the AfterSettle callbacks, chained
}

// chain adds fn to the callbacks *after calls, after those it holds. A
// first callback (most runs have one) is held as it is: no slice.
func chain(after *func(Result), fn func(Result)) {
	prev := *after
	if prev == nil {
		*after = fn
		return
	}
	*after = func(r Result) { prev(r); fn(r) }
}

// ch returns the done channel, made on first use (closed at once when the
// run has settled): a run that settles before anyone waits on it never
// makes one.
func (s *Settlement) ch() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.fired {
			close(s.done)
		}
	}
	return s.done
}

// Settle records r as the run's result; only the first call counts. It
// reports whether this call settled the run.
func (s *Settlement) Settle(r Result) (first bool) {
	var after func(Result)
	s.settled.Do(func() {
		s.result = &r
		first = true
		s.mu.Lock()
		after = s.after
		s.after, s.fired = nil, true
		if s.done != nil {
			close(s.done)
		}
		s.mu.Unlock()
	})
	if after != nil {
		after(r)
	}
	return first
}

// AfterSettle calls fn with the result once the run has settled: on the
// settling goroutine, or at once when it already has. It lets the service
// follow a run without a goroutine of its own.
func (s *Settlement) AfterSettle(fn func(Result)) {
	s.mu.Lock()
	if !s.fired {
		chain(&s.after, fn)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	fn(*s.result)
}

// Done is closed once the run has settled.
func (s *Settlement) Done() <-chan struct{} { return s.ch() }

// Wait returns the result once the run has settled, or ctx's cause if ctx
// ends first.
func (s *Settlement) Wait(ctx context.Context) (Result, error) {
	s.mu.Lock()
	fired := s.fired
	s.mu.Unlock()
	if fired { // a settled run's result, even for a ctx that has ended
		return *s.result, nil
	}
	select {
	case <-s.ch():
		return *s.result, nil
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}
