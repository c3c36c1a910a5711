package session

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dsh-go/dsh/content"
)

// storeAndRead compacts events as a writer does, writes and reads each
// one's JSON, and expands what was read.
func storeAndRead(t *testing.T, events []Event) ([]Event, int) {
	t.Helper()
	var c Compactor
	var d Decoder
	out := make([]Event, len(events))
	size := 0
	for i, e := range events {
		b, err := c.Compact(e).AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		size += len(b)
		if out[i], err = d.Decode(b); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if err := Expand(out); err != nil {
		t.Fatal(err)
	}
	return out, size
}

// FuzzCompact builds logs of deltas, block-ends, messages and tool calls
// from the input: what a Compactor stores, Expand restores exactly, and no
// stored event carries a marker once read.
func FuzzCompact(f *testing.F) {
	f.Add([]byte{0, 1, 0, 40, 1, 0, 40, 2, 0, 3, 0, 4})
	f.Add([]byte{0, 1, 1, 80, 1, 2, 70, 2, 1, 3, 1, 4, 0, 1, 1, 90, 3, 1})
	f.Add([]byte{1, 0, 70, 0, 1, 0, 70, 3, 0, 2, 0, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var events []Event
		add := func(typ string, data any) {
			events = append(events, Event{Seq: int64(len(events)), Type: typ, Data: data})
		}
		step := 0
		texts := map[int]*strings.Builder{}
		next := func() int {
			if len(ops) == 0 {
				return 0
			}
			b := int(ops[0])
			ops = ops[1:]
			return b
		}
		for len(ops) > 0 {
			switch next() % 5 {
			case 0: // a new step
				step++
				add(TypeStepStart, Step{Turn: 1, Step: step})
				clear(texts)
			case 1: // a delta of index i, n*64 bytes
				i, n := next()%3, next()
				s := strings.Repeat(string(rune('a'+i)), n*64)
				if texts[i] == nil {
					texts[i] = &strings.Builder{}
				}
				texts[i].WriteString(s)
				typ := []content.ChunkType{content.ChunkTextDelta, content.ChunkReasoningDelta, content.ChunkToolCallDelta}[i]
				c := content.Chunk{Type: typ, Index: i, Text: s}
				if typ == content.ChunkToolCallDelta {
					c = content.Chunk{Type: typ, Index: i, ArgumentsDelta: s}
				}
				add(TypeAssistantChunk, AssistantChunk{Turn: 1, Step: int32(step), Chunk: c})
			case 2: // the block-end of index i
				i := next() % 3
				b := block(i, texts)
				add(TypeAssistantChunk, AssistantChunk{Turn: 1, Step: int32(step), Chunk: content.Chunk{Type: content.ChunkBlockEnd, Index: i, Block: &b}})
			case 3: // the step's message
				add(TypeAssistantMessage, AssistantMessage{Turn: 1, Step: step,
					Message: content.Message{Role: content.RoleAssistant, Content: []content.Block{block(0, texts), block(1, texts), block(2, texts)}}})
			case 4: // the tool call
				add(TypeToolCall, ToolCall{Turn: 1, Step: step, CallID: "c", Name: "t", Arguments: block(2, texts).Arguments})
			}
		}
		if len(events) == 0 {
			return
		}
		got, _ := storeAndRead(t, events)
		if diff := cmp.Diff(events, got); diff != "" {
			t.Fatalf("read back differs (-want +got):\n%.3000s", diff)
		}
	})
}

// block is the block of index i with the text its deltas have so far.
func block(i int, texts map[int]*strings.Builder) content.Block {
	s := ""
	if texts[i] != nil {
		s = texts[i].String()
	}
	switch i {
	case 0:
		return content.Text(s)
	case 1:
		return content.Block{Type: content.TypeReasoning, Text: s}
	}
	return content.ToolCall("c", "t", s)
}

// Stored once, read back whole; short texts are stored as they were.
func TestCompactShares(t *testing.T) {
	long := strings.Repeat("x", 4*MinShared)
	for _, tc := range []struct {
		name  string
		text  string
		ratio float64 // the most the stored events may be, per byte of text
	}{{"long", long, 1.1}, {"short", "short", 1e9}} {
		t.Run(tc.name, func(t *testing.T) {
			b := content.Text(tc.text)
			events := []Event{
				{Seq: 0, Type: TypeTurnStart, Data: TurnStart{Turn: 1}},
				{Seq: 1, Type: TypeStepStart, Data: Step{Turn: 1, Step: 1}},
				{Seq: 2, Type: TypeAssistantChunk, Data: AssistantChunk{Turn: 1, Step: 1, Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: tc.text}}},
				{Seq: 3, Type: TypeAssistantChunk, Data: AssistantChunk{Turn: 1, Step: 1, Chunk: content.Chunk{Type: content.ChunkBlockEnd, Block: &b}}},
				{Seq: 4, Type: TypeAssistantMessage, Data: AssistantMessage{Turn: 1, Step: 1,
					Message: content.Message{Role: content.RoleAssistant, Content: []content.Block{b}}}, SourceEventSeqs: []int64{2, 3}},
			}
			got, size := storeAndRead(t, events)
			if diff := cmp.Diff(events, got); diff != "" {
				t.Fatalf("read back differs (-want +got):\n%s", diff)
			}
			if r := float64(size) / float64(len(tc.text)); r > tc.ratio {
				t.Fatalf("stored %d bytes for %d of text (%.2f×)", size, len(tc.text), r)
			}
		})
	}
}
