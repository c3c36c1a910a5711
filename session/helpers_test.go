package session

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/content"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustAppend(t testing.TB, s *Session, typ string, data any, src ...int64) Event {
	t.Helper()
	e, err := s.Append(typ, data, src...)
	if err != nil {
		t.Fatalf("append %s: %v", typ, err)
	}
	return e
}

// appendTurn appends a complete turn: a user message, a step whose answer
// calls a tool and gets its result, and a final text step.
func appendTurn(t testing.TB, s *Session, turn int) {
	t.Helper()
	id := fmt.Sprintf("call-t%d", turn)
	mustAppend(t, s, TypeTurnStart, TurnStart{Turn: turn})
	mustAppend(t, s, TypeUserMessage, content.UserText(fmt.Sprintf("question %d", turn)))
	mustAppend(t, s, TypeStepStart, Step{Turn: turn, Step: 1})
	c := mustAppend(t, s, TypeAssistantChunk, AssistantChunk{Turn: int32(turn), Step: 1,
		Chunk: content.Chunk{Type: content.ChunkToolCallDelta, ID: id, Name: "read", ArgumentsDelta: `{"path":"a"}`}})
	mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: turn, Step: 1,
		Message: content.AssistantMessage("p", "m", []content.Block{content.ToolCall(id, "read", `{"path":"a"}`)}),
		Usage:   &content.Usage{Input: 10, Output: 2}}, c.Seq)
	call := mustAppend(t, s, TypeToolCall, ToolCall{Turn: turn, Step: 1, CallID: id, Name: "read", Arguments: `{"path":"a"}`})
	mustAppend(t, s, TypeToolResult, ToolResult{Turn: turn, Step: 1,
		Message: content.ToolResultMessage(id, []content.Block{content.Text("contents")}, false)}, call.Seq)
	mustAppend(t, s, TypeStepEnd, Step{Turn: turn, Step: 1})
	mustAppend(t, s, TypeStepStart, Step{Turn: turn, Step: 2})
	c = mustAppend(t, s, TypeAssistantChunk, AssistantChunk{Turn: int32(turn), Step: 2,
		Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: "done"}})
	mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: turn, Step: 2,
		Message: content.AssistantMessage("p", "m", []content.Block{content.Text("done")})}, c.Seq)
	mustAppend(t, s, TypeStepEnd, Step{Turn: turn, Step: 2})
	mustAppend(t, s, TypeTurnEnd, TurnEnd{Turn: turn, Reason: EndReason{Kind: EndCompleted}})
}

// appendOpenTurn appends a turn interrupted inside its first step: the
// answer calls tools a (started) and b (not started).
func appendOpenTurn(t testing.TB, s *Session, turn int) (callA Event) {
	t.Helper()
	mustAppend(t, s, TypeTurnStart, TurnStart{Turn: turn})
	mustAppend(t, s, TypeUserMessage, content.UserText("go"))
	mustAppend(t, s, TypeStepStart, Step{Turn: turn, Step: 1})
	mustAppend(t, s, TypeAssistantMessage, AssistantMessage{Turn: turn, Step: 1,
		Message: content.AssistantMessage("p", "m", []content.Block{
			content.ToolCall("a", "run", `{}`), content.ToolCall("b", "run", `{}`)})})
	return mustAppend(t, s, TypeToolCall, ToolCall{Turn: turn, Step: 1, CallID: "a", Name: "run", Arguments: `{}`})
}

// logOf returns the events build appends to a fresh unpersisted session.
func logOf(t testing.TB, build func(*Session)) []Event {
	t.Helper()
	s := newSession(Header{ID: "src"}, nil)
	build(s)
	return s.Events()
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %s", code)
	}
	if !errors.Is(err, &Error{Code: code}) {
		t.Fatalf("error %q: want code %s", err, code)
	}
}
