// Package content is the conversation vocabulary every layer of dsh shares:
// content blocks, messages, streaming chunks, token usage and model failures.
package content

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// BlockType discriminates a Block. The set is open: serializers skip types
// they do not know instead of rejecting them.
type BlockType string

// The block types dsh knows.
const (
	TypeText       BlockType = "text"
	TypeReasoning  BlockType = "reasoning"
	TypeToolCall   BlockType = "tool-call"
	TypeToolResult BlockType = "tool-result"
	TypeImage      BlockType = "image"
)

// Block is one piece of message content. Which fields are meaningful depends
// on Type: Text (and Signature) for text and reasoning; ID, Name and Arguments for a tool
// call; ToolCallID, Content and IsError for a tool result; Image for an image.
type Block struct {
	Type BlockType `json:"type"`
	Text string    `json:"text,omitempty"`

	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"` // raw JSON exactly as the model produced it

	ToolCallID string  `json:"toolCallId,omitempty"`
	Content    []Block `json:"content,omitempty"`
	IsError    bool    `json:"isError,omitempty"`

	Image *ImageRef `json:"attachment,omitempty"`

	// Signature is a reasoning block's opaque proof from the model that
	// made it (Anthropic's thinking signature; for a redacted block, whose
	// Text is empty, its encrypted data), sent back with the block.
	Signature string `json:"signature,omitempty"`
}

// ImageRef is a durable, content-addressed reference to an image.
type ImageRef struct {
	ID        string `json:"id"` // "sha256:…"
	MediaType string `json:"mediaType"`
	Bytes     int64  `json:"bytes,omitempty"`
	Width     int    `json:"width,omitempty"`
	Height    int    `json:"height,omitempty"`
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: TypeText, Text: s} }

// Reasoning returns a reasoning block.
func Reasoning(s string) Block { return Block{Type: TypeReasoning, Text: s} }

// ToolCall returns a tool-call block; arguments is raw JSON text.
func ToolCall(id, name, arguments string) Block {
	return Block{Type: TypeToolCall, ID: id, Name: name, Arguments: arguments}
}

// ToolResult returns a tool-result block answering the call id.
func ToolResult(callID string, blocks []Block, isError bool) Block {
	return Block{Type: TypeToolResult, ToolCallID: callID, Content: blocks, IsError: isError}
}

// JoinText concatenates the text of every text block, in order.
func JoinText(blocks []Block) string { return join(blocks, TypeText) }

// JoinReasoning concatenates the text of every reasoning block, in order.
func JoinReasoning(blocks []Block) string { return join(blocks, TypeReasoning) }

func join(blocks []Block, t BlockType) string {
	switch n := countType(blocks, t); n {
	case 0:
		return ""
	case 1:
		for _, b := range blocks {
			if b.Type == t {
				return b.Text
			}
		}
	}
	size := 0
	for _, b := range blocks {
		if b.Type == t {
			size += len(b.Text)
		}
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, b := range blocks {
		if b.Type == t {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

func countType(blocks []Block, t BlockType) int {
	n := 0
	for _, b := range blocks {
		if b.Type == t {
			n++
		}
	}
	return n
}

// ToolCalls returns the tool-call blocks among blocks. When they follow
// one another (as they do in most messages) the result is a part of blocks,
// not a copy: the caller must not change it.
func ToolCalls(blocks []Block) []Block {
	first, last, n := -1, -1, 0
	for i, b := range blocks {
		if b.Type == TypeToolCall {
			if first < 0 {
				first = i
			}
			last, n = i, n+1
		}
	}
	switch {
	case n == 0:
		return nil
	case last-first+1 == n:
		return blocks[first : last+1 : last+1]
	}
	calls := make([]Block, 0, n)
	for _, b := range blocks {
		if b.Type == TypeToolCall {
			calls = append(calls, b)
		}
	}
	return calls
}

// HasVisibleText reports whether some text block holds non-whitespace text.
func HasVisibleText(blocks []Block) bool {
	for _, b := range blocks {
		if b.Type == TypeText && strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}

// Role is who a message speaks for.
type Role string

// The message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// SourceKind discriminates a Source.
type SourceKind string

// The message source kinds.
const (
	SourceUser   SourceKind = "user"
	SourcePlugin SourceKind = "plugin"
	SourceModel  SourceKind = "model"
	SourceTool   SourceKind = "tool"
)

// Source says where a message came from.
type Source struct {
	Kind     SourceKind `json:"kind"`
	Plugin   string     `json:"plugin,omitempty"`   // plugin source
	Form     string     `json:"form,omitempty"`     // plugin source: instructions, snapshot, notice, …
	Provider string     `json:"provider,omitempty"` // model source
	Model    string     `json:"model,omitempty"`    // model source
	CallID   string     `json:"callId,omitempty"`   // tool source
	// Sender is the session a relayed message comes from (plugin source:
	// a subagent's report or settlement notice, a parent's send_message).
	Sender string `json:"sender,omitempty"`
}

// Message is an immutable conversation message. Tool results travel as
// user-role messages holding exactly one tool-result block.
type Message struct {
	ID      string  `json:"id"`
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
	Source  Source  `json:"source"`
}

// NewID mints a fresh random message id: a version 4 UUID in its
// canonical text form (as uuid.NewString), made in one allocation.
func NewID() string {
	var u [16]byte
	rand.Read(u[:])         // never fails (crypto/rand)
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 4122
	var b [36]byte
	hex.Encode(b[:8], u[:4])
	hex.Encode(b[9:13], u[4:6])
	hex.Encode(b[14:18], u[6:8])
	hex.Encode(b[19:23], u[8:10])
	hex.Encode(b[24:], u[10:])
	b[8], b[13], b[18], b[23] = '-', '-', '-', '-'
	return string(b[:])
}

// UserMessage returns a user message with a fresh id.
func UserMessage(blocks ...Block) Message {
	return Message{ID: NewID(), Role: RoleUser, Content: blocks, Source: Source{Kind: SourceUser}}
}

// UserText returns a user message holding one text block.
func UserText(s string) Message { return UserMessage(Text(s)) }

// AssistantMessage returns an assistant message produced by provider/model.
func AssistantMessage(provider, model string, blocks []Block) Message {
	return Message{ID: NewID(), Role: RoleAssistant, Content: blocks,
		Source: Source{Kind: SourceModel, Provider: provider, Model: model}}
}

// ToolResultMessage returns the user-role message carrying one tool result.
func ToolResultMessage(callID string, blocks []Block, isError bool) Message {
	return Message{ID: NewID(), Role: RoleUser, Content: []Block{ToolResult(callID, blocks, isError)},
		Source: Source{Kind: SourceTool, CallID: callID}}
}

// ToolSpec is a tool as a model sees it: name, description and the JSON
// Schema of its arguments.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}
