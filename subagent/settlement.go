package subagent

import (
	"context"
	"sync"
)

// Settlement is the settle-once outcome of a run. Providers embed it to
// implement Run.Done and Run.Wait; the zero value is ready to use.
type Settlement struct {
	init    sync.Once
	settled sync.Once
	done    chan struct{}
	result  Result
}

func (s *Settlement) ch() chan struct{} {
	s.init.Do(func() { s.done = make(chan struct{}) })
	return s.done
}

// Settle records r as the run's result; only the first call counts. It
// reports whether this call settled the run.
func (s *Settlement) Settle(r Result) (first bool) {
	s.settled.Do(func() {
		s.result = r
		close(s.ch())
		first = true
	})
	return first
}

// Done is closed once the run has settled.
func (s *Settlement) Done() <-chan struct{} { return s.ch() }

// Wait returns the result once the run has settled, or ctx's cause if ctx
// ends first.
func (s *Settlement) Wait(ctx context.Context) (Result, error) {
	select {
	case <-s.ch():
		return s.result, nil
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}
