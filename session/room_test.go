package session

import (
	"encoding/json"
	"testing"

	"github.com/dsh-go/dsh/content"
)

// A child's new log and the memory store's copy of it make little room
// before events come: a parked child holds a handful of events, and the
// room made for 16 of each was most of its session's memory. A log that
// outgrows its first room jumps to 16 events, so a short turn grows it
// once; a root session starts there.
func TestNewLogMakesLittleRoom(t *testing.T) {
	backend := NewMemoryBackend()
	st := NewStore(backend, nil)
	root, detachRoot, err := st.Create(CreateOptions{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detachRoot()
	if c := cap(root.events); c != minEvents {
		t.Fatalf("a new root log has room for %d events, want %d", c, minEvents)
	}
	s, detach, err := st.Create(CreateOptions{ID: "s", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if c := cap(s.events); c > initialEvents {
		t.Fatalf("a new log has room for %d events, want at most %d", c, initialEvents)
	}
	for i := range 6 { // what a child holds while parked in its first model call
		mustAppend(t, s, TypeUserMessage, content.UserText("m"))
		if i == 0 {
			mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	backend.mu.Lock()
	stored := backend.sessions["s"].events
	backend.mu.Unlock()
	if &stored[0] != &s.events[0] { // no copy, no room of its own
		t.Fatalf("the memory store copied the log's %d events", len(stored))
	}
	for s.Len() <= initialEvents {
		mustAppend(t, s, TypeUserMessage, content.UserText("m"))
	}
	if c, want := cap(s.events), max(initialEvents+initialEvents/2, minEvents); c != want {
		t.Fatalf("a log that outgrew its first room has room for %d events, want %d", c, want)
	}
	_, events, _, err := backend.Read("s")
	if err != nil || len(events) != 7 {
		t.Fatalf("stored %d events (%v), want the 7 flushed", len(events), err)
	}
}

// A long log, and the memory store's copy of it, grow by half when full:
// a parent's log gains an event per child it delegates to, flushed at the
// next child's start, and append's quarter steps for long slices copied
// each event some five times over such a run. The room made over the
// whole run stays within three times the final room, for both copies (the
// store copies when a persister wraps its own, as secret redaction does).
func TestLongLogGrowsByHalf(t *testing.T) {
	backend := NewMemoryBackend()
	st := NewStore(wrappedBackend{backend}, nil)
	s, detach, err := st.Create(CreateOptions{ID: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	stored := func() int {
		backend.mu.Lock()
		defer backend.mu.Unlock()
		if m, ok := backend.sessions["parent"]; ok {
			return cap(m.events)
		}
		return 0
	}
	const n = 20000
	var made, madeStored, last, lastStored int
	for range n {
		mustAppend(t, s, "subagent/usage", json.RawMessage(`{}`))
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		c := cap(s.events)
		s.mu.Unlock()
		if c != last {
			made, last = made+c, c
		}
		if c := stored(); c != lastStored {
			madeStored, lastStored = madeStored+c, c
		}
	}
	if made > 3*last+minEvents {
		t.Errorf("the log made room for %d events in all to end with room for %d (%.1f×), want at most 3×", made, last, float64(made)/float64(last))
	}
	if madeStored > 3*lastStored+minEvents {
		t.Errorf("the memory store made room for %d events in all to end with room for %d (%.1f×), want at most 3×", madeStored, lastStored, float64(madeStored)/float64(lastStored))
	}
	if last > n+n/2+1 || lastStored > n+n/2+1 {
		t.Errorf("room for %d and %d events to hold %d, want at most half again", last, lastStored, n)
	}
}

// wrappedBackend's persisters hide the memory store's own: the store is
// handed batches to copy, not the session's log.
type wrappedBackend struct{ *MemoryBackend }

func (b wrappedBackend) Create(h Header) (Persister, error) {
	p, err := b.MemoryBackend.Create(h)
	return struct{ Persister }{p}, err
}
