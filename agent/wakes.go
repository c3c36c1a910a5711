package agent

import (
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// WakesSinceUser counts, in a session's events, the turns that notices
// opened (a message isNotice accepts in their first step) since the agent
// last claimed a user-sourced message; turns opened by anything else do not
// count either way. Deliverers of notices use it to stop waking an agent
// that notices alone keep busy: past their budget, a notice waits for the
// next turn.
func WakesSinceUser(events []session.Event, isNotice func(content.Source) bool) int {
	type opening struct{ user, notice bool }
	var turns []opening
	inFirstStep := false
	for _, e := range events {
		switch d := e.Data.(type) {
		case session.TurnStart:
			turns = append(turns, opening{})
		case session.Step:
			inFirstStep = e.Type == session.TypeStepStart && d.Step == 1
		case content.Message:
			if len(turns) == 0 || e.Type != session.TypeUserMessage {
				continue
			}
			t := &turns[len(turns)-1]
			t.user = t.user || d.Source.Kind == content.SourceUser
			t.notice = t.notice || (inFirstStep && isNotice(d.Source))
		}
	}
	wakes := 0
	for i := len(turns) - 1; i >= 0 && !turns[i].user; i-- {
		if turns[i].notice {
			wakes++
		}
	}
	return wakes
}
