package subagent

import (
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// ProviderAdded is emitted after a provider is registered.
type ProviderAdded struct{ Provider Provider }

// ProviderRemoved is emitted after a provider is unregistered.
type ProviderRemoved struct{ Name string }

// RunInfo identifies one accepted run in lifecycle events.
type RunInfo struct {
	RunID    string // minted by the service, unique per run
	Provider string // the name the run was started under
	ChildID  string // Run.ID()
	ParentID string // the delegating agent
	Label    string
	Local    bool // the child runs in this process
}

// Started is emitted once a run is ready, before Start returns it.
type Started struct{ RunInfo }

// Ended is emitted exactly once after a run settles, always after its
// Started.
type Ended struct {
	RunInfo
	StopReason StopReason
	// LastAssistantMessage is the run's output, nil when it was empty.
	LastAssistantMessage []content.Block
	Usage                map[string]content.Usage
	CostUSD              float64
	Diagnostic           string
}

// ProgressKind names a kind of child activity.
type ProgressKind string

// The kinds of child activity.
const (
	ProgressTurnStart  ProgressKind = "turn-start"
	ProgressTurnEnd    ProgressKind = "turn-end"
	ProgressToolCall   ProgressKind = "tool-call"
	ProgressToolResult ProgressKind = "tool-result"
	ProgressText       ProgressKind = "text"
)

// Progress is one piece of child activity.
type Progress struct {
	Kind    ProgressKind
	Turn    int
	Tool    string // tool-call, tool-result
	CallID  string // tool-call, tool-result
	Text    string // text: the streamed delta; turn-end: the end reason
	IsError bool   // tool-result
}

// ProgressEvent is emitted for a started run's child activity. It is
// observe-only and never enters the parent's log.
type ProgressEvent struct {
	RunInfo
	Progress
}

// EventType implements event.Event.
func (ProviderAdded) EventType() string { return "subagent/provider-added" }

// EventType implements event.Event.
func (ProviderRemoved) EventType() string { return "subagent/provider-removed" }

// EventType implements event.Event.
func (Started) EventType() string { return "subagent/start" }

// EventType implements event.Event.
func (Ended) EventType() string { return "subagent/end" }

// EventType implements event.Event.
func (ProgressEvent) EventType() string { return "subagent/progress" }

// SessionProgress reports a child session's activity to report until the
// returned stop is called: turn starts and ends, tool calls and results,
// and streamed text.
func SessionProgress(s *session.Session, report func(Progress)) (stop func()) {
	if report == nil {
		return func() {}
	}
	return s.Observe(func(e session.Event) {
		switch d := e.Data.(type) {
		case session.TurnStart:
			report(Progress{Kind: ProgressTurnStart, Turn: d.Turn})
		case session.TurnEnd:
			report(Progress{Kind: ProgressTurnEnd, Turn: d.Turn, Text: d.Reason.Kind})
		case session.ToolCall:
			report(Progress{Kind: ProgressToolCall, Turn: d.Turn, Tool: d.Name, CallID: d.CallID})
		case session.ToolResult:
			report(Progress{Kind: ProgressToolResult, Turn: d.Turn, CallID: d.Message.Source.CallID, IsError: d.Error != nil})
		case session.AssistantChunk:
			if d.Chunk.Type == content.ChunkTextDelta && d.Chunk.Text != "" {
				report(Progress{Kind: ProgressText, Turn: int(d.Turn), Text: d.Chunk.Text})
			}
		}
	})
}
