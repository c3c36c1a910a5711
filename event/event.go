// Package event is dsh's typed, observe-only event bus. Listeners run
// synchronously in subscription order; a listener that panics is recovered
// and logged and never affects the emitter or the other listeners.
package event

import (
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Event is anything published on a Bus. Type names the event, e.g.
// "subagent/start".
type Event interface {
	EventType() string
}

// Bus fans events out to listeners. The zero value is not usable; call New.
type Bus struct {
	log       *slog.Logger
	mu        sync.Mutex // serializes subscription changes
	listeners atomic.Pointer[[]*listener]
}

type listener struct {
	typ string // the one event type it takes; "" for every event
	fn  func(Event)
}

// New returns an empty bus that logs contained listener panics to log
// (slog.Default when nil).
func New(log *slog.Logger) *Bus {
	if log == nil {
		log = slog.Default()
	}
	b := &Bus{log: log}
	b.listeners.Store(&[]*listener{})
	return b
}

// Subscribe adds fn as a listener of every event and returns its disposer.
// The disposer is idempotent.
func (b *Bus) Subscribe(fn func(Event)) (dispose func()) { return b.subscribe("", fn) }

func (b *Bus) subscribe(typ string, fn func(Event)) (dispose func()) {
	l := &listener{typ: typ, fn: fn}
	b.mu.Lock()
	old := *b.listeners.Load()
	next := make([]*listener, len(old), len(old)+1)
	copy(next, old)
	next = append(next, l)
	b.listeners.Store(&next)
	b.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { b.remove(l) }) }
}

func (b *Bus) remove(l *listener) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := *b.listeners.Load()
	next := make([]*listener, 0, len(old))
	for _, x := range old {
		if x != l {
			next = append(next, x)
		}
	}
	b.listeners.Store(&next)
}

// On subscribes fn to the events of type T only.
func On[T Event](b *Bus, fn func(T)) (dispose func()) {
	return b.subscribe(typeOf[T](), func(e Event) {
		if t, ok := e.(T); ok {
			fn(t)
		}
	})
}

// typeOf returns the event type name of T's values, or "" when T's zero
// value cannot say (an interface, or a method that needs a receiver).
func typeOf[T Event]() (typ string) {
	var zero T
	if any(zero) == nil {
		return ""
	}
	defer func() {
		if recover() != nil {
			typ = ""
		}
	}()
	return zero.EventType()
}

// HasListeners reports whether anyone listens; emitters may skip building
// costly events when nobody does.
func (b *Bus) HasListeners() bool { return len(*b.listeners.Load()) > 0 }

// Wants reports whether a listener would receive an event of type typ, so
// that a frequent emitter can skip building events nobody takes.
func (b *Bus) Wants(typ string) bool {
	for _, l := range *b.listeners.Load() {
		if l.typ == "" || l.typ == typ {
			return true
		}
	}
	return false
}

// Emit delivers e to every listener subscribed before the call that takes
// its type.
func (b *Bus) Emit(e Event) {
	ls := *b.listeners.Load()
	if len(ls) == 0 {
		return
	}
	typ := e.EventType()
	for _, l := range ls {
		if l.typ == "" || l.typ == typ {
			b.deliver(l, e)
		}
	}
}

func (b *Bus) deliver(l *listener, e Event) {
	defer func() {
		if r := recover(); r != nil {
			b.log.Error("event listener panicked", "event", e.EventType(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	l.fn(e)
}
