package subagent

import (
	"encoding/json"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// ChildMeta is the tool-result meta a delegating tool records, so that a
// reader of the log can find the child. The child's usage is the result's
// Usage.
type ChildMeta struct {
	// SubagentChild is the run's id: the child's session id for a local
	// run; SubagentProvider the provider it ran on.
	SubagentChild    string `json:"subagentChild,omitempty"`
	SubagentProvider string `json:"subagentProvider,omitempty"`
}

// AddUsage adds u to sum under key, allocating sum when nil.
func AddUsage(sum map[string]content.Usage, key string, u content.Usage) map[string]content.Usage {
	if u.IsZero() {
		return sum
	}
	if sum == nil {
		sum = map[string]content.Usage{}
	}
	sum[key] = sum[key].Add(u)
	return sum
}

// UsageFromEvents sums the token usage recorded in a log, keyed
// "provider/model": every assistant message's usage, every compaction's
// summary call, UsageType events (its children's runs), and the usage tool results carry (how logs
// written before UsageType covered every run recorded a foreground
// child's).
func UsageFromEvents(events []session.Event) map[string]content.Usage {
	var sum map[string]content.Usage
	for _, e := range events {
		switch d := e.Data.(type) {
		case session.AssistantMessage:
			if d.Usage != nil {
				sum = AddUsage(sum, d.Message.Source.Provider+"/"+d.Message.Source.Model, *d.Usage)
			}
		case UsageRecord:
			for k, u := range d.Usage {
				sum = AddUsage(sum, k, u)
			}
		case json.RawMessage:
			if e.Type != UsageType {
				continue
			}
			var r UsageRecord
			if json.Unmarshal(d, &r) == nil {
				for k, u := range r.Usage {
					sum = AddUsage(sum, k, u)
				}
			}
		case session.ToolResult:
			for k, u := range d.Usage {
				sum = AddUsage(sum, k, u)
			}
		case session.Compaction:
			if d.Usage != nil {
				sum = AddUsage(sum, d.Provider+"/"+d.Model, *d.Usage)
			}
		}
	}
	return sum
}

// UsageType is the session event type, in a parent's log, of what one run
// of a child used (UsageRecord): a one-shot run, foreground or background,
// or one activation of a continuable child. It is the only way a child's
// usage reaches its parent's log; UsageFromEvents counts it.
const UsageType = "subagent/usage"

// UsageRecord is the payload of a UsageType event.
type UsageRecord struct {
	Child string                   `json:"child"`
	Usage map[string]content.Usage `json:"usage"`
}

// recordUsage writes what child used into parent's log (a UsageType
// event) and to its store, when the parent is live: once per settled run
// or activation, when its end is announced (tracker.end).
func recordUsage(parent *agent.Agent, child string, usage map[string]content.Usage) {
	if len(usage) == 0 || parent.Disposed() {
		return
	}
	// Appended as a value: the store encodes it when it writes, a reader
	// of a stored log finds it as JSON (see UsageFromEvents). Written at
	// once, not at the parent's next step: a crash in between would lose
	// what the child cost. A write error stays with the session, whose
	// next step reports it.
	s := parent.Session()
	if _, err := s.Append(UsageType, UsageRecord{Child: child, Usage: usage}); err == nil {
		s.Flush()
	}
}
