// Package scripted is a deterministic llm.Model for tests and the offline
// demo: each Stream call plays the next entry of a script and records the
// request.
package scripted

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
)

// Entry is one scripted model call.
type Entry struct {
	// Chunks are streamed in order. A script that does not end with a
	// finish chunk gets a stop finish (unless Hang is set).
	Chunks []content.Chunk
	// Reply, when set, computes the chunks from the request instead.
	Reply func(req *llm.Request) []content.Chunk
	// Hang blocks after the chunks until the request is cancelled.
	Hang bool
}

// Model plays a script. It is safe for concurrent use; concurrent callers
// consume entries in arrival order.
type Model struct {
	mu       sync.Mutex
	entries  []Entry
	next     int
	requests []*llm.Request
	loop     bool
}

// New returns a model playing entries once each; a call past the end
// finishes with an error.
func New(entries ...Entry) *Model { return &Model{entries: entries} }

// Repeat returns a model that cycles through entries forever. It records no
// requests, so that it can serve benchmarks and long runs in constant memory.
func Repeat(entries ...Entry) *Model { return &Model{entries: entries, loop: true} }

// Requests returns the requests received so far.
func (m *Model) Requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*llm.Request(nil), m.requests...)
}

// Remaining returns how many entries have not been played.
func (m *Model) Remaining() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries) - m.next
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) {
		m.mu.Lock()
		if !m.loop {
			m.requests = append(m.requests, req)
		}
		if m.loop && m.next == len(m.entries) && len(m.entries) > 0 {
			m.next = 0
		}
		if m.next >= len(m.entries) {
			m.mu.Unlock()
			yield(llm.FinishError("SCRIPT_EXHAUSTED", "scripted model: no entry left for call %d", len(m.requests)))
			return
		}
		e := m.entries[m.next]
		m.next++
		m.mu.Unlock()
		chunks := e.Chunks
		if e.Reply != nil {
			chunks = e.Reply(req)
		}
		for _, c := range chunks {
			if ctx.Err() != nil {
				yield(llm.FinishAborted(context.Cause(ctx)))
				return
			}
			if !yield(c) || c.Type == content.ChunkFinish {
				return
			}
		}
		if e.Hang {
			<-ctx.Done()
			yield(llm.FinishAborted(context.Cause(ctx)))
			return
		}
		yield(finish(content.FinishStop))
	}
}

func finish(k content.FinishKind) content.Chunk {
	return content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: k}}
}

func usage() content.Chunk {
	return content.Chunk{Type: content.ChunkUsage, Usage: &content.Usage{Input: 10, Output: 5}}
}

// textChunks streams s as one text block at index in two deltas.
func textChunks(index int, s string) []content.Chunk {
	half := len(s) / 2
	for half > 0 && half < len(s) && !utf8Start(s[half]) {
		half++
	}
	b := content.Text(s)
	return []content.Chunk{
		{Type: content.ChunkBlockStart, Index: index, BlockType: content.TypeText},
		{Type: content.ChunkTextDelta, Index: index, Text: s[:half]},
		{Type: content.ChunkTextDelta, Index: index, Text: s[half:]},
		{Type: content.ChunkBlockEnd, Index: index, Block: &b},
	}
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Text is an entry answering s and finishing with stop.
func Text(s string) Entry {
	return Entry{Chunks: append(textChunks(0, s), usage(), finish(content.FinishStop))}
}

// MaxTokens is an entry answering s and finishing with max-tokens.
func MaxTokens(s string) Entry {
	return Entry{Chunks: append(textChunks(0, s), usage(), finish(content.FinishMaxTokens))}
}

// Call is one scripted tool call.
type Call struct {
	ID, Name, Arguments string
}

// ToolCalls is an entry that says text (when non-empty) and then calls the
// given tools, with each call's arguments split over two deltas.
func ToolCalls(text string, calls ...Call) Entry {
	var cs []content.Chunk
	idx := 0
	if text != "" {
		cs = append(cs, textChunks(0, text)...)
		idx = 1
	}
	for i, c := range calls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%s", i, c.Name)
		}
		half := len(c.Arguments) / 2
		for half > 0 && half < len(c.Arguments) && !utf8Start(c.Arguments[half]) {
			half++
		}
		b := content.ToolCall(id, c.Name, c.Arguments)
		cs = append(cs,
			content.Chunk{Type: content.ChunkBlockStart, Index: idx, BlockType: content.TypeToolCall},
			content.Chunk{Type: content.ChunkToolCallDelta, Index: idx, ID: id, Name: c.Name, ArgumentsDelta: c.Arguments[:half]},
			content.Chunk{Type: content.ChunkToolCallDelta, Index: idx, ArgumentsDelta: c.Arguments[half:]},
			content.Chunk{Type: content.ChunkBlockEnd, Index: idx, Block: &b})
		idx++
	}
	return Entry{Chunks: append(cs, usage(), finish(content.FinishToolCalls))}
}

// Hang is an entry that streams the partial text s, then blocks until the
// request is cancelled.
func Hang(s string) Entry {
	var cs []content.Chunk
	if s != "" {
		cs = []content.Chunk{
			{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeText},
			{Type: content.ChunkTextDelta, Index: 0, Text: s},
		}
	}
	return Entry{Chunks: cs, Hang: true}
}

// Fail is an entry whose call fails with code.
func Fail(code, msg string) Entry {
	return Entry{Chunks: []content.Chunk{llm.FinishError(code, "%s", msg)}}
}

// Echo is an entry answering with the last text block of the last user
// message (a child's task, not the instructions before it), prefixed with
// prefix.
func Echo(prefix string) Entry {
	return Entry{Reply: func(req *llm.Request) []content.Chunk {
		last := ""
		for _, m := range req.Messages {
			if m.Role == content.RoleUser && m.Source.Kind != content.SourceTool {
				last = lastText(m.Content)
			}
		}
		return append(textChunks(0, prefix+strings.TrimSpace(last)), usage(), finish(content.FinishStop))
	}}
}

// lastText is the text of the last text block.
func lastText(blocks []content.Block) string {
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].Type == content.TypeText {
			return blocks[i].Text
		}
	}
	return ""
}
