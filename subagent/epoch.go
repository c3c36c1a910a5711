package subagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent/internal/localchild"
)

// The source of the messages the service relays between a parent and its
// continuable children (content.Source{Kind: plugin, Plugin: SourcePlugin}),
// by form; Sender names the sending session.
const (
	SourcePlugin = "subagent"
	FormRelay    = "relay"   // a parent's send_message to its child
	FormReport   = "report"  // a child's report to its parent
	FormSettled  = "settled" // the notice of a child's settlement
)

// UsageType is the session event type, in a parent's log, of what a child
// that did not report through a tool result used (UsageRecord): one
// activation of a continuable child, or a background run. UsageFromEvents
// counts it.
const UsageType = "subagent/usage"

// UsageRecord is the payload of a UsageType event.
type UsageRecord struct {
	Child string                   `json:"child"`
	Usage map[string]content.Usage `json:"usage"`
}

// RecordUsage writes what child used into parent's log (a UsageType
// event), when the parent is live: once per settled run or activation.
func RecordUsage(parent *agent.Agent, child string, usage map[string]content.Usage) {
	if len(usage) == 0 || parent.Disposed() {
		return
	}
	raw, err := json.Marshal(UsageRecord{Child: child, Usage: usage})
	if err == nil {
		parent.Session().Append(UsageType, json.RawMessage(raw))
	}
}

// epoch is one activation as a run, so that the service announces it like
// any other: subagent/start when it is published, progress while it runs,
// subagent/end once it settled. The service owns its teardown.
type epoch struct {
	Settlement
	act *activation
}

func (e *epoch) ID() string                               { return e.act.id }
func (e *epoch) LocalAgent() *agent.Agent                 { return e.act.agent }
func (e *epoch) Dispose(ctx context.Context) error        { return nil }
func (e *epoch) Wait(ctx context.Context) (Result, error) { return e.Settlement.Wait(ctx) }

// epochTracker makes the tracker of act's next epoch: its progress is
// buffered until announceEpoch; release runs after subagent/end.
func (s *Service) epochTracker(act *activation, release func()) *tracker {
	return &tracker{svc: s, parent: act.parent, info: RunInfo{RunID: fmt.Sprintf("run-%d", s.lastRun.Add(1)), Provider: act.desc.Provider,
		ParentID: act.parentID, Label: act.desc.Label}, ended: make(chan struct{}), release: release}
}

// announceEpoch announces act's epoch: subagent/start now, subagent/end
// once it settles.
func (t *tracker) announceEpoch(act *activation) *epoch {
	e := &epoch{act: act}
	t.announce(e)
	return e
}

// child is what an activation runs: an in-process agent, or the runs of an
// out-of-process product that continues its conversation by id.
type child interface {
	submit(m content.Message) error // a later turn, in order; wakes the child
	busy() bool                     // a turn is running
	queued() int                    // messages waiting, parked ones included
	interrupt(cause session.Cause)  // ends the running turn; the queue waits
	dispose(ctx context.Context) error
	result() Result // the epoch's outcome, once disposed
}

// localChild is an in-process child agent.
type localChild struct {
	a    *agent.Agent
	from int // the agent's events from here on are the epoch's own
}

func (l *localChild) submit(m content.Message) error    { return l.a.Submit(m, nil) }
func (l *localChild) busy() bool                        { return l.a.Status() == agent.StatusRunning }
func (l *localChild) queued() int                       { return l.a.Queued() }
func (l *localChild) interrupt(cause session.Cause)     { l.a.Cancel(cause, true) }
func (l *localChild) dispose(ctx context.Context) error { return l.a.Dispose(ctx) }
func (l *localChild) result() Result                    { return epochResult(l.a.Session().Events()[l.from:]) }

// epochResult is how an epoch ended, from its own events: the last turn's
// end (a turn crash repair closed counts as aborted), the final output of
// the epoch (none for an epoch that opened no turn), and its usage. Work
// accepted into the inbox that never ran (dropped by an interrupt's
// teardown or a disposal) makes a completed epoch aborted.
func epochResult(own []session.Event) Result {
	res := Result{StopReason: Completed, Output: localchild.FinalOutput(own), Usage: UsageFromEvents(own)}
	unrun := map[string]bool{}
	for _, e := range own {
		switch d := e.Data.(type) {
		case session.TurnEnd:
			res.StopReason, res.Diagnostic = turnStop(d)
		case session.InboxSpliced:
			for _, m := range d.Inserted {
				unrun[m.ID] = true
			}
		case content.Message:
			delete(unrun, d.ID)
		}
	}
	if len(unrun) > 0 && res.StopReason == Completed {
		res.StopReason = Aborted
	}
	return res
}

// turnStop maps a turn end to a stop reason and diagnostic.
func turnStop(end session.TurnEnd) (StopReason, string) {
	switch end.Reason.Kind {
	case session.EndCompleted:
		return Completed, ""
	case session.EndMaxTokens:
		return MaxTokens, ""
	case session.EndAborted, session.EndInterrupted:
		return Aborted, ""
	case session.EndBlocked:
		return Refusal, ""
	case session.EndMaxSteps:
		return MaxSteps, "the child reached its step cap (agent.maxSteps)"
	case session.EndBudget:
		return BudgetSpent, "the delegation tree spent its token budget (budget.tokens)"
	}
	if f := end.Reason.Error; f != nil {
		return Failed, Diagnostic(fmt.Sprintf("%s: %s", f.Code, f.Message))
	}
	return Failed, "the child's turn ended " + end.Reason.Kind
}

// settledSummary is the first line of a settlement notice.
func settledSummary(id string, r StopReason) string {
	head := "Background subagent " + id
	switch r {
	case Completed:
		return head + " finished and will do no further work unless you send it more."
	case Aborted:
		return head + " was stopped before it finished."
	case MaxTokens:
		return head + " ran out of room before it finished."
	case Refusal:
		return head + " declined the task."
	case Failed:
		return head + " failed before it finished."
	}
	return fmt.Sprintf("%s ended abnormally (%s) before it finished.", head, r)
}

// settledNotice is the settlement notice a parent receives: the summary, then the
// epoch's closing message, or that it left none.
func settledNotice(id string, res Result) content.Message {
	text := settledSummary(id, res.StopReason)
	if res.Diagnostic != "" {
		text += "\nDiagnostic: " + res.Diagnostic
	}
	if closing := strings.TrimSpace(content.JoinText(res.Output)); closing != "" {
		text += "\nIts closing message:\n" + closing
	} else {
		text += "\nIt left no closing message."
	}
	m := content.UserText(text)
	m.Source = content.Source{Kind: content.SourcePlugin, Plugin: SourcePlugin, Form: FormSettled, Sender: id}
	return m
}
