package content

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// refAssembler is the Assembler of integ 7e77f05, the reference the
// Assembler is fuzzed against: it folds a stream of chunks into the blocks
// of one assistant message. Blocks keep the order in which their index was first seen;
// deltas after a block's end are ignored; delta-only streams assemble too.
type refAssembler struct {
	parts  []*refPartial // in the order their index was first seen; few per message
	usage  *Usage
	finish *Finish
}

type refPartial struct {
	index int
	block Block
	text  strings.Builder
	args  strings.Builder
	ended bool
	final bool // block holds the authoritative block of its block-end
}

// Add feeds one chunk.
func (a *refAssembler) Add(c Chunk) {
	switch c.Type {
	case ChunkUsage:
		a.usage = c.Usage
		return
	case ChunkFinish:
		a.finish = c.Finish
		return
	}
	p := a.slot(c.Index, c)
	if p == nil || p.ended {
		return
	}
	switch c.Type {
	case ChunkTextDelta, ChunkReasoningDelta:
		p.text.WriteString(c.Text)
	case ChunkToolCallDelta:
		if c.ID != "" {
			p.block.ID = c.ID
		}
		if c.Name != "" {
			p.block.Name = c.Name
		}
		p.args.WriteString(c.ArgumentsDelta)
	case ChunkBlockEnd:
		if c.Block != nil {
			p.block, p.final = *c.Block, true
		}
		p.ended = true
	}
}

func (a *refAssembler) slot(index int, c Chunk) *refPartial {
	for _, p := range a.parts {
		if p.index == index {
			return p
		}
	}
	var t BlockType
	switch c.Type {
	case ChunkBlockStart:
		t = c.BlockType
	case ChunkTextDelta:
		t = TypeText
	case ChunkReasoningDelta:
		t = TypeReasoning
	case ChunkToolCallDelta:
		t = TypeToolCall
	case ChunkBlockEnd:
		if c.Block == nil {
			return nil
		}
		t = c.Block.Type
	default:
		return nil
	}
	p := &refPartial{index: index, block: Block{Type: t}}
	a.parts = append(a.parts, p)
	return p
}

// Finish returns the stream's finish; a stream without one counts as stop.
func (a *refAssembler) Finish() Finish {
	if a.finish == nil {
		return Finish{Kind: FinishStop}
	}
	return *a.finish
}

// Usage returns the last usage chunk seen, or nil.
func (a *refAssembler) Usage() *Usage { return a.usage }

// Blocks returns the assembled blocks. On a max-tokens finish every tool call
// is dropped: a truncated call cannot be executed safely. A tool call without
// an id is named call-<index>, and one whose id an earlier call of the
// message already has is renamed <id>-<n> with the first free n from 2: a
// model that repeats an id still gets one result per call, and the next
// request pairs each result with its own call, as the API requires.
func (a *refAssembler) Blocks() []Block {
	dropCalls := a.finish != nil && a.finish.Kind == FinishMaxTokens
	out := make([]Block, 0, len(a.parts))
	var ids map[string]bool
	for _, p := range a.parts {
		b := p.built()
		if b.Type == TypeToolCall {
			if dropCalls {
				continue
			}
			if ids == nil {
				ids = map[string]bool{}
			}
			for n, id := 2, b.ID; ids[b.ID]; n++ {
				b.ID = fmt.Sprintf("%s-%d", id, n)
			}
			ids[b.ID] = true
		}
		out = append(out, b)
	}
	return out
}

// Interrupted returns what a cancelled stream showed: its text and reasoning
// blocks with visible content, without tool calls.
func (a *refAssembler) Interrupted() []Block {
	var out []Block
	for _, p := range a.parts {
		b := p.built()
		if (b.Type == TypeText || b.Type == TypeReasoning) && strings.TrimSpace(b.Text) != "" {
			out = append(out, b)
		}
	}
	return out
}

func (p *refPartial) built() Block {
	b := p.block
	switch b.Type {
	case TypeText, TypeReasoning:
		if !p.final {
			b.Text = p.text.String()
		}
	case TypeToolCall:
		if !p.final {
			b.Arguments = p.args.String()
		}
		if b.ID == "" {
			b.ID = fmt.Sprintf("call-%d", p.index)
		}
	}
	return b
}

// chunksOf draws a stream of chunks from data: few indexes and short texts,
// so that blocks meet, repeat ids, end early or never.
func chunksOf(data []byte) []Chunk {
	texts := []string{"", "a", "bc", " ", "x"}
	ids := []string{"", "c1", "c1-2", "c2"}
	types := []BlockType{TypeText, TypeReasoning, TypeToolCall, TypeImage}
	var out []Chunk
	for len(data) >= 3 {
		op, idx, arg := data[0], int(data[1]%4), int(data[2])
		data = data[3:]
		switch op % 9 {
		case 0:
			out = append(out, Chunk{Type: ChunkBlockStart, Index: idx, BlockType: types[arg%len(types)]})
		case 1:
			out = append(out, Chunk{Type: ChunkTextDelta, Index: idx, Text: texts[arg%len(texts)]})
		case 2:
			out = append(out, Chunk{Type: ChunkReasoningDelta, Index: idx, Text: texts[arg%len(texts)]})
		case 3:
			out = append(out, Chunk{Type: ChunkToolCallDelta, Index: idx, ID: ids[arg%len(ids)], Name: texts[arg/8%len(texts)], ArgumentsDelta: texts[arg/32%len(texts)]})
		case 4:
			out = append(out, Chunk{Type: ChunkBlockEnd, Index: idx})
		case 5:
			b := Block{Type: types[arg%len(types)], Text: texts[arg/4%len(texts)], ID: ids[arg/16%len(ids)], Arguments: texts[arg/64%len(texts)]}
			out = append(out, Chunk{Type: ChunkBlockEnd, Index: idx, Block: &b})
		case 6:
			out = append(out, Chunk{Type: ChunkUsage, Usage: &Usage{Input: int64(arg)}})
		case 7:
			kinds := []FinishKind{FinishStop, FinishToolCalls, FinishMaxTokens, FinishError, FinishAborted}
			out = append(out, Chunk{Type: ChunkFinish, Finish: &Finish{Kind: kinds[arg%len(kinds)]}})
		default:
			out = append(out, Chunk{Type: ChunkType("unknown"), Index: idx, Text: "u"})
		}
	}
	return out
}

// FuzzAssemblerMatchesReference: what the Assembler makes of any stream,
// read at any point and read again, is what integ's made.
func FuzzAssemblerMatchesReference(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 1, 1, 0, 2, 4, 0, 0, 7, 0, 0}, uint8(1))
	f.Add([]byte{3, 0, 1, 3, 1, 1, 3, 2, 0, 5, 3, 2, 7, 0, 2}, uint8(2))
	f.Add([]byte{1, 0, 1, 3, 0, 33, 2, 0, 2, 0, 1, 2, 5, 1, 70, 7, 0, 1}, uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, readAt uint8) {
		chunks := chunksOf(data)
		var got Assembler
		var want refAssembler
		var early, earlyWant []Block
		for i, c := range chunks {
			got.Add(c)
			want.Add(c)
			if i == int(readAt) {
				early, earlyWant = got.Blocks(), want.Blocks()
				if !reflect.DeepEqual(early, earlyWant) {
					t.Fatalf("Blocks after %d chunks: %+v, want %+v", i+1, early, earlyWant)
				}
			}
		}
		for range 2 {
			if g, w := got.Blocks(), want.Blocks(); !reflect.DeepEqual(g, w) {
				t.Fatalf("Blocks: %+v, want %+v", g, w)
			}
			if g, w := got.Interrupted(), want.Interrupted(); !reflect.DeepEqual(g, w) {
				t.Fatalf("Interrupted: %+v, want %+v", g, w)
			}
		}
		if got.Finish() != want.Finish() || got.Usage() != want.Usage() {
			t.Fatalf("Finish, Usage: %+v %v, want %+v %v", got.Finish(), got.Usage(), want.Finish(), want.Usage())
		}
		if earlyWant != nil && !reflect.DeepEqual(early, earlyWant) { // the slice first returned, read again
			t.Fatalf("what was read changed: %+v, want %+v", early, earlyWant)
		}
	})
}
