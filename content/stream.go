package content

import "fmt"

// ChunkType discriminates a Chunk of a model stream.
type ChunkType string

// The stream chunk types.
const (
	ChunkBlockStart     ChunkType = "block-start"
	ChunkTextDelta      ChunkType = "text-delta"
	ChunkReasoningDelta ChunkType = "reasoning-delta"
	ChunkToolCallDelta  ChunkType = "tool-call-delta"
	ChunkBlockEnd       ChunkType = "block-end"
	ChunkUsage          ChunkType = "usage"
	ChunkFinish         ChunkType = "finish"
)

// Chunk is one element of a model's streamed answer. A stream is a sequence
// of chunks ending with exactly one finish chunk; nothing follows it.
type Chunk struct {
	Type      ChunkType `json:"type"`
	Index     int       `json:"index"`
	BlockType BlockType `json:"blockType,omitempty"` // block-start
	Text      string    `json:"text,omitempty"`      // text-delta, reasoning-delta
	// tool-call-delta
	ID             string `json:"id,omitempty"`
	Name           string `json:"name,omitempty"`
	ArgumentsDelta string `json:"argumentsDelta,omitempty"`

	Block  *Block  `json:"block,omitempty"`  // block-end: the authoritative assembled block
	Usage  *Usage  `json:"usage,omitempty"`  // usage
	Finish *Finish `json:"finish,omitempty"` // finish
}

// IsBareDelta reports whether c is a delta that later deltas of its block
// may extend: a text, reasoning or tool-call delta carrying nothing but its
// block index and its text (for a tool call: its id, name and argument
// text).
func (c Chunk) IsBareDelta() bool {
	if c.BlockType != "" || c.Block != nil || c.Usage != nil || c.Finish != nil {
		return false
	}
	switch c.Type {
	case ChunkTextDelta, ChunkReasoningDelta:
		return c.ID == "" && c.Name == "" && c.ArgumentsDelta == ""
	case ChunkToolCallDelta:
		return c.Text == ""
	}
	return false
}

// FinishKind says why a stream ended.
type FinishKind string

// The finish kinds.
const (
	FinishStop      FinishKind = "stop"
	FinishToolCalls FinishKind = "tool-calls"
	FinishMaxTokens FinishKind = "max-tokens"
	FinishAborted   FinishKind = "aborted"
	FinishError     FinishKind = "error"
)

// Finish is the terminal chunk's payload. Failure is set for aborted and error.
type Finish struct {
	Kind    FinishKind `json:"kind"`
	Failure *Failure   `json:"failure,omitempty"`
}

// Failure describes why a model call failed. Code is the routing key;
// never parse Message.
type Failure struct {
	Message      string `json:"message"`
	Code         string `json:"code"`
	Status       int    `json:"status,omitempty"`
	RetryAfterMs int64  `json:"providerRetryAfterMs,omitempty"`
	RequestID    string `json:"requestId,omitempty"`
}

// Error makes a Failure usable as an error.
func (f *Failure) Error() string { return f.Code + ": " + f.Message }

// ErrorCode returns the failure's code.
func (f *Failure) ErrorCode() string { return f.Code }

// Usage counts the tokens of one or more model calls. The counts are
// disjoint: Input excludes CacheRead.
type Usage struct {
	Input      int64 `json:"inputTokens"`
	Output     int64 `json:"outputTokens"`
	CacheRead  int64 `json:"cacheReadTokens,omitempty"`
	CacheWrite int64 `json:"cacheWriteTokens,omitempty"`
	Reasoning  int64 `json:"reasoningTokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{Input: u.Input + v.Input, Output: u.Output + v.Output, CacheRead: u.CacheRead + v.CacheRead,
		CacheWrite: u.CacheWrite + v.CacheWrite, Reasoning: u.Reasoning + v.Reasoning}
}

// IsZero reports whether u counts nothing.
func (u Usage) IsZero() bool { return u == Usage{} }

// String renders u the one way dsh shows usage: "in 1200 (1000 cached) out
// 50", the input counting cached tokens too.
func (u Usage) String() string {
	return fmt.Sprintf("in %d (%d cached) out %d", u.Input+u.CacheRead, u.CacheRead, u.Output)
}
