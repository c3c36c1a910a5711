package content

import (
	"fmt"
	"strings"
)

// Assembler folds a stream of chunks into the blocks of one assistant
// message. Blocks keep the order in which their index was first seen;
// deltas after a block's end are ignored; delta-only streams assemble too.
type Assembler struct {
	order  []int
	blocks map[int]*partial
	usage  *Usage
	finish *Finish
}

type partial struct {
	block Block
	text  strings.Builder
	args  strings.Builder
	ended bool
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
			p.block = *c.Block
			p.text.Reset()
			p.args.Reset()
			p.text.WriteString(c.Block.Text)
			p.args.WriteString(c.Block.Arguments)
		}
		p.ended = true
	}
}

func (a *Assembler) slot(index int, c Chunk) *partial {
	if p, ok := a.blocks[index]; ok {
		return p
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
	if a.blocks == nil {
		a.blocks = make(map[int]*partial, 2)
	}
	p := &partial{block: Block{Type: t}}
	a.blocks[index] = p
	a.order = append(a.order, index)
	return p
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
// an id is named call-<index>.
func (a *Assembler) Blocks() []Block {
	dropCalls := a.finish != nil && a.finish.Kind == FinishMaxTokens
	out := make([]Block, 0, len(a.order))
	for _, i := range a.order {
		b := a.built(i)
		if b.Type == TypeToolCall && dropCalls {
			continue
		}
		out = append(out, b)
	}
	return out
}

// Interrupted returns what a cancelled stream showed: its text and reasoning
// blocks with visible content, without tool calls.
func (a *Assembler) Interrupted() []Block {
	var out []Block
	for _, i := range a.order {
		b := a.built(i)
		if (b.Type == TypeText || b.Type == TypeReasoning) && strings.TrimSpace(b.Text) != "" {
			out = append(out, b)
		}
	}
	return out
}

func (a *Assembler) built(i int) Block {
	p := a.blocks[i]
	b := p.block
	switch b.Type {
	case TypeText, TypeReasoning:
		b.Text = p.text.String()
	case TypeToolCall:
		b.Arguments = p.args.String()
		if b.ID == "" {
			b.ID = fmt.Sprintf("call-%d", i)
		}
	}
	return b
}
