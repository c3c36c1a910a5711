package session

import "github.com/dsh-go/dsh/content"

// TypeCompaction records a compaction: the older part of the model history
// replaced by a summary. It is model-visible, so it is a required event: a
// reader that does not know it refuses the log rather than derive a
// different history.
const TypeCompaction = "compaction/summary"

// The compaction triggers.
const (
	CompactAuto     = "auto"     // the request would pass the agent's share of the context window
	CompactManual   = "manual"   // asked for (/compact)
	CompactOverflow = "overflow" // the endpoint answered CONTEXT_WINDOW_EXCEEDED
)

// Compaction replaces the model history derived so far by Summary followed
// by its last Kept messages, unchanged.
type Compaction struct {
	Turn    int    `json:"turn,omitempty"` // the turn it happened in; 0 between turns
	Trigger string `json:"trigger"`        // auto, manual or overflow
	Focus   string `json:"focus,omitempty"`
	// Summary is the user-role message that stands for the compacted
	// messages.
	Summary content.Message `json:"summary"`
	// Kept is how many of the history's last messages follow the summary
	// as they were; Compacted how many the summary replaced.
	Kept      int `json:"kept"`
	Compacted int `json:"compacted"`
	// TokensBefore is the estimated prompt size that led to it.
	TokensBefore int64 `json:"tokensBefore,omitempty"`
	// Children are the ids of the subagents started in the compacted part,
	// named in the summary so that the model can still reach them.
	Children []string `json:"children,omitempty"`
	// Usage is what the summarising model call used, on Provider/Model.
	Usage    *content.Usage `json:"usage,omitempty"`
	Provider string         `json:"provider,omitempty"`
	Model    string         `json:"model,omitempty"`
}

// compact applies data, a Compaction, to the derived history (given as
// the event's data so that commit's frame holds no copy). s.mu must be
// held.
func (s *Session) compact(data any) {
	c := data.(Compaction)
	kept := min(max(c.Kept, 0), len(s.messages))
	msgs := make([]content.Message, 0, max(2*(kept+1), 16))
	msgs = append(msgs, c.Summary)
	msgs = append(msgs, s.messages[len(s.messages)-kept:]...)
	s.messages = msgs
	s.msgBytes = 0
	for _, m := range msgs {
		s.msgBytes += MessageSize(m)
	}
}

// MessageBytes returns the size, in bytes, of the text, arguments and ids
// of the derived history: what a token estimate of a request scales.
func (s *Session) MessageBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgBytes
}

// messageBytes is the share of one message in MessageBytes.
func MessageSize(m content.Message) int64 {
	n := int64(8)
	for i := range m.Content {
		n += blockBytes(&m.Content[i])
	}
	return n
}

// blockBytes is b's share; b by pointer, so that a caller's frame holds no
// copy of a block (commit's frame is on every appending goroutine's
// deepest path).
func blockBytes(b *content.Block) int64 {
	n := int64(8 + len(b.Text) + len(b.ID) + len(b.Name) + len(b.Arguments) + len(b.ToolCallID))
	for i := range b.Content {
		n += blockBytes(&b.Content[i])
	}
	if b.Image != nil {
		n += 1024 // an image's tokens do not scale with its reference
	}
	return n
}
