package session

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/google/go-cmp/cmp"
)

func chunk(turn, step int32, c content.Chunk) AssistantChunk {
	return AssistantChunk{Turn: turn, Step: step, Chunk: c}
}

func text(i int, s string) content.Chunk {
	return content.Chunk{Type: content.ChunkTextDelta, Index: i, Text: s}
}

func reasoning(i int, s string) content.Chunk {
	return content.Chunk{Type: content.ChunkReasoningDelta, Index: i, Text: s}
}

func args(i int, id, name, s string) content.Chunk {
	return content.Chunk{Type: content.ChunkToolCallDelta, Index: i, ID: id, Name: name, ArgumentsDelta: s}
}

// storedChunks returns the chunks of the log's assistant/chunk events.
func storedChunks(events []Event) []content.Chunk {
	var out []content.Chunk
	for _, e := range events {
		if c, ok := e.Data.(AssistantChunk); ok {
			out = append(out, c.Chunk)
		}
	}
	return out
}

// Consecutive deltas of one block become one stored event; a different
// kind, block, step or any non-delta chunk starts a new one, and every
// non-delta chunk is kept as it came. Observers and Append's caller see
// every raw delta, under the seq of the event that stores it.
func TestDeltasCoalesce(t *testing.T) {
	s := newSession(Header{ID: "s"}, nil)
	var seen []Event
	s.Observe(func(e Event) { seen = append(seen, e) })
	usage := content.Chunk{Type: content.ChunkUsage, Usage: &content.Usage{Input: 1}}
	start := content.Chunk{Type: content.ChunkBlockStart, Index: 2, BlockType: content.TypeText}
	in := []AssistantChunk{
		chunk(1, 1, reasoning(0, "th")), chunk(1, 1, reasoning(0, "ink")),
		chunk(1, 1, text(1, "Hel")), chunk(1, 1, text(1, "lo")), chunk(1, 1, text(1, ", world")),
		chunk(1, 1, usage),
		chunk(1, 1, text(1, "!")),
		chunk(1, 1, start), chunk(1, 1, text(2, "a")), chunk(1, 1, text(2, "b")),
		chunk(1, 1, args(3, "c1", "ls", `{"pa`)), chunk(1, 1, args(3, "", "", `th":1}`)),
		chunk(1, 1, args(3, "c2", "", `{}`)), // a new id is a new event
		chunk(1, 2, text(2, "c")),            // another step
	}
	var seqs []int64
	for _, c := range in {
		seqs = append(seqs, mustAppend(t, s, TypeAssistantChunk, c).Seq)
	}
	if want := []int64{0, 0, 1, 1, 1, 2, 3, 4, 5, 5, 6, 6, 7, 8}; !cmp.Equal(seqs, want) {
		t.Errorf("Append seqs %v, want %v", seqs, want)
	}
	if len(seen) != len(in) {
		t.Fatalf("observers saw %d events, want every one of the %d deltas", len(seen), len(in))
	}
	for i, e := range seen {
		if e.Seq != seqs[i] || !cmp.Equal(e.Data, in[i]) {
			t.Errorf("observed %d: seq %d %+v, want seq %d %+v", i, e.Seq, e.Data, seqs[i], in[i])
		}
	}
	if s.Len() != 9 {
		t.Errorf("Len = %d before the last event is complete, want 9", s.Len())
	}
	want := []content.Chunk{
		reasoning(0, "think"), text(1, "Hello, world"), usage, text(1, "!"),
		start, text(2, "ab"), args(3, "c1", "ls", `{"path":1}`), args(3, "c2", "", `{}`), text(2, "c"),
	}
	events := s.Events()
	if diff := cmp.Diff(want, storedChunks(events)); diff != "" {
		t.Errorf("stored chunks (-want +got):\n%s", diff)
	}
	for i, e := range events {
		if e.Seq != int64(i) {
			t.Errorf("event %d has seq %d", i, e.Seq)
		}
	}
	// Replay sees what the live stream built.
	var live, replay content.Assembler
	for _, c := range in[:13] {
		live.Add(c.Chunk)
	}
	for _, c := range storedChunks(events)[:8] {
		replay.Add(c)
	}
	if diff := cmp.Diff(live.Blocks(), replay.Blocks()); diff != "" {
		t.Errorf("assembled from stored chunks (-live +replay):\n%s", diff)
	}
}

// A stored delta holds at most MaxCoalesced bytes; one larger delta is
// stored whole. Reading the log completes the growing event: later deltas
// start another, and a snapshot taken earlier never changes.
func TestCoalescedEventsAreBounded(t *testing.T) {
	s := newSession(Header{ID: "s"}, nil)
	for range 3 * MaxCoalesced {
		mustAppend(t, s, TypeAssistantChunk, chunk(1, 1, text(0, "x")))
	}
	snap := s.Events()
	if len(snap) != 3 {
		t.Fatalf("%d events for %d one-byte deltas, want 3", len(snap), 3*MaxCoalesced)
	}
	big := strings.Repeat("y", 3*MaxCoalesced)
	mustAppend(t, s, TypeAssistantChunk, chunk(1, 1, text(0, "z")))
	mustAppend(t, s, TypeAssistantChunk, chunk(1, 1, text(0, big)))
	mustAppend(t, s, TypeAssistantChunk, chunk(1, 1, text(0, "z")))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, TypeAssistantChunk, chunk(1, 1, text(0, "w")))
	var sizes []int
	var all strings.Builder
	for _, c := range storedChunks(s.Events()) {
		sizes = append(sizes, len(c.Text))
		all.WriteString(c.Text)
	}
	if want := []int{MaxCoalesced, MaxCoalesced, MaxCoalesced, 1, len(big), 1, 1}; !cmp.Equal(sizes, want) {
		t.Errorf("stored sizes %v, want %v", sizes, want)
	}
	if want := strings.Repeat("x", 3*MaxCoalesced) + "z" + big + "z" + "w"; all.String() != want {
		t.Error("stored deltas do not concatenate to the stream")
	}
	if got := storedChunks(snap); len(got[2].Text) != MaxCoalesced || len(snap) != 3 {
		t.Error("an earlier snapshot changed")
	}
}

// A delta chunk is persisted once complete: a flush completes it.
func TestFlushCompletesGrowingDelta(t *testing.T) {
	backend := NewMemoryBackend()
	s, detach, err := NewStore(backend, nil).Create(CreateOptions{ID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	mustAppend(t, s, TypeAssistantChunk, chunk(1, 1, text(0, "a")))
	mustAppend(t, s, TypeAssistantChunk, chunk(1, 1, text(0, "b")))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	_, stored, live, err := backend.Read("s")
	if err != nil || !live {
		t.Fatalf("Read: live %v, %v", live, err)
	}
	if got := storedChunks(stored); len(got) != 1 || got[0].Text != "ab" {
		t.Errorf("stored %+v, want one chunk \"ab\"", got)
	}
}
