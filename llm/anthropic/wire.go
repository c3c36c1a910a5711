package anthropic

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
)

// MaxBreakpoints is the most cache_control breakpoints the API takes in
// one request.
const MaxBreakpoints = 4

// The Messages request body. Optional fields are omitted, never null.
type (
	wireRequest struct {
		Model       string        `json:"model"`
		MaxTokens   int           `json:"max_tokens"`
		System      []wireBlock   `json:"system,omitempty"`
		Messages    []wireMessage `json:"messages"`
		Tools       []wireTool    `json:"tools,omitempty"`
		Stream      bool          `json:"stream"`
		Temperature *float64      `json:"temperature,omitempty"`
		Thinking    *wireThinking `json:"thinking,omitempty"`
	}
	wireThinking struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens,omitempty"`
	}
	wireMessage struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	}
	// wireBlock is every kind of content block the adapter sends.
	wireBlock struct {
		Type string `json:"type"`
		Text string `json:"text,omitempty"`
		// thinking, redacted_thinking
		Thinking  *string `json:"thinking,omitempty"`
		Signature string  `json:"signature,omitempty"`
		Data      string  `json:"data,omitempty"`
		// tool_use
		ID    string          `json:"id,omitempty"`
		Name  string          `json:"name,omitempty"`
		Input json.RawMessage `json:"input,omitempty"`
		// tool_result
		ToolUseID string `json:"tool_use_id,omitempty"`
		Content   string `json:"content,omitempty"`
		IsError   bool   `json:"is_error,omitempty"`

		CacheControl *cacheControl `json:"cache_control,omitempty"`
	}
	wireTool struct {
		Name         string          `json:"name"`
		Description  string          `json:"description,omitempty"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl *cacheControl   `json:"cache_control,omitempty"`
	}
	cacheControl struct {
		Type string `json:"type"`
	}
)

// body serializes req and returns it with the model it names.
func (m *Model) body(req *llm.Request) ([]byte, string, error) {
	w := wireRequest{Model: cmp.Or(req.Model, m.cfg.Model), MaxTokens: cmp.Or(req.MaxTokens, m.cfg.MaxTokens), Stream: true,
		Messages: messages(req.Messages)}
	if w.Model == "" {
		return nil, "", errors.New("no model named by the request or the configuration")
	}
	if req.System != "" {
		w.System = []wireBlock{{Type: "text", Text: req.System}}
	}
	if m.cfg.Thinking == ThinkingEnabled {
		budget := cmp.Or(m.cfg.ThinkingBudget, max(w.MaxTokens/2, 1024))
		if budget >= w.MaxTokens {
			w.MaxTokens = budget + 1024 // the answer needs room past the thinking
		}
		w.Thinking = &wireThinking{Type: "enabled", BudgetTokens: budget}
	} else {
		w.Temperature = req.Temperature // the API refuses a temperature with thinking on
	}
	for _, t := range req.Tools {
		wt := wireTool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters}
		if len(wt.InputSchema) == 0 {
			wt.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		w.Tools = append(w.Tools, wt)
	}
	breakpoints(&w)
	b, err := json.Marshal(w)
	return b, w.Model, err
}

// breakpoints marks the cache prefixes the next requests will reuse, at
// most MaxBreakpoints:
//
//  1. the last tool: the tools, which a parent and the children it spawns
//     share when their tool sets are the same;
//  2. the system prompt: tools and system;
//  3. the end of the conversation: the whole prompt, which the next step
//     of this agent, and a child forked from it now, start with;
//  4. the end of the previous request's conversation (the message before
//     the last answer of the model): a cache entry an earlier request of
//     this agent wrote, or the parent's when this is a forked child's
//     first request, so that the read does not depend on the API's
//     lookback from breakpoint 3.
//
// Thinking blocks cannot carry a breakpoint; a message's last other block
// does.
func breakpoints(w *wireRequest) {
	eph := &cacheControl{Type: "ephemeral"}
	if n := len(w.Tools); n > 0 {
		w.Tools[n-1].CacheControl = eph
	}
	if n := len(w.System); n > 0 {
		w.System[n-1].CacheControl = eph
	}
	last := len(w.Messages) - 1
	if last < 0 {
		return
	}
	mark(&w.Messages[last], eph)
	for i := last - 1; i > 0; i-- {
		if w.Messages[i].Role == "assistant" {
			mark(&w.Messages[i-1], eph)
			break
		}
	}
}

// mark sets a breakpoint on the last block of msg that may carry one.
func mark(msg *wireMessage, cc *cacheControl) {
	for i := len(msg.Content) - 1; i >= 0; i-- {
		if t := msg.Content[i].Type; t != "thinking" && t != "redacted_thinking" {
			msg.Content[i].CacheControl = cc
			return
		}
	}
}

// messages maps the conversation to the API's: roles alternate, starting
// with the user (consecutive messages of a role are merged; dsh's own
// system notices are user text); a user message puts its tool results
// first; an assistant message keeps its thinking blocks that carry a
// signature, in order, and drops those that do not (another route's
// reasoning, or one cut short), which the API would refuse.
func messages(msgs []content.Message) []wireMessage {
	var out []wireMessage
	add := func(role string, blocks []wireBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			if role == "user" { // results first, as the API requires after a tool_use
				all := append(slices.Clone(out[n-1].Content), blocks...)
				out[n-1].Content = append(results(all), others(all)...)
				return
			}
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, wireMessage{Role: role, Content: blocks})
	}
	for _, msg := range msgs {
		switch msg.Role {
		case content.RoleSystem:
			if t := content.JoinText(msg.Content); strings.TrimSpace(t) != "" {
				add("user", []wireBlock{{Type: "text", Text: t}})
			}
		case content.RoleUser:
			add("user", userBlocks(msg.Content))
		case content.RoleAssistant:
			add("assistant", assistantBlocks(msg.Content))
		}
	}
	if len(out) > 0 && out[0].Role != "user" {
		out = append([]wireMessage{{Role: "user", Content: []wireBlock{{Type: "text", Text: "(continued)"}}}}, out...)
	}
	return out
}

func userBlocks(blocks []content.Block) []wireBlock {
	var rs, texts []wireBlock
	for _, b := range blocks {
		switch b.Type {
		case content.TypeText:
			if strings.TrimSpace(b.Text) != "" {
				texts = append(texts, wireBlock{Type: "text", Text: b.Text})
			}
		case content.TypeToolResult:
			rs = append(rs, wireBlock{Type: "tool_result", ToolUseID: b.ToolCallID,
				Content: cmp.Or(content.JoinText(b.Content), "(no output)"), IsError: b.IsError})
		}
	}
	return append(rs, texts...)
}

func assistantBlocks(blocks []content.Block) []wireBlock {
	var out []wireBlock
	for _, b := range blocks {
		switch b.Type {
		case content.TypeReasoning:
			switch {
			case b.Signature == "":
			case b.Text == "":
				out = append(out, wireBlock{Type: "redacted_thinking", Data: b.Signature})
			default:
				text := b.Text
				out = append(out, wireBlock{Type: "thinking", Thinking: &text, Signature: b.Signature})
			}
		case content.TypeText:
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, wireBlock{Type: "text", Text: b.Text})
			}
		case content.TypeToolCall:
			out = append(out, wireBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: input(b.Arguments)})
		}
	}
	return out
}

// input is a tool call's arguments as the object the API wants: {} for
// empty or unparsable ones.
func input(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(args)
}

func results(bs []wireBlock) []wireBlock {
	var out []wireBlock
	for _, b := range bs {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

func others(bs []wireBlock) []wireBlock {
	var out []wireBlock
	for _, b := range bs {
		if b.Type != "tool_result" {
			out = append(out, b)
		}
	}
	return out
}
