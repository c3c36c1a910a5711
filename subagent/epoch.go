package subagent

import (
	"context"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
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

// epochResult is how an epoch ended, from its own events (LogOutcome;
// an epoch that opened no turn completed with no output). Work accepted
// into the inbox that never ran (dropped by an interrupt's teardown or a
// disposal) makes a completed epoch aborted.
func epochResult(own []session.Event) Result {
	res := LogOutcome(own)
	unrun := map[string]bool{}
	for _, e := range own {
		switch d := e.Data.(type) {
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
