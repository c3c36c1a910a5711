package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/internal/sse"
)

// The stream's events (their data; the type is in the data too).
type (
	wireEvent struct {
		Type    string `json:"type"`
		Index   int    `json:"index"`
		Message *struct {
			Usage wireUsage `json:"usage"`
		} `json:"message"`
		ContentBlock *struct {
			Type string `json:"type"`
			ID   string `json:"id"`
			Name string `json:"name"`
			Data string `json:"data"`
		} `json:"content_block"`
		Delta *struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *wireUsage `json:"usage"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	wireUsage struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	}
)

// translator turns events into chunks; a block's index is the API's.
type translator struct {
	provider string
	blocks   map[int]*part
	order    []int
	usage    content.Usage
	input    int64 // the API's input_tokens
	reason   string
}

type part struct {
	block content.Block
	buf   strings.Builder
	ended bool
}

// decode reads the event stream from r and yields its chunks, ending with
// exactly one finish chunk unless yield stops it.
func decode(r io.Reader, provider string, yield func(content.Chunk) bool, interrupted func() (content.Chunk, bool)) {
	t := &translator{provider: provider, blocks: map[int]*part{}}
	sr := sse.NewReader(r)
	for {
		data, err := sr.Next()
		if err != nil {
			if c, ok := interrupted(); ok {
				yield(c)
				return
			}
			switch {
			case errors.Is(err, sse.ErrTooLarge):
				yield(llm.FinishError(llm.CodeMalformed, "%s: %v", provider, err))
			case err == io.EOF:
				yield(llm.FinishError(llm.CodeStreamClosed, "%s: the stream ended before message_stop", provider))
			default:
				yield(llm.FinishError(llm.CodeStreamClosed, "%s: reading the stream: %v", provider, err))
			}
			return
		}
		var ev wireEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			yield(llm.FinishError(llm.CodeMalformed, "%s: bad event: %v", provider, err))
			return
		}
		done, ok := t.event(&ev, yield)
		if !ok || done {
			return
		}
	}
}

// event handles one event; done is set once the finish was yielded.
func (t *translator) event(ev *wireEvent, yield func(content.Chunk) bool) (done, ok bool) {
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			t.addUsage(&ev.Message.Usage)
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return true, yield(llm.FinishError(llm.CodeMalformed, "%s: content_block_start without a block", t.provider))
		}
		return false, t.start(ev.Index, ev.ContentBlock.Type, ev.ContentBlock.ID, ev.ContentBlock.Name, ev.ContentBlock.Data, yield)
	case "content_block_delta":
		p := t.blocks[ev.Index]
		if p == nil || p.ended || ev.Delta == nil {
			return false, true
		}
		return false, t.delta(ev.Index, p, ev.Delta.Type, ev.Delta.Text, ev.Delta.Thinking, ev.Delta.Signature, ev.Delta.PartialJSON, yield)
	case "content_block_stop":
		p := t.blocks[ev.Index]
		if p == nil || p.ended {
			return false, true
		}
		return false, t.end(ev.Index, p, yield)
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			t.reason = ev.Delta.StopReason
		}
		if ev.Usage != nil {
			t.addUsage(ev.Usage)
		}
	case "message_stop":
		t.finish(yield)
		return true, true
	case "error":
		msg, kind := "(no message)", ""
		if ev.Error != nil {
			msg, kind = ev.Error.Message, ev.Error.Type
		}
		code := llm.CodeServer
		switch kind {
		case "overloaded_error":
			code = llm.CodeOverloaded
		case "rate_limit_error":
			code = llm.CodeRateLimit
		case "invalid_request_error":
			code = llm.CodeInvalidRequest
		}
		return true, yield(llm.FinishError(code, "%s: stream error: %s: %s", t.provider, kind, msg))
	}
	return false, true // ping, and event types added later
}

func (t *translator) addUsage(u *wireUsage) {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&t.input, u.InputTokens)
	set(&t.usage.Output, u.OutputTokens)
	set(&t.usage.CacheWrite, u.CacheCreationInputTokens)
	set(&t.usage.CacheRead, u.CacheReadInputTokens)
	// The API's input_tokens leaves out what was read from the cache and
	// what was written to it; dsh's Input leaves out only the reads, so
	// that budgets and usage lines count the writes (CacheWrite says how
	// many of Input they were).
	t.usage.Input = t.input + t.usage.CacheWrite
}

func (t *translator) start(i int, typ, id, name, data string, yield func(content.Chunk) bool) bool {
	if t.blocks[i] != nil {
		yield(llm.FinishError(llm.CodeMalformed, "%s: block %d started twice", t.provider, i))
		return false
	}
	p := &part{}
	switch typ {
	case "text":
		p.block.Type = content.TypeText
	case "thinking":
		p.block.Type = content.TypeReasoning
	case "redacted_thinking":
		p.block = content.Block{Type: content.TypeReasoning, Signature: data}
	case "tool_use":
		p.block = content.Block{Type: content.TypeToolCall, ID: id, Name: name}
	default:
		p.ended = true // a block type this adapter does not know is skipped
		t.blocks[i] = p
		return true
	}
	t.blocks[i] = p
	t.order = append(t.order, i)
	if !yield(content.Chunk{Type: content.ChunkBlockStart, Index: i, BlockType: p.block.Type}) {
		return false
	}
	if typ == "tool_use" {
		return yield(content.Chunk{Type: content.ChunkToolCallDelta, Index: i, ID: id, Name: name})
	}
	return true
}

func (t *translator) delta(i int, p *part, typ, text, thinking, signature, partial string, yield func(content.Chunk) bool) bool {
	switch typ {
	case "text_delta":
		p.buf.WriteString(text)
		return text == "" || yield(content.Chunk{Type: content.ChunkTextDelta, Index: i, Text: text})
	case "thinking_delta":
		p.buf.WriteString(thinking)
		return thinking == "" || yield(content.Chunk{Type: content.ChunkReasoningDelta, Index: i, Text: thinking})
	case "signature_delta":
		p.block.Signature += signature
	case "input_json_delta":
		p.buf.WriteString(partial)
		return partial == "" || yield(content.Chunk{Type: content.ChunkToolCallDelta, Index: i, ArgumentsDelta: partial})
	}
	return true
}

func (t *translator) end(i int, p *part, yield func(content.Chunk) bool) bool {
	p.ended = true
	b := p.block
	switch b.Type {
	case content.TypeToolCall:
		b.Arguments = p.buf.String()
		if strings.TrimSpace(b.Arguments) == "" {
			b.Arguments = "{}"
		}
	default:
		b.Text = p.buf.String()
	}
	p.block = b
	return yield(content.Chunk{Type: content.ChunkBlockEnd, Index: i, Block: &b})
}

// finish ends the blocks left open, then yields the usage and the finish.
func (t *translator) finish(yield func(content.Chunk) bool) {
	calls := false
	for _, i := range t.order {
		p := t.blocks[i]
		if !p.ended && !t.end(i, p, yield) {
			return
		}
		calls = calls || p.block.Type == content.TypeToolCall
	}
	if !t.usage.IsZero() && !yield(content.Chunk{Type: content.ChunkUsage, Usage: &t.usage}) {
		return
	}
	kind := content.FinishStop
	switch t.reason {
	case "end_turn", "stop_sequence", "pause_turn", "refusal", "":
		if len(t.order) == 0 {
			yield(llm.FinishError(llm.CodeEmptyResponse, "%s: the model returned no content", t.provider))
			return
		}
		if calls {
			kind = content.FinishToolCalls
		}
	case "tool_use":
		kind = content.FinishToolCalls
	case "max_tokens":
		kind = content.FinishMaxTokens
	default:
		yield(llm.FinishError(strings.ToUpper(t.reason), "%s: stop reason %q", t.provider, t.reason))
		return
	}
	yield(content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: kind}})
}
