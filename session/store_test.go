package session

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPrepareWithSeed(t *testing.T) {
	seed := logOf(t, func(s *Session) { appendTurn(t, s, 1) })
	st := NewStore(nil, nil)
	s, err := st.Prepare(CreateOptions{ID: "child", Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Header().SeedLength; got != len(seed) {
		t.Errorf("SeedLength = %d, want %d", got, len(seed))
	}
	events := s.Events()
	if len(events) != len(seed)+1 || events[len(seed)].Type != TypeEndSeed || events[len(seed)].Seq != int64(len(seed)) {
		t.Fatalf("seeded log does not end with one end-seed marker: %d events, last %+v", len(events), events[len(events)-1])
	}
	if s.LastTurn() != 1 {
		t.Errorf("LastTurn = %d, want 1", s.LastTurn())
	}
	if len(s.Messages()) != 4 {
		t.Errorf("seeded session derives %d messages, want 4", len(s.Messages()))
	}
	var published []int64
	s.Observe(func(e Event) { published = append(published, e.Seq) })
	detach, err := st.Enter(s)
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	appendTurn(t, s, s.LastTurn()+1)
	if published[0] != int64(len(seed)+1) {
		t.Errorf("first published seq %d, want %d (seed and marker are not published)", published[0], len(seed)+1)
	}
	if err := CheckBalanced(s.Events()); err != nil {
		t.Errorf("continued log is not balanced: %v", err)
	}

	// A seed that already ends with the marker is not extended.
	again, err := st.Prepare(CreateOptions{ID: "again", Seed: events})
	if err != nil {
		t.Fatal(err)
	}
	if again.Len() != len(events) {
		t.Errorf("re-seeding with a marked log gives %d events, want %d", again.Len(), len(events))
	}
}

func TestPrepareRefusesBadSeeds(t *testing.T) {
	turn := logOf(t, func(s *Session) { appendTurn(t, s, 1) })
	shift := func(events []Event, by int64) []Event {
		out := slices.Clone(events)
		for i := range out {
			out[i].Seq += by
		}
		return out
	}
	gap := slices.Clone(turn)
	gap = append(gap[:3:3], shift(gap[4:], 0)...) // seq 3 missing
	for _, tc := range []struct {
		name, msg string
		seed      []Event
	}{
		{"seq gap", "seq", gap},
		{"seq not from 0", "seq", shift(turn, 1)},
		{"open turn", "not finished", logOf(t, func(s *Session) {
			appendTurn(t, s, 1)
			mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 2})
		})},
		{"open step", "open step", logOf(t, func(s *Session) {
			mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
			mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 1})
			mustAppend(t, s, TypeTurnEnd, TurnEnd{Turn: 1, Reason: EndReason{Kind: EndCompleted}})
		})},
		{"unanswered tool call", `tool call "b" has no result`, logOf(t, func(s *Session) {
			appendOpenTurn(t, s, 1)
			mustAppend(t, s, TypeToolResult, ToolResult{Turn: 1, Step: 1,
				Message: content.ToolResultMessage("a", []content.Block{content.Text("ok")}, false)})
			mustAppend(t, s, TypeStepEnd, Step{Turn: 1, Step: 1})
			mustAppend(t, s, TypeTurnEnd, TurnEnd{Turn: 1, Reason: EndReason{Kind: EndAborted, Cause: &Cause{Kind: "user"}}})
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewStore(nil, nil).Prepare(CreateOptions{ID: "child", Seed: tc.seed})
			wantCode(t, err, CodeInvalidSeed)
			var se *Error
			if !errors.As(err, &se) || !strings.Contains(se.Msg, "invalid seed") || !strings.Contains(se.Msg, tc.msg) {
				t.Errorf("error %q does not explain the refusal (want %q)", err, tc.msg)
			}
		})
	}
}

func TestCompletedPrefix(t *testing.T) {
	events := logOf(t, func(s *Session) {
		appendTurn(t, s, 1)
		appendTurn(t, s, 2)
		appendOpenTurn(t, s, 3)
	})
	prefix := CompletedPrefix(events)
	if len(prefix) == 0 || prefix[len(prefix)-1].Type != TypeTurnEnd || prefix[len(prefix)-1].Data.(TurnEnd).Turn != 2 {
		t.Fatalf("prefix does not end with turn 2's end: %d events", len(prefix))
	}
	if err := CheckBalanced(prefix); err != nil {
		t.Errorf("prefix is not balanced: %v", err)
	}
	if got := CompletedPrefix(logOf(t, func(s *Session) { appendOpenTurn(t, s, 1) })); got != nil {
		t.Errorf("log without a completed turn: prefix has %d events, want nil", len(got))
	}
	if got := CompletedPrefix(nil); got != nil {
		t.Errorf("empty log: prefix %v, want nil", got)
	}
}

// Session.CompletedPrefix is what CompletedPrefix finds in Events, without
// scanning what followed the last turn end: events after it (a parent's
// usage events, one per child), a turn still open, a seeded log.
func TestSessionCompletedPrefix(t *testing.T) {
	same := func(t *testing.T, s *Session) {
		t.Helper()
		got, want := s.CompletedPrefix(), CompletedPrefix(s.Events())
		if len(got) != len(want) || cap(got) != len(got) || (want == nil) != (got == nil) {
			t.Fatalf("Session.CompletedPrefix has %d events (room %d, nil %v), want %d (nil %v)", len(got), cap(got), got == nil, len(want), want == nil)
		}
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].Type != want[i].Type {
				t.Fatalf("event %d is %d %s, want %d %s", i, got[i].Seq, got[i].Type, want[i].Seq, want[i].Type)
			}
		}
	}
	s := newSession(Header{ID: "p"}, nil)
	same(t, s)
	appendTurn(t, s, 1)
	same(t, s)
	turn1 := s.Len()
	for range 100 {
		mustAppend(t, s, "subagent/usage", map[string]int{"tokens": 1})
	}
	same(t, s)
	if n := len(s.CompletedPrefix()); n != turn1 {
		t.Fatalf("prefix has %d events after the usage events, want turn 1's %d", n, turn1)
	}
	appendTurn(t, s, 2)
	appendOpenTurn(t, s, 3)
	mustAppend(t, s, TypeAssistantChunk, AssistantChunk{Turn: 3, Step: 1, Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: "x"}})
	same(t, s)
	seed := s.CompletedPrefix()
	if len(seed) != 2*turn1+100 {
		t.Fatalf("prefix has %d events, want turns 1 and 2 and the usage events between, %d", len(seed), 2*turn1+100)
	}
	child := newSession(Header{ID: "c", ParentSession: "p"}, seed)
	same(t, child)
	if got := child.CompletedPrefix(); len(got) != len(seed) {
		t.Fatalf("a seeded log's prefix has %d events, want the seed's %d", len(got), len(seed))
	}
}

func TestRepairClosesInterruptedTurn(t *testing.T) {
	var callA Event
	events := logOf(t, func(s *Session) {
		appendTurn(t, s, 1)
		callA = appendOpenTurn(t, s, 2)
	})
	last := events[len(events)-1]
	repaired, err := Repair(events)
	if err != nil {
		t.Fatal(err)
	}
	extra := repaired[len(events):]
	if len(extra) != 4 {
		t.Fatalf("got %d closers, want 4: %+v", len(extra), extra)
	}
	for i, e := range extra {
		if e.Seq != last.Seq+1+int64(i) || e.Time != last.Time {
			t.Errorf("closer %d: seq %d time %d, want seq %d time %d", i, e.Seq, e.Time, last.Seq+1+int64(i), last.Time)
		}
	}
	for i, want := range []struct{ call, code string }{{"a", "TOOL_OUTCOME_UNKNOWN"}, {"b", "TOOL_NOT_STARTED"}} {
		e := extra[i]
		r, ok := e.Data.(ToolResult)
		if e.Type != TypeToolResult || !ok || e.SurfaceOp() != "append" {
			t.Fatalf("closer %d is %s %T, want a surface tool result", i, e.Type, e.Data)
		}
		b := r.Message.Content[0]
		if r.Error == nil || r.Error.Code != want.code || b.ToolCallID != want.call || !b.IsError || r.Turn != 2 || r.Step != 1 {
			t.Errorf("closer %d = %+v, want error result %s for call %s in turn 2 step 1", i, r, want.code, want.call)
		}
	}
	if !slices.Equal(extra[0].SourceEventSeqs, []int64{callA.Seq}) ||
		!strings.Contains(content.JoinText(extra[0].Data.(ToolResult).Message.Content[0].Content), "event "+strconv.FormatInt(callA.Seq, 10)) {
		t.Errorf("outcome-unknown result does not cite the call seq %d: %+v", callA.Seq, extra[0])
	}
	if diff := cmp.Diff(Event{Seq: extra[2].Seq, Time: last.Time, Type: TypeStepEnd, Data: Step{Turn: 2, Step: 1}}, extra[2]); diff != "" {
		t.Errorf("step closer mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Event{Seq: extra[3].Seq, Time: last.Time, Type: TypeTurnEnd,
		Data: TurnEnd{Turn: 2, Reason: EndReason{Kind: EndInterrupted}}}, extra[3]); diff != "" {
		t.Errorf("turn closer mismatch (-want +got):\n%s", diff)
	}
	if err := CheckBalanced(repaired); err != nil {
		t.Errorf("repaired log is not balanced: %v", err)
	}

	// Interrupted between steps: only the turn is closed.
	between := logOf(t, func(s *Session) {
		mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
		mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 1})
		mustAppend(t, s, TypeStepEnd, Step{Turn: 1, Step: 1})
	})
	if got, _ := closers(between); len(got) != 1 || got[0].Type != TypeTurnEnd {
		t.Errorf("closers between steps = %+v, want one turn/end", got)
	}
}

// Crash repair must be deterministic (spec 1.13): repairing the same log
// twice gives the same closers.
func TestRepairIsDeterministic(t *testing.T) {
	events := logOf(t, func(s *Session) { appendOpenTurn(t, s, 1) })
	a, _ := closers(events)
	b, _ := closers(events)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("closers differ between runs (-first +second):\n%s", diff)
	}
}

// Tool-call ids repeat across steps (content.Assembler names id-less calls
// call-<index>): a call not started in this step is not the earlier step's.
func TestRepairReusedCallIDNotStarted(t *testing.T) {
	events := logOf(t, func(s *Session) {
		call := content.ToolCall("call-0", "x", `{}`)
		mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
		mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 1})
		mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: 1, Step: 1, Message: content.AssistantMessage("p", "m", []content.Block{call})})
		mustAppend(t, s, TypeToolCall, ToolCall{Turn: 1, Step: 1, CallID: "call-0", Name: "x", Arguments: `{}`})
		mustAppend(t, s, TypeToolResult, ToolResult{Turn: 1, Step: 1, Message: content.ToolResultMessage("call-0", nil, false)})
		mustAppend(t, s, TypeStepEnd, Step{Turn: 1, Step: 1})
		mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 2})
		mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: 1, Step: 2, Message: content.AssistantMessage("p", "m", []content.Block{call})})
	})
	extra, err := closers(events)
	if err != nil || len(extra) == 0 {
		t.Fatal(extra, err)
	}
	if r := extra[0].Data.(ToolResult); r.Error.Code != "TOOL_NOT_STARTED" || extra[0].SourceEventSeqs != nil {
		t.Errorf("call of step 2 repaired as %s citing %v, want TOOL_NOT_STARTED", r.Error.Code, extra[0].SourceEventSeqs)
	}
}

func TestRepairBalancedLogIsUnchanged(t *testing.T) {
	events := logOf(t, func(s *Session) { appendTurn(t, s, 1); appendTurn(t, s, 2) })
	for _, log := range [][]Event{nil, events} {
		extra, err := closers(log)
		if err != nil || extra != nil {
			t.Errorf("closers of a balanced log = %v, %v; want nothing", extra, err)
		}
		repaired, err := Repair(log)
		if err != nil || len(repaired) != len(log) {
			t.Errorf("Repair of a balanced log changed it: %d → %d events, %v", len(log), len(repaired), err)
		}
	}
	if _, err := Repair(logOf(t, func(s *Session) { mustAppend(t, s, TypeStepEnd, Step{Turn: 1, Step: 1}) })); err == nil {
		t.Error("Repair accepted a step/end without an open step")
	}
}

func TestStoreEnterRefusesDuplicateID(t *testing.T) {
	st := NewStore(nil, nil)
	first, err := st.Prepare(CreateOptions{ID: "dup"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := st.Prepare(CreateOptions{ID: "dup"})
	if err != nil {
		t.Fatal(err)
	}
	detach, err := st.Enter(first)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Enter(second)
	wantCode(t, err, CodeExists)
	if s, ok := st.Get("dup"); !ok || s != first {
		t.Error("the refused session replaced the live one")
	}
	appendTurn(t, first, 1)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	// Stored now: the backend refuses the id too.
	_, _, err = st.Create(CreateOptions{ID: "dup"})
	wantCode(t, err, CodeExists)
}

func TestDetachClosesSession(t *testing.T) {
	bus := event.New(nil)
	var announced []string
	defer bus.Subscribe(func(e event.Event) { announced = append(announced, e.EventType()) })()
	backend := NewMemoryBackend()
	st := NewStore(backend, bus)
	s, detach, err := st.Create(CreateOptions{ID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Live(); !slices.Equal(got, []string{"s"}) {
		t.Errorf("Live = %v, want [s]", got)
	}
	mustAppend(t, s, TypeUserMessage, content.UserText("unflushed"))
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	if err := detach(); err != nil {
		t.Errorf("second detach: %v", err)
	}
	_, err = s.Append(TypeUserMessage, content.UserText("late"))
	wantCode(t, err, CodeClosed)
	if _, ok := st.Get("s"); ok {
		t.Error("detached session is still live")
	}
	if _, events, _, err := backend.Load("s"); err != nil || len(events) != 1 {
		t.Errorf("detach did not flush: %d stored events, %v", len(events), err)
	}
	if want := []string{"session/created", "session/disposed"}; !slices.Equal(announced, want) {
		t.Errorf("bus saw %v, want %v", announced, want)
	}
}

func TestStoreLoadClosesInterruptedTurn(t *testing.T) {
	backend := NewMemoryBackend()
	st := NewStore(backend, nil)
	s, detach, err := st.Create(CreateOptions{ID: "s", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, s, 1)
	appendOpenTurn(t, s, 2)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	stored := s.Events()

	h, read, err := st.Read("s")
	if err != nil || h != s.Header() || len(read) != len(stored)+4 {
		t.Fatalf("Read = %+v, %d events, %v", h, len(read), err)
	}
	if _, events, _, _ := backend.Load("s"); len(events) != len(stored) {
		t.Errorf("Read persisted closers: %d stored events, want %d", len(events), len(stored))
	}

	loaded, detach, err := st.Load(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	// Repair mints fresh message ids for its tool results (see
	// TestRepairIsDeterministic); everything else must agree.
	if diff := cmp.Diff(read, loaded.Events(), cmpopts.IgnoreFields(content.Message{}, "ID")); diff != "" {
		t.Errorf("Load and Read disagree (-read +load):\n%s", diff)
	}
	if loaded.LastTurn() != 2 {
		t.Errorf("LastTurn = %d, want 2", loaded.LastTurn())
	}
	if _, events, _, _ := backend.Load("s"); len(events) != len(read) {
		t.Errorf("Load did not persist the closers: %d stored events, want %d", len(events), len(read))
	}
	if h, _, err := st.Read("s"); err != nil || h.ID != "s" {
		t.Errorf("Read of a live session: %v", err)
	}
	_, _, err = st.Load(context.Background(), "s")
	wantCode(t, err, CodeExists)
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.Load(context.Background(), "missing")
	wantCode(t, err, CodeNotFound)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := st.Load(ctx, "s"); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled context: %v", err)
	}
}

func TestStoreListNewestFirst(t *testing.T) {
	backend := NewMemoryBackend()
	st := NewStore(backend, nil)
	for i, id := range []string{"old", "new", "mid"} {
		s, err := st.Prepare(CreateOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		s.header.CreatedAt = []int64{100, 300, 200}[i]
		detach, err := st.Enter(s)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, s, TypeUserMessage, content.UserText(id))
		detach()
	}
	hs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hs {
		ids = append(ids, h.ID)
	}
	if want := []string{"new", "mid", "old"}; !slices.Equal(ids, want) {
		t.Errorf("List = %v, want %v", ids, want)
	}
}

// failingBackend stores nothing: every persister write fails.
type failingBackend struct{ MemoryBackend }

type failingPersister struct{}

func (*failingBackend) Create(Header) (Persister, error) { return failingPersister{}, nil }
func (failingPersister) Append([]Event) error            { return errors.New("disk full") }
func (failingPersister) Close() error                    { return nil }

// loadFailingBackend loads a stored log but cannot write to it.
type loadFailingBackend struct{ *MemoryBackend }

func (b loadFailingBackend) Load(id string) (Header, []Event, Persister, error) {
	h, events, _, err := b.MemoryBackend.Load(id)
	return h, events, failingPersister{}, err
}

func TestStoreLoadFailureLeavesNothingLive(t *testing.T) {
	mem := NewMemoryBackend()
	s, detach, err := NewStore(mem, nil).Create(CreateOptions{ID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	appendOpenTurn(t, s, 1)
	s.Flush()
	detach()
	st := NewStore(loadFailingBackend{mem}, nil)
	if _, _, err := st.Load(context.Background(), "s"); err == nil {
		t.Fatal("Load hid the write error")
	}
	if live := st.Live(); len(live) != 0 {
		t.Errorf("failed Load left %v live", live)
	}
}

func TestFlushErrorIsSticky(t *testing.T) {
	s, detach, err := NewStore(&failingBackend{}, nil).Create(CreateOptions{ID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(TypeStepEnd, Step{}); err != nil {
		t.Fatalf("Append failed on a write error: %v", err)
	}
	for range 2 {
		if err := s.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("Flush = %v, want the write error", err)
		}
	}
	if err := detach(); err == nil {
		t.Error("detach hid the write error")
	}
}

// A child entering the store flushes its parent first, so the backend
// never holds a child whose parent it lacks.
func TestEnterFlushesTheParent(t *testing.T) {
	backend := NewMemoryBackend()
	st := NewStore(backend, nil)
	parent, detach, err := st.Create(CreateOptions{ID: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	mustAppend(t, parent, TypeUserMessage, content.UserText("delegate this"))
	if _, _, _, err := backend.Read("parent"); err == nil {
		t.Fatal("the parent was stored before any flush")
	}
	_, detachChild, err := st.Create(CreateOptions{ID: "child", ParentSession: "parent", DelegationDepth: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer detachChild()
	if _, events, _, err := backend.Read("parent"); err != nil || len(events) != 1 {
		t.Fatalf("parent after the child entered: %d events, %v", len(events), err)
	}
}

// Read never closes the open turn of a session a live writer holds (it is
// running); once the writer is gone, it closes it in memory only.
func TestReadLeavesALiveWritersTurnOpen(t *testing.T) {
	backend := NewMemoryBackend()
	s, detach, err := NewStore(backend, nil).Create(CreateOptions{ID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	appendOpenTurn(t, s, 1)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	reader := NewStore(backend, nil) // another process, as it were
	_, events, err := reader.Read("s")
	if err != nil || len(events) != s.Len() || events[len(events)-1].Type != TypeToolCall {
		t.Fatalf("Read of a live session: %d events (want %d, as written), %v", len(events), s.Len(), err)
	}
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	_, events, err = reader.Read("s")
	if err != nil || len(events) != s.Len()+4 || events[len(events)-1].Type != TypeTurnEnd {
		t.Fatalf("Read after the writer left: %d events (want %d, repaired), %v", len(events), s.Len()+4, err)
	}
	if _, stored, _, _ := backend.Read("s"); len(stored) != s.Len() {
		t.Errorf("Read wrote its repair: %d stored events, want %d", len(stored), s.Len())
	}
}
