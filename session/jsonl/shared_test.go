package jsonl

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// appendBigStep appends a step as the agent logs it: the answer's text in
// deltas of delta bytes, then a tool call whose arguments come in deltas,
// the block-ends with the whole blocks, the assistant message, the call
// and its result. It returns the text and the arguments.
func appendBigStep(t testing.TB, s *session.Session, turn, step, textLen, argsLen, delta int) (text, args string) {
	t.Helper()
	text = strings.Repeat("é big answer line\n", textLen/19+1)[:textLen]
	args = `{"path":"big.txt","content":"` + strings.Repeat("x\\n\\\"", argsLen/5)[:argsLen-33] + `"}`
	id := "call-big"
	mustAppend(t, s, session.TypeStepStart, session.Step{Turn: turn, Step: step})
	var seqs []int64
	add := func(c content.Chunk) {
		e := mustAppend(t, s, session.TypeAssistantChunk, session.AssistantChunk{Turn: int32(turn), Step: int32(step), Chunk: c})
		if n := len(seqs); n == 0 || seqs[n-1] != e.Seq {
			seqs = append(seqs, e.Seq)
		}
	}
	for i := 0; i < len(text); {
		n := min(delta, len(text)-i)
		for n < len(text)-i && !utf8.RuneStart(text[i+n]) {
			n++ // a stream's deltas are whole characters
		}
		add(content.Chunk{Type: content.ChunkTextDelta, Index: 0, Text: text[i : i+n]})
		i += n
	}
	tb := content.Text(text)
	add(content.Chunk{Type: content.ChunkBlockEnd, Index: 0, Block: &tb})
	add(content.Chunk{Type: content.ChunkToolCallDelta, Index: 1, ID: id, Name: "write_file"})
	for i := 0; i < len(args); i += delta {
		add(content.Chunk{Type: content.ChunkToolCallDelta, Index: 1, ArgumentsDelta: args[i:min(i+delta, len(args))]})
	}
	cb := content.ToolCall(id, "write_file", args)
	add(content.Chunk{Type: content.ChunkBlockEnd, Index: 1, Block: &cb})
	add(content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishToolCalls}})
	mustAppend(t, s, session.TypeAssistantMessage, session.AssistantMessage{Turn: turn, Step: step,
		Message: content.AssistantMessage("p", "m", []content.Block{tb, cb})}, seqs...)
	call := mustAppend(t, s, session.TypeToolCall, session.ToolCall{Turn: turn, Step: step, CallID: id, Name: "write_file", Arguments: args})
	mustAppend(t, s, session.TypeToolResult, session.ToolResult{Turn: turn, Step: step,
		Message: content.ToolResultMessage(id, []content.Block{content.Text("wrote big.txt")}, false)}, call.Seq)
	mustAppend(t, s, session.TypeStepEnd, session.Step{Turn: turn, Step: step})
	return text, args
}

// A long answer and long tool arguments are stored once (N17): the file
// is barely larger than the text it holds, where the deltas, the
// block-ends, the assistant message and the tool call each held a copy;
// and the events read back are the events appended, through Load, Read
// and a later writer that continues the log.
func TestBigTextStoredOnce(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		textLen, argsLen, size int
	}{
		{"one delta each", 1 << 20, 1 << 20, 1 << 20},
		{"coalesced deltas", 300 << 10, 200 << 10, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var text, args string
			h, want := store(t, root, session.CreateOptions{ID: "big", Cwd: "/w"}, func(s *session.Session) {
				mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: 1})
				mustAppend(t, s, session.TypeUserMessage, content.UserText("write it"))
				text, args = appendBigStep(t, s, 1, 1, tc.textLen, tc.argsLen, tc.size)
				mustAppend(t, s, session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}})
			})
			fi, err := os.Stat(New(root).Path(h))
			if err != nil {
				t.Fatal(err)
			}
			// JSON escapes the arguments' quotes and backslashes: count them
			// as stored.
			quotedArgs, _ := json.Marshal(args)
			stored := float64(len(text) + len(quotedArgs))
			ratio := float64(fi.Size()) / stored
			t.Logf("%d bytes of text and arguments (%d as JSON) → %d-byte file (%.2f×)", len(text)+len(args), int(stored), fi.Size(), ratio)
			if ratio > 1.1 {
				t.Errorf("the file holds the text %.2f times", ratio)
			}
			_, events, p, err := New(root).Load(h.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, events); diff != "" {
				t.Fatalf("Load events mismatch (-want +got):\n%.2000s", diff)
			}
			// A later writer continues the log; its own step is shared too.
			p.Close()
			s, detach, err := session.NewStore(New(root), nil).Load(t.Context(), h.ID)
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: 2})
			appendBigStep(t, s, 2, 1, tc.textLen, tc.argsLen, tc.size)
			mustAppend(t, s, session.TypeTurnEnd, session.TurnEnd{Turn: 2, Reason: session.EndReason{Kind: session.EndCompleted}})
			want = s.Events()
			if err := detach(); err != nil {
				t.Fatal(err)
			}
			_, events, _, err = New(root).Read(h.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, events); diff != "" {
				t.Fatalf("Read events mismatch (-want +got):\n%.2000s", diff)
			}
			if fi2, _ := os.Stat(New(root).Path(h)); float64(fi2.Size()) > 2.2*stored {
				t.Errorf("two steps: %d-byte file for %d bytes of text", fi2.Size(), int(stored))
			}
		})
	}
}

// A turn killed while the answer streamed keeps its text in the deltas:
// the log loads, the interrupted message (when one was written) holds the
// partial text, and a short text is stored as it always was.
func TestBigTextOfAKilledTurn(t *testing.T) {
	root := t.TempDir()
	text := strings.Repeat("partial answer ", 1000)
	h, want := store(t, root, session.CreateOptions{ID: "killed", Cwd: "/w"}, func(s *session.Session) {
		mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: 1})
		mustAppend(t, s, session.TypeUserMessage, content.UserText("go"))
		mustAppend(t, s, session.TypeStepStart, session.Step{Turn: 1, Step: 1})
		var seqs []int64
		for i := 0; i < len(text); i += 4995 {
			seqs = append(seqs, mustAppend(t, s, session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: 1,
				Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: text[i:min(i+4995, len(text))]}}).Seq)
		}
		mustAppend(t, s, session.TypeAssistantMessage, session.AssistantMessage{Turn: 1, Step: 1, Interrupted: true,
			Message: content.AssistantMessage("p", "m", []content.Block{content.Text(text), content.Text("short")})}, seqs...)
	})
	raw, err := os.ReadFile(New(root).Path(h))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "partial answer "); n != 1000 {
		t.Errorf("the text is stored %d/1000 times", n)
	}
	_, events, _, err := New(root).Read(h.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Fatalf("events mismatch (-want +got):\n%.2000s", diff)
	}
	_, repaired, err := session.NewStore(New(root), nil).Read(h.ID)
	if err != nil {
		t.Fatal(err)
	}
	if end, ok := repaired[len(repaired)-1].Data.(session.TurnEnd); !ok || end.Reason.Kind != session.EndInterrupted {
		t.Fatalf("the killed turn is not closed as interrupted: %+v", repaired[len(repaired)-1])
	}
}

// A reference that leads nowhere is a corrupt log, not a silently empty
// text.
func TestDanglingSharedTextIsCorrupt(t *testing.T) {
	root := t.TempDir()
	h, _ := store(t, root, session.CreateOptions{ID: "dangling", Cwd: "/w"}, func(s *session.Session) {
		mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: 1})
		appendBigStep(t, s, 1, 1, 8<<10, 8<<10, 8<<10)
	})
	path := New(root).Path(h)
	ls := lines(t, path)
	for i, l := range ls {
		if strings.Contains(l, `"text-delta"`) {
			ls[i] = strings.Replace(l, `"index":0`, `"index":7`, 1) // the deltas of another block
		}
	}
	writeLines(t, path, ls)
	_, _, _, err := New(root).Read(h.ID)
	wantCode(t, err, session.CodeCorrupt, "refers to deltas")
}

// A delta that is not valid UTF-8 is stored changed (JSON replaces the
// bad bytes), so its block's text is never shared with it: the block-end
// and the message keep the text they had.
func TestBrokenDeltaIsNotShared(t *testing.T) {
	root := t.TempDir()
	text := strings.Repeat("é", 4<<10)
	h, _ := store(t, root, session.CreateOptions{ID: "broken", Cwd: "/w"}, func(s *session.Session) {
		mustAppend(t, s, session.TypeTurnStart, session.TurnStart{Turn: 1})
		mustAppend(t, s, session.TypeStepStart, session.Step{Turn: 1, Step: 1})
		cut := len(text)/2 + 1 // inside a character
		var seqs []int64
		for _, part := range []string{text[:cut], text[cut:]} {
			seqs = append(seqs, mustAppend(t, s, session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: 1,
				Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: part}}).Seq)
		}
		b := content.Text(text)
		mustAppend(t, s, session.TypeAssistantChunk, session.AssistantChunk{Turn: 1, Step: 1, Chunk: content.Chunk{Type: content.ChunkBlockEnd, Block: &b}})
		mustAppend(t, s, session.TypeAssistantMessage, session.AssistantMessage{Turn: 1, Step: 1,
			Message: content.AssistantMessage("p", "m", []content.Block{b})}, seqs...)
	})
	_, events, _, err := New(root).Read(h.ID)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range events {
		switch d := e.Data.(type) {
		case session.AssistantChunk:
			if d.Chunk.Block != nil {
				texts = append(texts, d.Chunk.Block.Text)
			}
		case session.AssistantMessage:
			texts = append(texts, d.Message.Content[0].Text)
		}
	}
	if len(texts) != 2 || texts[0] != text || texts[1] != text {
		t.Fatalf("the block's text changed: %d texts", len(texts))
	}
}
