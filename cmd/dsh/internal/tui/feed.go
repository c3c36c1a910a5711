package tui

import "sync"

// feed is the asynchronous adapter between the runtime and the screen. The
// runtime delivers events synchronously (the event bus, a session's
// observers run on the emitting goroutine: a child's, the agent's), so a
// slow screen must never be waited for: emitters append to the feed's
// queue and return at once, and the UI takes the queue in batches.
//
// The queue is bounded for what floods: once it holds max items, a lossy
// item (a streamed delta, a child's text) is dropped and counted, and the
// UI heals from the next whole message. Every other item (turn and child
// lifecycle, tool calls, permission asks) is kept, since the screen needs
// each one to stay true; those come a few per tool call, not per token.
// After close, pushes are discarded.
type feed struct {
	max   int
	ready chan struct{} // holds a token while the queue has items not yet announced

	mu      sync.Mutex
	q       []any
	dropped int64
	closed  bool
}

func newFeed(max int) *feed { return &feed{max: max, ready: make(chan struct{}, 1)} }

// push queues item and reports whether it was queued.
func (f *feed) push(item any, lossy bool) bool {
	f.mu.Lock()
	switch {
	case f.closed:
		f.mu.Unlock()
		return false
	case lossy && len(f.q) >= f.max:
		f.dropped++
		f.mu.Unlock()
		return false
	}
	f.q = append(f.q, item)
	f.mu.Unlock()
	select {
	case f.ready <- struct{}{}:
	default:
	}
	return true
}

// take empties the queue and returns its items, oldest first, and how many
// lossy items were dropped so far.
func (f *feed) take() ([]any, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.q
	f.q = nil
	return q, f.dropped
}

// close discards the queue and every later push.
func (f *feed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed, f.q = true, nil
}
