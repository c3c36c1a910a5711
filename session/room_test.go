package session

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/dsh-go/dsh/content"
)

// A child's new log and the memory store's copy of it make little room
// before events come: a parked child holds six events, and the room made
// for 14 was most of its session's memory. A log that outgrows its first
// room jumps to 14 events, what a one-shot child's turn writes, so a short
// turn grows it once; a root session starts with more.
func TestNewLogMakesLittleRoom(t *testing.T) {
	backend := NewMemoryBackend()
	st := NewStore(backend, nil)
	root, detachRoot, err := st.Create(CreateOptions{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detachRoot()
	if c := cap(root.events); c != rootEvents {
		t.Fatalf("a new root log has room for %d events, want %d", c, rootEvents)
	}
	s, detach, err := st.Create(CreateOptions{ID: "s", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if c := cap(s.events); c != childEvents {
		t.Fatalf("a new child log has room for %d events, want %d", c, childEvents)
	}
	if b := unsafe.Sizeof(Event{}) * childEvents; b > 480 {
		t.Fatalf("a new child log's room is %d bytes, want at most 480 (a size class)", b)
	}
	room := &s.events[:1][0]
	for i := range childEvents - 1 { // what a child holds while parked in its first model call
		mustAppend(t, s, TypeUserMessage, content.UserText("m"))
		if i == 0 {
			mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
		}
	}
	if &s.events[0] != room {
		t.Fatalf("a parked child's %d events outgrew its log's first room", s.Len())
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
	mustAppend(t, s, TypeUserMessage, content.UserText("m"))
	if c := cap(s.events); c != initialEvents {
		t.Fatalf("a child log that outgrew its first room has room for %d events, want %d", c, initialEvents)
	}
	for s.Len() <= initialEvents {
		mustAppend(t, s, TypeUserMessage, content.UserText("m"))
	}
	if c, want := cap(s.events), max(initialEvents+initialEvents/2, minEvents); c != want {
		t.Fatalf("a log that outgrew its first room has room for %d events, want %d", c, want)
	}
	_, events, _, err := backend.Read("s")
	if err != nil || len(events) != childEvents {
		t.Fatalf("stored %d events (%v), want the %d flushed", len(events), err, childEvents)
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

// A root's first turn that delegates once, as an agent writes it (24
// events: the inbox splice, a request header and five chunks per step, the
// child's usage), grows neither its log nor its derived history: each
// growth was a copy made once per run, and for a parent that delegates
// once, per delegation. A child's history still starts with room for one
// message (a parked child holds its task only).
func TestRootTurnFitsItsRoom(t *testing.T) {
	st := NewStore(NewMemoryBackend(), nil)
	root, detach, err := st.Create(CreateOptions{ID: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	events := &root.events[:1][0]
	var messages *content.Message
	mustAppend(t, root, TypeInboxSpliced, json.RawMessage(`{}`))
	mustAppend(t, root, TypeTurnStart, TurnStart{Turn: 1})
	for step := 1; step <= 2; step++ {
		mustAppend(t, root, TypeStepStart, Step{Turn: 1, Step: step})
		if step == 1 {
			mustAppend(t, root, TypeUserMessage, content.UserText("delegate"))
			messages = &root.messages[0]
			mustAppend(t, root, TypeRequestHeader, json.RawMessage(`{}`)) // the next step's is the same
		}
		for range 5 {
			mustAppend(t, root, TypeAssistantChunk, chunk(1, int32(step), content.Chunk{Type: content.ChunkBlockEnd}))
		}
		blocks := []content.Block{content.Text("done")}
		if step == 1 {
			blocks = []content.Block{content.ToolCall("c", "agent", `{}`)}
		}
		mustAppend(t, root, TypeAssistantMessage, AssistantMessage{Turn: 1, Step: step, Message: content.AssistantMessage("p", "m", blocks)})
		if step == 1 {
			call := mustAppend(t, root, TypeToolCall, ToolCall{Turn: 1, Step: 1, CallID: "c", Name: "agent", Arguments: `{}`})
			mustAppend(t, root, "subagent/usage", json.RawMessage(`{}`))
			mustAppend(t, root, TypeToolResult, ToolResult{Turn: 1, Step: 1,
				Message: content.ToolResultMessage("c", []content.Block{content.Text("answer")}, false)}, call.Seq)
		}
		mustAppend(t, root, TypeStepEnd, Step{Turn: 1, Step: step})
	}
	mustAppend(t, root, TypeTurnEnd, TurnEnd{Turn: 1, Reason: EndReason{Kind: EndCompleted}})
	if root.Len() != 24 || len(root.Messages()) != 4 {
		t.Fatalf("the turn wrote %d events and %d messages, want 24 and 4", root.Len(), len(root.Messages()))
	}
	if &root.events[0] != events {
		t.Errorf("the root's log grew from %d events", rootEvents)
	}
	if &root.messages[0] != messages {
		t.Errorf("the root's history grew from its first room to %d messages", cap(root.messages))
	}
	child, detachChild, err := st.Create(CreateOptions{ID: "child", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detachChild()
	mustAppend(t, child, TypeUserMessage, content.UserText("task"))
	if c := cap(child.messages); c != 1 {
		t.Errorf("a child's history has room for %d messages, want 1", c)
	}
}

// A child's first message, spliced into its inbox and then logged as the
// user's, is held once by the history: the splice's copy. The history
// never writes to that copy (a second message goes to an array of its
// own, a compaction makes a new one), and a message logged as an equal
// copy with other blocks is not mistaken for it.
func TestChildHistorySharesTheSplicedMessage(t *testing.T) {
	st := NewStore(NewMemoryBackend(), nil)
	s, detach, err := st.Create(CreateOptions{ID: "s", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	msg := content.UserText("the task")
	mustAppend(t, s, TypeInboxSpliced, InboxSpliced{Target: "next-turn", Inserted: []content.Message{msg}})
	mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
	mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 1})
	mustAppend(t, s, TypeUserMessage, msg)
	spliced := s.Events()[0].Data.(InboxSpliced).Inserted
	hist := s.Messages()
	if len(hist) != 1 || &hist[0] != &spliced[0] {
		t.Fatalf("the history holds its own copy of the spliced message")
	}
	if got := s.MessageBytes(); got != MessageSize(msg) {
		t.Fatalf("MessageBytes = %d, want %d", got, MessageSize(msg))
	}
	before := slices.Clone(spliced)
	second := content.UserText("more")
	mustAppend(t, s, TypeUserMessage, second)
	mustAppend(t, s, TypeCompaction, Compaction{Trigger: "manual", Summary: content.UserText("summary"), Kept: 1})
	if len(spliced) != 1 || !reflect.DeepEqual(spliced, before) {
		t.Fatalf("the history wrote to the splice's copy: %+v", spliced)
	}
	if hist := s.Messages(); len(hist) != 2 || hist[1].ID != second.ID || &hist[1] == &spliced[0] {
		t.Fatalf("history after a compaction: %+v", hist)
	}

	// An equal message with blocks of its own is a copy: not shared.
	o, detachO, err := st.Create(CreateOptions{ID: "o", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detachO()
	mustAppend(t, o, TypeInboxSpliced, InboxSpliced{Target: "next-turn", Inserted: []content.Message{msg}})
	other := msg
	other.Content = slices.Clone(msg.Content)
	mustAppend(t, o, TypeUserMessage, other)
	if h := o.Messages(); &h[0] == &o.Events()[0].Data.(InboxSpliced).Inserted[0] || &h[0].Content[0] != &other.Content[0] {
		t.Fatal("the history shared a splice's message that was not the one logged")
	}
}

// The memory store's persister of a session refers to the session it
// stores, which holds the header and counts its open writers: a parked
// child's persister is 24 B, not a second copy of the header and an entry
// of a writers map. Read still reports a session live while a persister
// of it is open, one made by Load included.
func TestMemoryPersisterHoldsNoHeader(t *testing.T) {
	if n := unsafe.Sizeof(memPersister{}); n > 24 {
		t.Fatalf("a memory persister is %d bytes, want at most 24", n)
	}
	b := NewMemoryBackend()
	p, err := b.Create(Header{ID: "s", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := b.Read("s"); err == nil {
		t.Fatal("a session without events is stored")
	}
	if err := p.Append([]Event{{Seq: 0, Type: TypeTurnStart, Data: TurnStart{Turn: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(Header{ID: "s"}); err == nil {
		t.Fatal("a second Create of a stored session succeeded")
	}
	h, events, live, err := b.Read("s")
	if err != nil || h.Cwd != "/w" || len(events) != 1 || !live {
		t.Fatalf("Read = %+v, %d events, live %v, %v", h, len(events), live, err)
	}
	_, _, q, err := b.Load("s")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, live, _ := b.Read("s"); !live {
		t.Fatal("a session with a loaded persister open reads as not live")
	}
	if err := q.Append([]Event{{Seq: 1, Type: TypeTurnStart, Data: TurnStart{Turn: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, events, live, _ := b.Read("s"); live || len(events) != 2 {
		t.Fatalf("after both closed: live %v, %d events", live, len(events))
	}
}

// An observed session whose appends do not contend delivers each event as
// it is appended, with no queue: a parked child, observed for its
// progress, holds no outbox. An observer that appends re-entrantly still
// sees every event once, in seq order.
func TestUncontendedObserversNeedNoQueue(t *testing.T) {
	st := NewStore(NewMemoryBackend(), nil)
	s, detach, err := st.Create(CreateOptions{ID: "s", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	var seen []int64
	s.Observe(func(e Event) {
		seen = append(seen, e.Seq)
		if e.Type == TypeTurnStart { // re-entrant: queued, delivered after this one
			s.Append(TypeStepStart, Step{Turn: 1, Step: 1})
		}
	})
	mustAppend(t, s, TypeUserMessage, content.UserText("m"))
	s.mu.Lock()
	queued := cap(s.outbox)
	s.mu.Unlock()
	if queued != 0 {
		t.Fatalf("an uncontended append queued its event (outbox room %d)", queued)
	}
	mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
	mustAppend(t, s, TypeUserMessage, content.UserText("n"))
	if want := []int64{0, 1, 2, 3}; !slices.Equal(seen, want) {
		t.Fatalf("the observer saw %v, want %v", seen, want)
	}
}

// An observer's disposer, which a parked child holds (its progress
// observer's), is the observer's method: removing it twice removes it
// once, and the other observers keep hearing.
func TestObserverDisposerRemovesItOnce(t *testing.T) {
	st := NewStore(NewMemoryBackend(), nil)
	s, detach, err := st.Create(CreateOptions{ID: "s", ParentSession: "root"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	var a, b int
	disposeA := s.Observe(func(Event) { a++ })
	s.Observe(func(Event) { b++ })
	mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
	disposeA()
	disposeA()
	mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 1})
	if a != 1 || b != 2 {
		t.Fatalf("the disposed observer heard %d events, want 1; the other %d, want 2", a, b)
	}
	if n := testing.AllocsPerRun(20, func() { s.Observe(func(Event) {})() }); n > 4 {
		t.Fatalf("an Observe and its dispose allocate %v times, want at most 4 (the observer, its disposer, the list, the list without it)", n)
	}
}
