package openai

import (
	"cmp"
	"encoding/json"
	"errors"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
)

// The chat-completions request body. Optional fields are omitted, never null.
type (
	wireRequest struct {
		Model         string        `json:"model"`
		Messages      []wireMessage `json:"messages"`
		Stream        bool          `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Tools           []wireTool    `json:"tools,omitempty"`
		MaxTokens       int           `json:"max_tokens,omitempty"`
		MaxCompletion   int           `json:"max_completion_tokens,omitempty"`
		Temperature     *float64      `json:"temperature,omitempty"`
		Thinking        *wireThinking `json:"thinking,omitempty"`
		ReasoningEffort string        `json:"reasoning_effort,omitempty"`
	}
	wireThinking struct {
		Type string `json:"type"`
	}
	wireMessage struct {
		Role    string `json:"role"`
		Content string `json:"content"`
		// ReasoningContent is omitted when nil; see Config.PassBackReasoning.
		ReasoningContent *string        `json:"reasoning_content,omitempty"`
		ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
		ToolCallID       string         `json:"tool_call_id,omitempty"`
	}
	wireToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	wireTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
)

// body serializes req and returns it with the model it names.
func (m *Model) body(req *llm.Request) ([]byte, string, error) {
	w := wireRequest{Model: cmp.Or(req.Model, m.cfg.Model), Messages: messages(req, m.cfg.PassBackReasoning), Stream: true,
		MaxTokens: cmp.Or(req.MaxTokens, m.cfg.MaxTokens), Temperature: req.Temperature, ReasoningEffort: m.cfg.ReasoningEffort}
	if m.cfg.Thinking != "" {
		w.Thinking = &wireThinking{Type: m.cfg.Thinking}
	}
	if m.cfg.MaxCompletionTokens {
		w.MaxTokens, w.MaxCompletion = 0, w.MaxTokens
	}
	if w.Model == "" {
		return nil, "", errors.New("no model named by the request or the configuration")
	}
	w.StreamOptions.IncludeUsage = true
	for _, t := range req.Tools {
		var wt wireTool
		wt.Type = "function"
		wt.Function.Name, wt.Function.Description = t.Name, t.Description
		wt.Function.Parameters = t.Parameters
		if len(wt.Function.Parameters) == 0 {
			wt.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		w.Tools = append(w.Tools, wt)
	}
	b, err := json.Marshal(w)
	return b, w.Model, err
}

// messages maps the system prompt and conversation to chat messages. An
// assistant message carries its reasoning when it has some, and, with
// passBack, as "" when it made tool calls without any.
func messages(req *llm.Request, passBack bool) []wireMessage {
	var out []wireMessage
	if req.System != "" {
		out = append(out, wireMessage{Role: "system", Content: req.System})
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case content.RoleSystem:
			out = append(out, wireMessage{Role: "system", Content: content.JoinText(msg.Content)})
		case content.RoleUser:
			var results []wireMessage
			hasText := false
			for _, b := range msg.Content {
				switch b.Type {
				case content.TypeText:
					hasText = true
				case content.TypeToolResult:
					results = append(results, wireMessage{Role: "tool", ToolCallID: b.ToolCallID,
						Content: cmp.Or(content.JoinText(b.Content), "(no output)")})
				}
			}
			if hasText || len(results) == 0 {
				out = append(out, wireMessage{Role: "user", Content: content.JoinText(msg.Content)})
			}
			out = append(out, results...)
		case content.RoleAssistant:
			w := wireMessage{Role: "assistant", Content: content.JoinText(msg.Content)}
			calls := content.ToolCalls(msg.Content)
			if r := content.JoinReasoning(msg.Content); r != "" || (passBack && len(calls) > 0) {
				w.ReasoningContent = &r
			}
			for _, b := range calls {
				args := b.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: b.ID, Type: "function",
					Function: wireFunction{Name: b.Name, Arguments: args}})
			}
			out = append(out, w)
		}
	}
	return out
}
