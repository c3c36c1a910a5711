package session

import (
	"bytes"
	"encoding/json"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/dsh-go/dsh/content"
)

// The core event types of a session log.
const (
	TypeTurnStart        = "turn/start"
	TypeTurnEnd          = "turn/end"
	TypeStepStart        = "step/start"
	TypeStepEnd          = "step/end"
	TypeUserMessage      = "user/message"
	TypeAssistantChunk   = "assistant/chunk"
	TypeAssistantMessage = "assistant/message"
	TypeToolCall         = "tool/call"
	TypeToolResult       = "tool/result"
	TypeRequestHeader    = "request/header"
	TypeEndSeed          = "session/end-seed"
	TypeLLMRetry         = "llm/retry"
	TypeInboxSpliced     = "agent/inbox/spliced"
)

// TurnStart opens a turn. Turns are numbered from 1.
type TurnStart struct {
	Turn int `json:"turn"`
}

// The turn end kinds.
const (
	EndCompleted   = "completed"
	EndAborted     = "aborted"
	EndBlocked     = "blocked"
	EndError       = "error"
	EndMaxTokens   = "max-tokens"
	EndMaxSteps    = "max-steps"   // the turn reached agent.maxSteps model calls
	EndBudget      = "budget"      // the delegation tree spent its token budget
	EndInterrupted = "interrupted" // written only by crash repair
)

// Cause says who cancelled a turn: user, parent, hook or disposed.
type Cause struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// EndReason says why a turn ended. Cause is set for aborted turns, Error for
// failed ones.
type EndReason struct {
	Kind  string           `json:"kind"`
	Cause *Cause           `json:"reason,omitempty"`
	Error *content.Failure `json:"error,omitempty"`
}

// TurnEnd closes a turn.
type TurnEnd struct {
	Turn   int       `json:"turn"`
	Reason EndReason `json:"reason"`
}

// Step names one step of a turn; it is the payload of step/start and step/end.
type Step struct {
	Turn int `json:"turn"`
	Step int `json:"step"`
}

// AssistantChunk records one raw chunk of a model stream.
type AssistantChunk struct {
	// Turn and Step are 32 bits so that the event, boxed once per streamed
	// chunk, fits a 144-byte size class.
	Turn  int32         `json:"turn"`
	Step  int32         `json:"step"`
	Chunk content.Chunk `json:"chunk"`
	// BlockFromDeltas marks a stored block-end whose text is its deltas
	// joined (see MinShared); never set in memory.
	BlockFromDeltas bool `json:"blockFromDeltas,omitempty"`
}

// AssistantMessage records the assembled answer of one model call.
type AssistantMessage struct {
	Turn        int             `json:"turn"`
	Step        int             `json:"step"`
	Message     content.Message `json:"message"`
	Usage       *content.Usage  `json:"usage,omitempty"`
	Interrupted bool            `json:"interrupted,omitempty"`
	// SharedBlocks lists the stored blocks whose text is a chunk index's
	// deltas joined (see MinShared); never set in memory.
	SharedBlocks []SharedBlock `json:"sharedBlocks,omitempty"`
}

// ToolCall records that a tool call started.
type ToolCall struct {
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// ArgumentsInMessage marks a stored call whose arguments are those of
	// its block in the step's assistant message (see MinShared); never set
	// in memory.
	ArgumentsInMessage bool `json:"argumentsInMessage,omitempty"`
}

// ErrorInfo names a failed tool call's error.
type ErrorInfo struct {
	Name string `json:"name"`
	Code string `json:"code"`
}

// ToolResult records a tool call's result message.
type ToolResult struct {
	Turn    int             `json:"turn"`
	Step    int             `json:"step"`
	Message content.Message `json:"message"`
	Error   *ErrorInfo      `json:"error,omitempty"`
	Meta    json.RawMessage `json:"meta,omitempty"`
	// Usage is what the call spent on the caller's behalf (a child's
	// tokens), keyed "provider/model".
	Usage map[string]content.Usage `json:"usage,omitempty"`
}

// RequestConfig is the model route and limits of a request.
type RequestConfig struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	MaxTokens int    `json:"maxTokens,omitempty"`
}

// RequestHeader records the request shape an agent sends, logged when it
// first sends one and whenever it changes.
type RequestHeader struct {
	Config RequestConfig      `json:"config"`
	System string             `json:"system,omitempty"`
	Tools  []content.ToolSpec `json:"tools,omitempty"`
	Reason string             `json:"reason"` // initial, resume or change
}

// LLMRetry records a retried model request.
type LLMRetry struct {
	Turn     int    `json:"turn"`
	Step     int    `json:"step"`
	Provider string `json:"provider"`
	Retry    int    `json:"retry"`
	// MaxRetries is the adapter's retry limit (0 when unknown).
	MaxRetries int              `json:"maxRetries,omitempty"`
	DelayMs    int64            `json:"delayMs"`
	Failure    *content.Failure `json:"failure"`
}

// InboxSpliced records a change of an agent's inbox.
type InboxSpliced struct {
	Target   string            `json:"target"` // next-turn or next-step
	Inserted []content.Message `json:"inserted,omitempty"`
	Removed  []string          `json:"removed,omitempty"`
	Outcome  string            `json:"outcome,omitempty"`
}

// EndSeed marks the end of a seeded prefix.
type EndSeed struct{}

// isSurface reports whether events of type t produce model messages.
func isSurface(t string) bool {
	return t == TypeUserMessage || t == TypeAssistantMessage || t == TypeToolResult
}

// knownRaw lists event types of the wider vocabulary that this package keeps
// as raw JSON: a loader accepts them even though it has no struct for them.
var knownRaw = map[string]bool{
	"todo/write": true, "request/context": true, "llm/retry-started": true,
	"subagent/descriptor": true, "subagent/usage": true, "session/title": true, "sandbox/mode": true,
	"approval/policy": true, "approval/asked": true, "approval/decided": true,
}

// knownType reports whether t is an event type of the core vocabulary;
// events of other types are appended as ignorable, so that a reader that
// does not know them can still load the log.
func knownType(t string) bool {
	switch t {
	case TypeTurnStart, TypeTurnEnd, TypeStepStart, TypeStepEnd, TypeUserMessage, TypeAssistantChunk,
		TypeAssistantMessage, TypeToolCall, TypeToolResult, TypeRequestHeader, TypeLLMRetry, TypeInboxSpliced, TypeEndSeed, TypeCompaction:
		return true
	}
	return knownRaw[t]
}

// decodeData decodes the payload of an event of type t. Unknown types decode
// to json.RawMessage with known=false.
func decodeData(t string, raw json.RawMessage) (data any, known bool, err error) {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	return decodeFrom(t, jsontext.NewDecoder(bytes.NewReader(raw)))
}

// decodeFrom decodes the next value of dec as the payload of an event of
// type t.
func decodeFrom(t string, dec *jsontext.Decoder) (data any, known bool, err error) {
	switch t {
	case TypeTurnStart:
		return decodeAs[TurnStart](dec)
	case TypeTurnEnd:
		return decodeAs[TurnEnd](dec)
	case TypeStepStart, TypeStepEnd:
		return decodeAs[Step](dec)
	case TypeUserMessage:
		return decodeAs[content.Message](dec)
	case TypeAssistantChunk:
		return decodeAs[AssistantChunk](dec)
	case TypeAssistantMessage:
		return decodeAs[AssistantMessage](dec)
	case TypeToolCall:
		return decodeAs[ToolCall](dec)
	case TypeToolResult:
		return decodeAs[ToolResult](dec)
	case TypeRequestHeader:
		return decodeAs[RequestHeader](dec)
	case TypeLLMRetry:
		return decodeAs[LLMRetry](dec)
	case TypeInboxSpliced:
		return decodeAs[InboxSpliced](dec)
	case TypeCompaction:
		return decodeAs[Compaction](dec)
	case TypeEndSeed:
		return EndSeed{}, true, dec.SkipValue()
	}
	v, err := dec.ReadValue()
	return append(json.RawMessage(nil), v...), knownRaw[t], err
}

func decodeAs[T any](dec *jsontext.Decoder) (any, bool, error) {
	var v T
	err := jsonv2.UnmarshalDecode(dec, &v, codec)
	return v, true, err
}
