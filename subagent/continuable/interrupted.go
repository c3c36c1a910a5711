package continuable

import (
	"context"
	"fmt"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// ReportInterrupted implements subagent.Continuation: see subagent.Service.ReportInterrupted.
func (c *manager) ReportInterrupted(ctx context.Context, parent *agent.Agent) (int, error) {
	rows, err := c.ListChildren(ctx, parent.ID())
	if err != nil {
		return 0, err
	}
	heard := map[string]int64{} // child → time of the parent's last notice from it
	for _, e := range parent.Session().Events() {
		if m, ok := e.Data.(content.Message); ok && m.Source.Plugin == subagent.SourcePlugin && m.Source.Form == subagent.FormSettled {
			heard[m.Source.Sender] = e.Time
		}
	}
	remotes := map[string]bool{}
	for _, r := range rows {
		if r.Remote != "" {
			remotes[r.Remote] = true
		}
	}
	n := 0
	for _, r := range rows {
		if r.Live || r.Diagnostic != "" || remotes[r.ID] {
			continue
		}
		_, events, err := c.sessions.Read(r.ID)
		if err != nil {
			continue
		}
		started, end, ok := lastTurn(events)
		if !ok || end.Reason.Kind != session.EndInterrupted {
			continue
		}
		if t, ok := heard[r.ID]; ok && t >= started {
			continue
		}
		if err := parent.Inject(interruptedNotice(r)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// lastTurn returns when a log's last turn started and how it ended.
func lastTurn(events []session.Event) (started int64, end session.TurnEnd, ok bool) {
	for _, e := range events {
		switch d := e.Data.(type) {
		case session.TurnStart:
			started = e.Time
		case session.TurnEnd:
			end, ok = d, true
		}
	}
	return started, end, ok
}

func interruptedNotice(r subagent.ChildRow) content.Message {
	name := r.ID
	if r.Label != "" {
		name += " (" + r.Label + ")"
	}
	text := fmt.Sprintf("Background subagent %s was interrupted when the process running it ended, before it finished.", name)
	if r.Mode == subagent.Continuable {
		text += " send_message continues it where it stopped."
	} else {
		text += " It was a one-shot child and cannot be continued."
	}
	m := content.UserText(text)
	m.Source = content.Source{Kind: content.SourcePlugin, Plugin: subagent.SourcePlugin, Form: subagent.FormSettled, Sender: r.ID}
	return m
}
