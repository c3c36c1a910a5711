package session

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/google/go-cmp/cmp"
)

func TestAppendAssignsSeqTimeAndSurface(t *testing.T) {
	s := newSession(Header{ID: "s"}, nil)
	before := time.Now().UnixMilli()
	appendTurn(t, s, 1)
	after := time.Now().UnixMilli()
	events := s.Events()
	if len(events) != s.Len() || len(events) == 0 {
		t.Fatalf("Events() has %d events, Len() %d", len(events), s.Len())
	}
	for i, e := range events {
		if e.Seq != int64(i) {
			t.Errorf("event %d has seq %d", i, e.Seq)
		}
		if e.Time < before || e.Time > after {
			t.Errorf("event %d time %d outside [%d, %d]", i, e.Time, before, after)
		}
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bytes.Contains(b, []byte(`"surfaceOp":"append"`)), isSurface(e.Type); got != want {
			t.Errorf("event %d (%s) written as %s", i, e.Type, b)
		}
		if e.Type == TypeAssistantMessage && e.SourceEventSeqs == nil {
			t.Errorf("event %d: assistant message has nil SourceEventSeqs", i)
		}
		if !isSurface(e.Type) && e.SourceEventSeqs != nil {
			t.Errorf("event %d (%s) carries SourceEventSeqs", i, e.Type)
		}
	}
	if s.LastTurn() != 1 {
		t.Errorf("LastTurn = %d, want 1", s.LastTurn())
	}
}

func TestAppendSourceSeqs(t *testing.T) {
	s := newSession(Header{ID: "s"}, nil)
	msg := mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Message: content.AssistantMessage("p", "m", nil)})
	if msg.SourceEventSeqs == nil || len(msg.SourceEventSeqs) != 0 {
		t.Errorf("assistant message without chunks: SourceEventSeqs %#v, want empty non-nil", msg.SourceEventSeqs)
	}
	res := mustAppend(t, s, TypeToolResult, ToolResult{}, 7)
	if !slices.Equal(res.SourceEventSeqs, []int64{7}) {
		t.Errorf("tool result SourceEventSeqs %v, want [7]", res.SourceEventSeqs)
	}
	st := mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 1}, 3)
	if st.SourceEventSeqs != nil {
		t.Errorf("step/start carries surface metadata: %+v", st)
	}
	if _, err := s.Append("", nil); err == nil {
		t.Error("Append with an empty type succeeded")
	}
}

func TestMessagesDerivedFromLog(t *testing.T) {
	s := newSession(Header{ID: "s"}, nil)
	user := content.UserText("hi")
	answer := content.AssistantMessage("p", "m", []content.Block{content.Text("hello"), content.ToolCall("c1", "ls", `{}`)})
	result := content.ToolResultMessage("c1", []content.Block{content.Text("files")}, false)
	final := content.AssistantMessage("p", "m", []content.Block{content.Text("bye")})
	mustAppend(t, s, TypeTurnStart, TurnStart{Turn: 1})
	mustAppend(t, s, TypeUserMessage, user)
	mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 1})
	mustAppend(t, s, TypeAssistantChunk, AssistantChunk{Turn: 1, Step: 1, Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: "hello"}})
	mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: 1, Step: 1, Message: answer}, 3)
	mustAppend(t, s, TypeToolCall, ToolCall{Turn: 1, Step: 1, CallID: "c1", Name: "ls", Arguments: `{}`})
	mustAppend(t, s, TypeToolResult, ToolResult{Turn: 1, Step: 1, Message: result}, 5)
	mustAppend(t, s, TypeStepEnd, Step{Turn: 1, Step: 1})
	mustAppend(t, s, TypeStepStart, Step{Turn: 1, Step: 2})
	mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: 1, Step: 2, // max-tokens step hosting only usage
		Message: content.AssistantMessage("p", "m", nil), Usage: &content.Usage{Output: 1}})
	mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: 1, Step: 2, Message: final})
	mustAppend(t, s, TypeStepEnd, Step{Turn: 1, Step: 2})
	mustAppend(t, s, TypeTurnEnd, TurnEnd{Turn: 1, Reason: EndReason{Kind: EndCompleted}})

	want := []content.Message{user, answer, result, final}
	if diff := cmp.Diff(want, s.Messages()); diff != "" {
		t.Errorf("Messages() mismatch (-want +got):\n%s", diff)
	}
}

func TestObserveDeliversInSeqOrder(t *testing.T) {
	s := newSession(Header{ID: "s"}, nil)
	var mu sync.Mutex
	var seen []int64
	dispose := s.Observe(func(e Event) {
		mu.Lock()
		seen = append(seen, e.Seq)
		mu.Unlock()
	})
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := s.Append("test/tick", nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	if len(got) != writers*each {
		t.Fatalf("observer saw %d events, want %d", len(got), writers*each)
	}
	for i, seq := range got {
		if seq != int64(i) {
			t.Fatalf("delivery %d has seq %d: not in seq order", i, seq)
		}
	}
	dispose()
	dispose() // idempotent
	mustAppend(t, s, "test/tick", nil)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != writers*each {
		t.Error("observer called after dispose")
	}
}

func TestObserverPanicIsContained(t *testing.T) {
	s := newSession(Header{ID: "s"}, nil)
	var seen []int64
	s.Observe(func(Event) { panic("boom") })
	s.Observe(func(e Event) { seen = append(seen, e.Seq) })
	for range 3 {
		mustAppend(t, s, TypeUserMessage, content.UserText("x"))
	}
	if !slices.Equal(seen, []int64{0, 1, 2}) {
		t.Errorf("second observer saw %v, want [0 1 2]", seen)
	}
	if s.Len() != 3 {
		t.Errorf("Len = %d, want 3", s.Len())
	}
}

func TestObserverReentrantAppend(t *testing.T) {
	s, detach, err := NewStore(nil, nil).Create(CreateOptions{ID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	var seen []string
	s.Observe(func(e Event) {
		seen = append(seen, e.Type)
		if e.Type == "test/ping" {
			_, err1 := s.Append("test/pong", nil)
			_, err2 := s.Append(TypeStepEnd, Step{}) // flushes from inside publication
			if err1 != nil || err2 != nil {
				t.Error(err1, err2)
			}
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := s.Append("test/ping", nil); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("re-entrant Append deadlocked")
	}
	if want := []string{"test/ping", "test/pong", TypeStepEnd}; !slices.Equal(seen, want) {
		t.Errorf("observer saw %v, want %v", seen, want)
	}
}

func TestHeaderValidation(t *testing.T) {
	st := NewStore(nil, nil)
	for _, tc := range []struct {
		name string
		opts CreateOptions
		code string
	}{
		{"relative cwd", CreateOptions{ID: "a", Cwd: "rel/dir"}, CodeInvalidHeader},
		{"no id", CreateOptions{Cwd: "/tmp"}, CodeInvalidHeader},
		{"negative depth", CreateOptions{ID: "a", DelegationDepth: -1}, CodeInvalidHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.Prepare(tc.opts)
			wantCode(t, err, tc.code)
		})
	}
	s, err := st.Prepare(CreateOptions{ID: "a", Cwd: "/abs/dir", ParentSession: "p", Origin: OriginSubagent, DelegationDepth: 2})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Header()
	if h.ID != "a" || h.Cwd != "/abs/dir" || h.ParentSession != "p" || h.Origin != OriginSubagent ||
		h.DelegationDepth != 2 || h.Version != FormatVersion || h.CreatedAt <= 0 {
		t.Errorf("header %+v does not reflect the options", h)
	}
	wantCode(t, validateHeader(Header{ID: "a", Version: 1}), CodeFormat)
	wantCode(t, validateHeader(Header{ID: "a", CreatedAt: -1}), CodeInvalidHeader)
}
