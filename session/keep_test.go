package session

import (
	"testing"

	"github.com/dsh-go/dsh/content"
)

// The memory store keeps a session's own log, not a copy: what a child
// writes costs the store nothing. That holds only because a committed
// event is never changed: each flushed prefix, encoded when it was
// flushed, is encoded the same at the end, delta chunks completed by a
// flush included, and the store reads back what the session holds.
func TestMemoryStoreKeepsTheLog(t *testing.T) {
	backend := NewMemoryBackend()
	st := NewStore(backend, nil)
	s, detach, err := st.Create(CreateOptions{ID: "s", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	var flushed [][]byte // each flushed event's encoding, as it was flushed
	flush := func() {
		t.Helper()
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, e := range s.Events()[len(flushed):] {
			b, err := e.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			flushed = append(flushed, b)
		}
	}
	mustAppend(t, s, TypeUserMessage, content.UserText("hi"))
	mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
	for step := 1; step <= 3; step++ {
		mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: step})
		for _, d := range []string{"a", "b", "c"} {
			mustAppend(t, s, TypeAssistantChunk, chunk(1, int32(step), text(0, d)))
		}
		flush()                                // the pending delta chunk is completed here
		for _, d := range []string{"d", "e"} { // the same block goes on in a new event
			mustAppend(t, s, TypeAssistantChunk, chunk(1, int32(step), text(0, d)))
		}
		mustAppend(t, s, TypeStepEnd, Step{Turn: 1, Step: step}) // flushes
		flush()
	}
	for range 2 * initialEvents { // outgrow the first room: the store follows the new log
		mustAppend(t, s, TypeUserMessage, content.UserText("more"))
		flush()
	}
	backend.mu.Lock()
	stored := backend.sessions["s"].events
	backend.mu.Unlock()
	if len(stored) != len(flushed) || &stored[0] != &s.Events()[0] {
		t.Fatalf("the memory store holds %d events of its own, want the session's %d", len(stored), len(flushed))
	}
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	_, events, _, err := backend.Read("s")
	if err != nil || len(events) != len(flushed) {
		t.Fatalf("read %d events (%v), want %d", len(events), err, len(flushed))
	}
	for i, e := range events {
		b, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(flushed[i]) {
			t.Fatalf("event %d changed after it was flushed:\n was %s\n now %s", i, flushed[i], b)
		}
	}
	// A continued session keeps the loaded log's copy, then its own log.
	s2, detach2, err := st.Load(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	defer detach2()
	mustAppend(t, s2, TypeUserMessage, content.UserText("again"))
	if err := s2.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, events, _, err = backend.Read("s"); err != nil || len(events) != s2.Len() {
		t.Fatalf("read %d events (%v) of a continued log of %d", len(events), err, s2.Len())
	}
}
