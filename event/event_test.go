package event_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/event"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type startEvent struct{ ID string }

func (startEvent) EventType() string { return "subagent/start" }

type endEvent struct{ ID string }

func (*endEvent) EventType() string { return "subagent/end" }

func TestListenersRunInSubscriptionOrder(t *testing.T) {
	b := event.New(nil)
	var got []string
	for _, name := range []string{"a", "b", "c", "d"} {
		b.Subscribe(func(e event.Event) { got = append(got, name+":"+e.EventType()) })
	}
	b.Emit(startEvent{})
	b.Emit(&endEvent{})
	want := []string{
		"a:subagent/start", "b:subagent/start", "c:subagent/start", "d:subagent/start",
		"a:subagent/end", "b:subagent/end", "c:subagent/end", "d:subagent/end",
	}
	if !slices.Equal(got, want) {
		t.Errorf("delivery order = %v, want %v", got, want)
	}
}

func TestDisposeRemovesListener(t *testing.T) {
	b := event.New(nil)
	var got []string
	b.Subscribe(func(event.Event) { got = append(got, "a") })
	disposeB := b.Subscribe(func(event.Event) { got = append(got, "b") })
	b.Subscribe(func(event.Event) { got = append(got, "c") })

	disposeB()
	b.Emit(startEvent{})
	if want := []string{"a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("after dispose got %v, want %v", got, want)
	}

	// Idempotent: disposing again removes nobody else.
	got = nil
	disposeB()
	disposeB()
	b.Emit(startEvent{})
	if want := []string{"a", "c"}; !slices.Equal(got, want) {
		t.Errorf("after repeated dispose got %v, want %v", got, want)
	}
}

func TestDisposeOfSameFunctionSubscribedTwice(t *testing.T) {
	b := event.New(nil)
	n := 0
	fn := func(event.Event) { n++ }
	d1 := b.Subscribe(fn)
	b.Subscribe(fn)
	d1()
	d1()
	b.Emit(startEvent{})
	if n != 1 {
		t.Errorf("listener ran %d times, want 1 (only the first subscription disposed)", n)
	}
}

func TestHasListeners(t *testing.T) {
	b := event.New(nil)
	if b.HasListeners() {
		t.Fatal("new bus: HasListeners = true")
	}
	d1 := b.Subscribe(func(event.Event) {})
	d2 := event.On(b, func(startEvent) {})
	if !b.HasListeners() {
		t.Fatal("after subscribe: HasListeners = false")
	}
	d1()
	if !b.HasListeners() {
		t.Fatal("one listener left: HasListeners = false")
	}
	d2()
	if b.HasListeners() {
		t.Fatal("all disposed: HasListeners = true")
	}
}

func TestOnFiltersByType(t *testing.T) {
	b := event.New(nil)
	var starts []string
	var ends []string
	var all []string
	event.On(b, func(e startEvent) { starts = append(starts, e.ID) })
	dispose := event.On(b, func(e *endEvent) { ends = append(ends, e.ID) })
	b.Subscribe(func(e event.Event) { all = append(all, e.EventType()) })

	b.Emit(startEvent{ID: "s1"})
	b.Emit(&endEvent{ID: "e1"})
	b.Emit(startEvent{ID: "s2"})
	dispose()
	b.Emit(&endEvent{ID: "e2"})

	if want := []string{"s1", "s2"}; !slices.Equal(starts, want) {
		t.Errorf("start listener got %v, want %v", starts, want)
	}
	if want := []string{"e1"}; !slices.Equal(ends, want) {
		t.Errorf("end listener got %v, want %v", ends, want)
	}
	if len(all) != 4 {
		t.Errorf("untyped listener got %d events, want 4", len(all))
	}
}

func TestOnInterfaceType(t *testing.T) {
	b := event.New(nil)
	n := 0
	event.On(b, func(event.Event) { n++ })
	b.Emit(startEvent{})
	b.Emit(&endEvent{})
	if n != 2 {
		t.Errorf("On[Event] saw %d events, want 2", n)
	}
}

func TestPanickingListenerIsContained(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	b := event.New(log)

	var got []string
	b.Subscribe(func(event.Event) { got = append(got, "before") })
	b.Subscribe(func(event.Event) { panic("listener exploded") })
	b.Subscribe(func(event.Event) { got = append(got, "after") })

	b.Emit(startEvent{}) // must not panic
	b.Emit(startEvent{})

	if want := []string{"before", "after", "before", "after"}; !slices.Equal(got, want) {
		t.Errorf("listeners ran %v, want %v", got, want)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if !strings.Contains(out, "subagent/start") {
		t.Errorf("log does not name the event type:\n%s", out)
	}
	if !strings.Contains(out, "listener exploded") {
		t.Errorf("log does not carry the panic value:\n%s", out)
	}
	if !strings.Contains(out, "level=ERROR") {
		t.Errorf("panic not logged at error level:\n%s", out)
	}
}

func TestPanicWithErrorValue(t *testing.T) {
	var buf bytes.Buffer
	b := event.New(slog.New(slog.NewJSONHandler(&buf, nil)))
	reached := false
	b.Subscribe(func(event.Event) {
		var m map[string]int
		//lint:ignore SA5000 the listener must panic with a runtime error
		m["x"] = 1
	})
	b.Subscribe(func(event.Event) { reached = true })
	b.Emit(&endEvent{})
	if !reached {
		t.Error("listener after a runtime panic did not run")
	}
	if !strings.Contains(buf.String(), "subagent/end") {
		t.Errorf("log does not name the event type: %s", buf.String())
	}
}

func TestNilLoggerUsesDefault(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	b := event.New(nil)
	b.Subscribe(func(event.Event) { panic("boom") })
	b.Emit(startEvent{})
	if !strings.Contains(buf.String(), "subagent/start") {
		t.Errorf("default logger did not receive the panic report: %q", buf.String())
	}
}

func TestEmitSnapshotsListeners(t *testing.T) {
	b := event.New(nil)
	var got []string
	var disposeC func()
	b.Subscribe(func(event.Event) {
		got = append(got, "a")
		// Subscribing during Emit does not reach the current event.
		b.Subscribe(func(event.Event) { got = append(got, "late") })
		// Disposing a later listener during Emit does not skip it for this event.
		disposeC()
	})
	disposeC = b.Subscribe(func(event.Event) { got = append(got, "c") })
	b.Emit(startEvent{})
	if want := []string{"a", "c"}; !slices.Equal(got, want) {
		t.Errorf("first emit ran %v, want %v", got, want)
	}
}

func TestConcurrentSubscribeDisposeEmit(t *testing.T) {
	b := event.New(slog.New(slog.NewTextHandler(discard{}, nil)))
	var delivered atomic.Int64
	// A permanent listener that must see every event.
	var permanent atomic.Int64
	b.Subscribe(func(event.Event) { permanent.Add(1) })

	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				d := b.Subscribe(func(event.Event) { delivered.Add(1) })
				d2 := event.On(b, func(startEvent) { delivered.Add(1) })
				_ = b.HasListeners()
				d()
				d2()
				d()
			}
		})
		wg.Go(func() {
			for range rounds {
				b.Emit(startEvent{})
			}
		})
	}
	wg.Wait()
	if got := permanent.Load(); got != workers*rounds {
		t.Errorf("permanent listener saw %d events, want %d", got, workers*rounds)
	}
	// Only the permanent listener remains.
	var got []string
	b.Subscribe(func(e event.Event) { got = append(got, e.EventType()) })
	before := permanent.Load()
	b.Emit(&endEvent{})
	if permanent.Load() != before+1 || len(got) != 1 {
		t.Errorf("after concurrent churn: permanent %d→%d, new listener %v", before, permanent.Load(), got)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// named is an event interface: On over it takes every event that has Name.
type named interface {
	event.Event
	Name() string
}

func (startEvent) Name() string { return "start" }

func TestWantsFollowsTypedListeners(t *testing.T) {
	b := event.New(nil)
	if b.Wants("subagent/start") {
		t.Fatal("empty bus wants an event")
	}
	d1 := event.On(b, func(startEvent) {})
	if !b.Wants("subagent/start") || b.Wants("subagent/end") {
		t.Fatal("a typed listener must want only its own type")
	}
	d2 := event.On(b, func(*endEvent) {}) // pointer receiver: typed by its method
	if !b.Wants("subagent/end") {
		t.Fatal("a listener of a pointer event type is not counted")
	}
	d3 := event.On(b, func(named) {}) // an interface: may take any type
	if !b.Wants("agent/anything") {
		t.Fatal("a listener of an interface type must want every event")
	}
	d1()
	d2()
	d3()
	d4 := b.Subscribe(func(event.Event) {})
	if !b.Wants("agent/anything") {
		t.Fatal("an untyped listener must want every event")
	}
	d4()
	if b.Wants("subagent/start") {
		t.Fatal("all disposed: still wants")
	}
}

func TestOnOverAnInterfaceGetsMatchingEvents(t *testing.T) {
	b := event.New(nil)
	var got []string
	event.On(b, func(n named) { got = append(got, n.Name()) })
	b.Emit(startEvent{})
	b.Emit(&endEvent{})
	if !slices.Equal(got, []string{"start"}) {
		t.Fatalf("got %v", got)
	}
}
