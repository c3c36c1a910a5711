package session

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
)

// MinShared is the length from which a text of a model's answer is stored
// once. A streamed block reaches the log as its deltas, then whole in its
// block-end chunk, then in the assistant message, and a tool call's
// arguments once more in tool/call; a Compactor writes the later copies
// of a text this long as references to the earlier, and Expand restores
// them when the log is read. Shorter texts are stored as they are.
const MinShared = 4 << 10

// The stored form of a shared text. Only stored logs carry these markers:
// Expand clears them, so no event in memory has one.
//
//   - AssistantChunk.BlockFromDeltas: the block-end's Block has no text
//     (or, for a tool call, no arguments): it is its block's deltas joined.
//   - AssistantMessage.SharedBlocks: each listed block of the message has
//     no text (or arguments): it is the joined deltas of the named chunk
//     index of the same step.
//   - ToolCall.ArgumentsInMessage: no arguments: they are those of the call
//     with the same id in the step's assistant message.

// SharedBlock says that block Block of an assistant message holds the
// joined deltas of chunk index Chunk of its step.
type SharedBlock struct {
	Block int `json:"block"`
	Chunk int `json:"chunk"`
}

// deltaPiece is one stored delta of the current step.
type deltaPiece struct {
	index   int
	text    string
	invalid bool // not valid UTF-8, so not stored as it is: never shared
}

// stepTexts is what a Compactor or Expand knows of the current step: its
// deltas, in order, the chunk indexes whose block ended, and its last
// assistant message.
type stepTexts struct {
	pieces  []deltaPiece
	ended   []int
	message []content.Block
}

// reset starts a new step; the old slices are left as they were, so a
// saved copy of the state stays valid.
func (st *stepTexts) reset() { *st = stepTexts{} }

func (st *stepTexts) isEnded(index int) bool { return slices.Contains(st.ended, index) }

// addDelta records a delta chunk's text, unless its block has ended;
// check marks text that is not valid UTF-8 (JSON would store it changed).
func (st *stepTexts) addDelta(c content.Chunk, check bool) {
	if !st.isEnded(c.Index) {
		text := deltaText(c)
		st.pieces = append(st.pieces, deltaPiece{c.Index, text, check && !utf8.ValidString(text)})
	}
}

// joinedEquals reports whether the deltas of index joined are s, without
// joining them, and all are stored as they are.
func (st *stepTexts) joinedEquals(index int, s string) bool {
	at := 0
	for _, p := range st.pieces {
		if p.index != index {
			continue
		}
		if p.invalid || len(p.text) > len(s)-at || s[at:at+len(p.text)] != p.text {
			return false
		}
		at += len(p.text)
	}
	return at == len(s)
}

// joined returns the deltas of index joined.
func (st *stepTexts) joined(index int) string {
	n, only := 0, -1
	for i, p := range st.pieces {
		if p.index == index {
			n += len(p.text)
			if only == -1 {
				only = i
			} else {
				only = -2
			}
		}
	}
	if only >= 0 {
		return st.pieces[only].text // one delta: shared, not copied
	}
	buf := make([]byte, 0, n)
	for _, p := range st.pieces {
		if p.index == index {
			buf = append(buf, p.text...)
		}
	}
	return string(buf)
}

// indexes lists the chunk indexes that have deltas, in first-seen order.
func (st *stepTexts) indexes() []int {
	var out []int
	for _, p := range st.pieces {
		if !slices.Contains(out, p.index) {
			out = append(out, p.index)
		}
	}
	return out
}

// bigText returns a block's text that may be shared: a text or reasoning
// block's text, a tool call's arguments.
func bigText(b content.Block) string {
	switch b.Type {
	case content.TypeText, content.TypeReasoning:
		return b.Text
	case content.TypeToolCall:
		return b.Arguments
	}
	return ""
}

// withBigText returns b with its shareable text set to s.
func withBigText(b content.Block, s string) content.Block {
	if b.Type == content.TypeToolCall {
		b.Arguments = s
	} else {
		b.Text = s
	}
	return b
}

// Compactor turns the events of one log, in order, into their stored form,
// in which a long text of a model's answer is stored once (see MinShared).
// A writer keeps one per log; it is not safe for concurrent use. It
// shares nothing before the first turn/start or step/start it sees, so a
// writer that continues an existing log never refers to events it did
// not write.
type Compactor struct {
	step   stepTexts
	active bool
}

// CompactorState is a Compactor's state, saved to roll back a failed
// write.
type CompactorState struct {
	step   stepTexts
	active bool
}

// Save returns the state to Restore after a failed write.
func (c *Compactor) Save() CompactorState { return CompactorState{c.step, c.active} }

// Restore returns to a saved state.
func (c *Compactor) Restore(s CompactorState) { c.step, c.active = s.step, s.active }

// Compact returns e as it is to be stored: e itself, or a copy whose long
// texts refer to earlier events of the log.
func (c *Compactor) Compact(e Event) Event {
	st := &c.step
	switch e.Data.(type) {
	case TurnStart:
		st.reset()
		c.active = true
	case Step:
		if e.Type == TypeStepStart {
			st.reset()
			c.active = true
		}
	}
	if !c.active {
		return e
	}
	switch d := e.Data.(type) {
	case AssistantChunk:
		ch := d.Chunk
		switch ch.Type {
		case content.ChunkTextDelta, content.ChunkReasoningDelta, content.ChunkToolCallDelta:
			st.addDelta(ch, true)
		case content.ChunkBlockEnd:
			if st.isEnded(ch.Index) {
				break
			}
			st.ended = append(st.ended, ch.Index)
			if ch.Block == nil || d.BlockFromDeltas {
				break
			}
			if s := bigText(*ch.Block); len(s) >= MinShared && st.joinedEquals(ch.Index, s) {
				b := withBigText(*ch.Block, "")
				d.Chunk.Block, d.BlockFromDeltas = &b, true
				e.Data = d
			}
		}
	case AssistantMessage:
		st.message = d.Message.Content
		var shared []SharedBlock
		var blocks []content.Block
		for i, b := range d.Message.Content {
			s := bigText(b)
			if len(s) < MinShared {
				continue
			}
			for _, index := range st.indexes() {
				if st.joinedEquals(index, s) {
					if blocks == nil {
						blocks = append([]content.Block(nil), d.Message.Content...)
					}
					blocks[i] = withBigText(b, "")
					shared = append(shared, SharedBlock{Block: i, Chunk: index})
					break
				}
			}
		}
		if shared != nil && d.SharedBlocks == nil {
			d.Message.Content, d.SharedBlocks = blocks, shared
			e.Data = d
		}
	case ToolCall:
		if len(d.Arguments) < MinShared || d.ArgumentsInMessage {
			break
		}
		for _, b := range st.message {
			if b.Type == content.TypeToolCall && b.ID == d.CallID {
				if b.Arguments == d.Arguments {
					d.Arguments, d.ArgumentsInMessage = "", true
					e.Data = d
				}
				break
			}
		}
	}
	return e
}

// Expand restores, in place, the texts a Compactor stored once, so that
// events read from a log are the events that were appended. A reference
// that leads nowhere is an error.
func Expand(events []Event) error {
	var st stepTexts
	texts := map[int]string{} // the step's joined deltas, built once each
	joined := func(index int) string {
		s, ok := texts[index]
		if !ok {
			s = st.joined(index)
			texts[index] = s
		}
		return s
	}
	for i := range events {
		e := &events[i]
		switch d := e.Data.(type) {
		case TurnStart:
			st.reset()
			clear(texts)
		case Step:
			if e.Type == TypeStepStart {
				st.reset()
				clear(texts)
			}
		case AssistantChunk:
			ch := d.Chunk
			switch ch.Type {
			case content.ChunkTextDelta, content.ChunkReasoningDelta, content.ChunkToolCallDelta:
				st.addDelta(ch, false)
				delete(texts, ch.Index)
			case content.ChunkBlockEnd:
				if d.BlockFromDeltas {
					if ch.Block == nil || st.isEnded(ch.Index) || !slices.Contains(st.indexes(), ch.Index) {
						return expandError(e, "a block-end refers to deltas it cannot have")
					}
					b := withBigText(*ch.Block, joined(ch.Index))
					d.Chunk.Block, d.BlockFromDeltas = &b, false
					e.Data = d
				}
				if !st.isEnded(ch.Index) {
					st.ended = append(st.ended, ch.Index)
				}
			}
		case AssistantMessage:
			for _, sb := range d.SharedBlocks {
				if sb.Block < 0 || sb.Block >= len(d.Message.Content) || !slices.Contains(st.indexes(), sb.Chunk) {
					return expandError(e, fmt.Sprintf("shared block %d of chunk %d does not exist", sb.Block, sb.Chunk))
				}
				d.Message.Content[sb.Block] = withBigText(d.Message.Content[sb.Block], joined(sb.Chunk))
			}
			if d.SharedBlocks != nil {
				d.SharedBlocks = nil
				e.Data = d
			}
			st.message = d.Message.Content
		case ToolCall:
			if !d.ArgumentsInMessage {
				break
			}
			found := false
			for _, b := range st.message {
				if b.Type == content.TypeToolCall && b.ID == d.CallID {
					d.Arguments, found = b.Arguments, true
					break
				}
			}
			if !found {
				return expandError(e, fmt.Sprintf("tool call %q is not in the step's assistant message", d.CallID))
			}
			d.ArgumentsInMessage = false
			e.Data = d
		}
	}
	return nil
}

func expandError(e *Event, msg string) error {
	return errorf(CodeCorrupt, "event %d (%s): %s", e.Seq, e.Type, msg)
}
