package agent

import (
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// WakesSinceUser counts, in a session's events, the model calls that
// notices alone caused (a message isNotice accepts) since the agent last
// claimed a user-sourced message: the turns notices opened, and the steps
// they added to a turn whose model had already answered (a notice spliced
// into a running turn keeps it going as surely as a wake starts one).
// Notices that ride along with a step that runs anyway (after tool calls)
// do not count. Deliverers of notices use it to stop waking an agent that
// notices alone keep busy: past their budget, a notice waits for the next
// turn.
func WakesSinceUser(events []session.Event, isNotice func(content.Source) bool) int {
	// An opening is a step that made a model call no tool call asked for:
	// a turn's first step, or a step after the model answered.
	type opening struct{ user, notice bool }
	var opens []opening
	inOpening, answered := false, false
	for _, e := range events {
		switch d := e.Data.(type) {
		case session.TurnStart:
			answered = false
		case session.Step:
			if e.Type != session.TypeStepStart {
				continue
			}
			inOpening = d.Step == 1 || answered
			if inOpening {
				opens = append(opens, opening{})
			}
			answered = false
		case session.AssistantMessage:
			answered = len(content.ToolCalls(d.Message.Content)) == 0
		case content.Message:
			if len(opens) == 0 || e.Type != session.TypeUserMessage {
				continue
			}
			o := &opens[len(opens)-1]
			o.user = o.user || d.Source.Kind == content.SourceUser
			o.notice = o.notice || (inOpening && isNotice(d.Source))
		}
	}
	wakes := 0
	for i := len(opens) - 1; i >= 0 && !opens[i].user; i-- {
		if opens[i].notice {
			wakes++
		}
	}
	return wakes
}
