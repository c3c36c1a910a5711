package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
)

// MaxLine bounds one stream-json line from Claude Code, in bytes. A longer
// line fails the run instead of being buffered.
const MaxLine = 16 << 20

// Message types and subtypes of the stream-json protocol.
const (
	typeSystem          = "system"
	typeAssistant       = "assistant"
	typeUser            = "user"
	typeResult          = "result"
	typeControlRequest  = "control_request"
	typeControlResponse = "control_response"

	subtypeInit      = "init"
	subtypeSuccess   = "success"
	subtypeCanUse    = "can_use_tool"
	subtypeInterrupt = "interrupt"
)

// message is one line from Claude Code. Only the fields the provider reads
// are declared; the rest of each type's fields are ignored.
type message struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`

	// system/init
	Model     string `json:"model"`
	SessionID string `json:"session_id"`

	// assistant and user
	Message           *apiMessage `json:"message"`
	ParentToolUseID   *string     `json:"parent_tool_use_id"`
	IsAPIErrorMessage bool        `json:"is_api_error_message"`

	// result
	IsError        bool                  `json:"is_error"`
	Result         string                `json:"result"`
	NumTurns       int                   `json:"num_turns"`
	TotalCostUSD   *float64              `json:"total_cost_usd"`
	Usage          *apiUsage             `json:"usage"`
	ModelUsage     map[string]modelUsage `json:"modelUsage"`
	TerminalReason string                `json:"terminal_reason"`
	APIErrorStatus *int                  `json:"api_error_status"`
	APIError       string                `json:"api_error"`
	Errors         []string              `json:"errors"`

	// control_request (from Claude Code)
	RequestID string          `json:"request_id"`
	Request   *controlRequest `json:"request"`
}

// apiMessage is the Anthropic message an assistant or user line carries.
type apiMessage struct {
	ID      string            `json:"id"`
	Model   string            `json:"model"`
	Content []json.RawMessage `json:"content"` // decoded block by block, tolerantly
}

// block is one content block of an apiMessage.
type block struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	ID        string `json:"id"`   // tool_use
	Name      string `json:"name"` // tool_use
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
}

// apiUsage is the Anthropic usage of a result line.
type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// modelUsage is one model's entry in a result's modelUsage.
type modelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	ThinkingTokens           int64   `json:"thinkingTokens"`
	CostUSD                  float64 `json:"costUSD"`
}

// controlRequest is the request of a control_request line.
type controlRequest struct {
	Subtype   string          `json:"subtype"`
	ToolName  string          `json:"tool_name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}

// decode parses one line. It reports false for a line that is not a JSON
// object with a type; a field of an unexpected JSON type is left zero
// rather than losing the message.
func decode(line []byte) (message, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return message{}, false
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			return message{}, false
		}
	}
	return m, m.Type != ""
}

// blocks decodes the content blocks of m, skipping malformed ones.
func (m *apiMessage) blocks() []block {
	if m == nil {
		return nil
	}
	out := make([]block, 0, len(m.Content))
	for _, raw := range m.Content {
		var b block
		if err := json.Unmarshal(raw, &b); err != nil {
			var typeErr *json.UnmarshalTypeError
			if !errors.As(err, &typeErr) {
				continue
			}
		}
		out = append(out, b)
	}
	return out
}

// Lines the provider sends.

type userLine struct {
	Type            string      `json:"type"`
	Message         userMessage `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
}

type userMessage struct {
	Role    string      `json:"role"`
	Content []textBlock `json:"content"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type controlRequestLine struct {
	Type      string         `json:"type"`
	RequestID string         `json:"request_id"`
	Request   map[string]any `json:"request"`
}

type controlResponseLine struct {
	Type     string          `json:"type"`
	Response controlResponse `json:"response"`
}

type controlResponse struct {
	Subtype   string `json:"subtype"` // "success" or "error"
	RequestID string `json:"request_id"`
	Response  any    `json:"response,omitempty"`
	Error     string `json:"error,omitempty"`
}

// permissionAllow and permissionDeny answer can_use_tool.
type permissionAllow struct {
	Behavior     string          `json:"behavior"` // "allow"
	UpdatedInput json.RawMessage `json:"updatedInput"`
}

type permissionDeny struct {
	Behavior  string `json:"behavior"` // "deny"
	Message   string `json:"message"`
	Interrupt bool   `json:"interrupt,omitempty"`
}

// encode marshals v as one line; nil if it cannot (the writer skips nil).
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return append(b, '\n')
}

func userPrompt(texts []string) []byte {
	content := make([]textBlock, 0, len(texts))
	for _, t := range texts {
		content = append(content, textBlock{Type: "text", Text: t})
	}
	return encode(userLine{Type: typeUser, Message: userMessage{Role: "user", Content: content}})
}

func interruptRequest(id string) []byte {
	return encode(controlRequestLine{Type: typeControlRequest, RequestID: id, Request: map[string]any{"subtype": subtypeInterrupt}})
}

func controlSuccess(id string, response any) []byte {
	return encode(controlResponseLine{Type: typeControlResponse, Response: controlResponse{Subtype: "success", RequestID: id, Response: response}})
}

func controlFailure(id, msg string) []byte {
	return encode(controlResponseLine{Type: typeControlResponse, Response: controlResponse{Subtype: "error", RequestID: id, Error: msg}})
}
