package session

import (
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
	stored := cap(backend.sessions["s"].events)
	backend.mu.Unlock()
	if n := s.Len(); stored > n+1 { // a copy rounded up to its size class at most
		t.Fatalf("the memory store made room for %d events to hold %d", stored, n)
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
