package continuable

import (
	"context"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// child is what an activation runs: an in-process agent, or the runs of an
// out-of-process product that continues its conversation by id.
type child interface {
	submit(m content.Message) error // a later turn, in order; wakes the child
	busy() bool                     // a turn is running
	queued() int                    // messages waiting, parked ones included
	interrupt(cause session.Cause)  // ends the running turn; the queue waits
	dispose(ctx context.Context) error
	result() subagent.Result // the epoch's outcome, once disposed
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
func (l *localChild) result() subagent.Result           { return epochResult(l.a.Session().Events()[l.from:]) }

// epochResult is how an epoch ended, from its own events (LogOutcome;
// an epoch that opened no turn completed with no output). Work accepted
// into the inbox that never ran (dropped by an interrupt's teardown or a
// disposal) makes a completed epoch aborted.
func epochResult(own []session.Event) subagent.Result {
	res := subagent.LogOutcome(own)
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
	if len(unrun) > 0 && res.StopReason == subagent.Completed {
		res.StopReason = subagent.Aborted
	}
	return res
}
