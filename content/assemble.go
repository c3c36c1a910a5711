package content

import (
	"fmt"
	"strings"
)

// Assembler folds a stream of chunks into the blocks of one assistant
// message. Blocks keep the order in which their index was first seen;
// deltas after a block's end are ignored; delta-only streams assemble too.
type Assembler struct {
	parts  []*partial // in the order their index was first seen; few per message
	usage  *Usage
	finish *Finish
}

type partial struct {
	index int
	block Block
	text  strings.Builder
	args  strings.Builder
	ended bool
	final bool // block holds the authoritative block of its block-end
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
			p.block, p.final = *c.Block, true
		}
		p.ended = true
	}
}

func (a *Assembler) slot(index int, c Chunk) *partial {
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
	p := &partial{index: index, block: Block{Type: t}}
	a.parts = append(a.parts, p)
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
// an id is named call-<index>, and one whose id an earlier call of the
// message already has is renamed <id>-<n> with the first free n from 2: a
// model that repeats an id still gets one result per call, and the next
// request pairs each result with its own call, as the API requires.
func (a *Assembler) Blocks() []Block {
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
func (a *Assembler) Interrupted() []Block {
	var out []Block
	for _, p := range a.parts {
		b := p.built()
		if (b.Type == TypeText || b.Type == TypeReasoning) && strings.TrimSpace(b.Text) != "" {
			out = append(out, b)
		}
	}
	return out
}

func (p *partial) built() Block {
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
