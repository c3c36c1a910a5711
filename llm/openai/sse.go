package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	events "github.com/dsh-go/dsh/llm/internal/sse"
)

// The chat-completions stream chunk.
type (
	wireChunk struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content          string          `json:"content"`
				ReasoningContent string          `json:"reasoning_content"`
				ToolCalls        []wireToolDelta `json:"tool_calls"`
			} `json:"delta"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *wireUsage `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	wireToolDelta struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	wireUsage struct {
		PromptTokens         int64  `json:"prompt_tokens"`
		CompletionTokens     int64  `json:"completion_tokens"`
		PromptCacheHitTokens *int64 `json:"prompt_cache_hit_tokens"` // DeepSeek
		PromptTokensDetails  *struct {
			CachedTokens *int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
)

func (u *wireUsage) usage() *content.Usage {
	var cached int64
	if u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens != nil {
		cached = *u.PromptTokensDetails.CachedTokens
	} else if u.PromptCacheHitTokens != nil {
		cached = *u.PromptCacheHitTokens
	}
	out := &content.Usage{Input: max(u.PromptTokens-cached, 0), Output: u.CompletionTokens, CacheRead: cached}
	if u.CompletionTokensDetails != nil {
		out.Reasoning = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// decode translates a chat-completions SSE body into chunks. Unless yield
// returns false, it ends with exactly one finish chunk. interrupted, when
// non-nil, is consulted after every read; a finish it reports (caller abort,
// idle timeout) ends the stream.
func decode(r io.Reader, provider string, yield func(content.Chunk) bool, interrupted func() (content.Chunk, bool)) {
	sr := events.NewReader(r)
	t := translator{provider: provider, text: -1, reasoning: -1}
	for {
		data, err := sr.Next()
		if interrupted != nil {
			if c, ok := interrupted(); ok {
				yield(c)
				return
			}
		}
		switch {
		case err == io.EOF:
			yield(llm.FinishError(llm.CodeStreamClosed, "%s: stream ended before [DONE]", provider))
			return
		case errors.Is(err, events.ErrTooLarge):
			yield(llm.FinishError(llm.CodeMalformed, "%s: %v", provider, err))
			return
		case err != nil:
			yield(llm.FinishError(llm.CodeStreamClosed, "%s: stream broken: %v", provider, err))
			return
		case string(data) == "[DONE]":
			t.finish(yield)
			return
		}
		if !t.event(data, yield) {
			return
		}
	}
}

// translator turns stream chunks into content chunks: one block per content
// kind and per wire tool-call index, numbered in opening order.
type translator struct {
	provider        string
	parts           []*part
	text, reasoning int         // part index, -1 until opened
	calls           map[int]int // wire tool-call index → part index
	usage           *content.Usage
	reason          string
}

type part struct {
	block content.Block
	buf   strings.Builder // text, or tool-call arguments
}

// event handles one data payload; false means the stream has ended.
func (t *translator) event(data []byte, yield func(content.Chunk) bool) bool {
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		yield(llm.FinishError(llm.CodeMalformed, "%s: bad stream payload: %v", t.provider, err))
		return false
	}
	if c.Error != nil {
		yield(llm.FinishError(llm.CodeServer, "%s: stream error: %s", t.provider, c.Error.Message))
		return false
	}
	if c.Usage != nil {
		t.usage = c.Usage.usage()
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.FinishReason != "" {
			t.reason = ch.FinishReason
		}
		d := &ch.Delta
		if d.ReasoningContent != "" && !t.delta(&t.reasoning, content.TypeReasoning, content.ChunkReasoningDelta, d.ReasoningContent, yield) {
			return false
		}
		if d.Content != "" && !t.delta(&t.text, content.TypeText, content.ChunkTextDelta, d.Content, yield) {
			return false
		}
		for i := range d.ToolCalls {
			if !t.toolCall(&d.ToolCalls[i], yield) {
				return false
			}
		}
	}
	return true
}

func (t *translator) open(bt content.BlockType, yield func(content.Chunk) bool) (int, bool) {
	i := len(t.parts)
	t.parts = append(t.parts, &part{block: content.Block{Type: bt}})
	return i, yield(content.Chunk{Type: content.ChunkBlockStart, Index: i, BlockType: bt})
}

func (t *translator) delta(idx *int, bt content.BlockType, ct content.ChunkType, s string, yield func(content.Chunk) bool) bool {
	if *idx < 0 {
		var ok bool
		if *idx, ok = t.open(bt, yield); !ok {
			return false
		}
	}
	t.parts[*idx].buf.WriteString(s)
	return yield(content.Chunk{Type: ct, Index: *idx, Text: s})
}

func (t *translator) toolCall(d *wireToolDelta, yield func(content.Chunk) bool) bool {
	i, ok := t.calls[d.Index]
	if ok && d.ID != "" && t.parts[i].block.ID != "" && d.ID != t.parts[i].block.ID {
		ok = false // a new call reusing the index (providers that omit it)
	}
	if !ok {
		if i, ok = t.open(content.TypeToolCall, yield); !ok {
			return false
		}
		if t.calls == nil {
			t.calls = map[int]int{}
		}
		t.calls[d.Index] = i
	}
	p := t.parts[i]
	c := content.Chunk{Type: content.ChunkToolCallDelta, Index: i, ArgumentsDelta: d.Function.Arguments}
	if p.block.ID == "" {
		p.block.ID, c.ID = d.ID, d.ID
	}
	if p.block.Name == "" {
		p.block.Name, c.Name = d.Function.Name, d.Function.Name
	}
	p.buf.WriteString(d.Function.Arguments)
	if c.ID == "" && c.Name == "" && c.ArgumentsDelta == "" {
		return true
	}
	return yield(c)
}

// finish emits the deferred block ends, the usage and the finish chunk.
func (t *translator) finish(yield func(content.Chunk) bool) {
	calls := false
	for i, p := range t.parts {
		b := p.block
		switch b.Type {
		case content.TypeToolCall:
			calls = true
			b.Arguments = p.buf.String()
			if b.ID == "" {
				b.ID = fmt.Sprintf("call-%d", i)
			}
		default:
			b.Text = p.buf.String()
		}
		if !yield(content.Chunk{Type: content.ChunkBlockEnd, Index: i, Block: &b}) {
			return
		}
	}
	if t.usage != nil && !yield(content.Chunk{Type: content.ChunkUsage, Usage: t.usage}) {
		return
	}
	kind := content.FinishStop
	switch t.reason {
	case "", "stop":
		if len(t.parts) == 0 {
			yield(llm.FinishError(llm.CodeEmptyResponse, "%s: the model returned no content", t.provider))
			return
		}
		if t.reason == "" && calls {
			kind = content.FinishToolCalls
		}
	case "tool_calls", "function_call":
		kind = content.FinishToolCalls
	case "length":
		kind = content.FinishMaxTokens
	default:
		yield(llm.FinishError(strings.ToUpper(t.reason), "%s: finish reason %q", t.provider, t.reason))
		return
	}
	yield(content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: kind}})
}
