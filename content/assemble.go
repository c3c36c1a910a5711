package content

import (
	"fmt"
	"strings"
)

// Assembler folds a stream of chunks into the blocks of one assistant
// message. Blocks keep the order in which their index was first seen;
// deltas after a block's end are ignored; delta-only streams assemble too.
// An Assembler must not be copied once used.
type Assembler struct {
	blocks []Block // in the order their index was first seen; few per message
	parts  []part  // blocks[i]'s stream state
	usage  *Usage
	finish *Finish
	handed bool // Blocks returned blocks: the next change copies them first

	// The first block and its state: an answer of one block (most are)
	// costs no allocation but the Assembler's.
	room     [1]Block
	roomPart [1]part
}

// part is the stream state of one block. A block's first delta is kept in
// the block itself (its Text, or its Arguments for a tool call's); a second
// delta starts a builder that holds them all.
type part struct {
	index      int
	text, args *strings.Builder
	ended      bool
	final      bool // the block is the authoritative block of its block-end
}

// Add feeds one chunk.
func (a *Assembler) Add(c Chunk) {
	switch c.Type {
	case ChunkUsage:
		a.usage = c.Usage
		return
	case ChunkFinish:
		a.finish = c.Finish
		return
	}
	i := a.slot(c.Index, c)
	if i < 0 || a.parts[i].ended {
		return
	}
	if a.handed { // the slice Blocks returned does not change
		a.blocks, a.handed = append([]Block(nil), a.blocks...), false
	}
	b, p := &a.blocks[i], &a.parts[i]
	switch c.Type {
	case ChunkTextDelta, ChunkReasoningDelta:
		p.text = addDelta(&b.Text, p.text, c.Text)
	case ChunkToolCallDelta:
		if c.ID != "" {
			b.ID = c.ID
		}
		if c.Name != "" {
			b.Name = c.Name
		}
		p.args = addDelta(&b.Arguments, p.args, c.ArgumentsDelta)
	case ChunkBlockEnd:
		if c.Block != nil {
			*b, p.final = *c.Block, true
		}
		p.ended = true
	}
}

// addDelta adds delta to a block's text: the first one is kept as it is
// in *first, the later ones join it in sb (made at the second), which it
// returns.
func addDelta(first *string, sb *strings.Builder, delta string) *strings.Builder {
	switch {
	case sb != nil:
		sb.WriteString(delta)
	case *first == "":
		*first = delta
	case delta != "":
		sb = new(strings.Builder)
		sb.Grow(len(*first) + len(delta))
		sb.WriteString(*first)
		sb.WriteString(delta)
	}
	return sb
}

// slot returns the position of index's block, made by c if it is the
// block's first chunk; -1 when c cannot start a block.
func (a *Assembler) slot(index int, c Chunk) int {
	for i := range a.parts {
		if a.parts[i].index == index {
			return i
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
			return -1
		}
		t = c.Block.Type
	default:
		return -1
	}
	if a.blocks == nil {
		a.blocks, a.parts = a.room[:0], a.roomPart[:0]
	}
	if a.handed {
		a.blocks, a.handed = append([]Block(nil), a.blocks...), false
	}
	a.blocks = append(a.blocks, Block{Type: t})
	a.parts = append(a.parts, part{index: index})
	return len(a.parts) - 1
}

// Finish returns the stream's finish; a stream without one counts as stop.
func (a *Assembler) Finish() Finish {
	if a.finish == nil {
		return Finish{Kind: FinishStop}
	}
	return *a.finish
}

// Usage returns the last usage chunk seen, or nil.
func (a *Assembler) Usage() *Usage { return a.usage }

// Blocks returns the assembled blocks. On a max-tokens finish every tool call
// is dropped: a truncated call cannot be executed safely. A tool call without
// an id is named call-<index>, and one whose id an earlier call of the
// message already has is renamed <id>-<n> with the first free n from 2: a
// model that repeats an id still gets one result per call, and the next
// request pairs each result with its own call, as the API requires. When
// no call needs a name, the blocks are the Assembler's own (a later Add
// copies them first): the caller must not change them.
func (a *Assembler) Blocks() []Block {
	a.build()
	out := a.blocks[:len(a.blocks):len(a.blocks)]
	switch {
	case a.finish != nil && a.finish.Kind == FinishMaxTokens && countType(out, TypeToolCall) > 0:
		kept := make([]Block, 0, len(out))
		for _, b := range out {
			if b.Type != TypeToolCall {
				kept = append(kept, b)
			}
		}
		return kept
	case !a.callsNamed():
		return a.nameCalls(append([]Block(nil), out...))
	case out == nil:
		return []Block{}
	}
	a.handed = true
	return out
}

// Interrupted returns what a cancelled stream showed: its text and reasoning
// blocks with visible content, without tool calls.
func (a *Assembler) Interrupted() []Block {
	a.build()
	var out []Block
	for _, b := range a.blocks {
		if (b.Type == TypeText || b.Type == TypeReasoning) && strings.TrimSpace(b.Text) != "" {
			out = append(out, b)
		}
	}
	return out
}

// build completes each block's text in place: its deltas joined, the text
// a block of its type does not carry cleared. A later build, after more
// deltas, completes them again.
func (a *Assembler) build() {
	for i := range a.blocks {
		b, p := &a.blocks[i], &a.parts[i]
		if p.final {
			continue
		}
		switch b.Type {
		case TypeText, TypeReasoning:
			if p.text != nil {
				b.Text = p.text.String()
			}
			b.Arguments = ""
		case TypeToolCall:
			if p.args != nil {
				b.Arguments = p.args.String()
			}
			b.Text = ""
		default:
			b.Text, b.Arguments = "", ""
		}
	}
}

// manyCalls is the number of tool calls of a message up to which
// callsNamed looks for a repeated id by a scan of the calls before.
const manyCalls = 8

// callsNamed reports whether every tool call has an id no other call has
// (false also for a message of more than manyCalls calls: nameCalls
// finds out).
func (a *Assembler) callsNamed() bool {
	calls := 0
	for i, b := range a.blocks {
		if b.Type != TypeToolCall {
			continue
		}
		if calls++; b.ID == "" || calls > manyCalls {
			return false
		}
		for _, e := range a.blocks[:i] {
			if e.Type == TypeToolCall && e.ID == b.ID {
				return false
			}
		}
	}
	return true
}

// nameCalls names, in out (a copy of the blocks), the tool calls without
// an id and renames repeated ids (see Blocks).
func (a *Assembler) nameCalls(out []Block) []Block {
	ids := map[string]bool{}
	for i := range out {
		b := &out[i]
		if b.Type != TypeToolCall {
			continue
		}
		if b.ID == "" {
			b.ID = fmt.Sprintf("call-%d", a.parts[i].index)
		}
		for n, id := 2, b.ID; ids[b.ID]; n++ {
			b.ID = fmt.Sprintf("%s-%d", id, n)
		}
		ids[b.ID] = true
	}
	return out
}
