package subagent

import (
	"fmt"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// A child's outcome, read from its log. Every in-process child (one-shot,
// continuable, detached, a Temporal activity's) is read here, so that a
// stop reason or a way to find the final output is added in one place.

// StopOf maps the end of a child's turn to its stop reason and diagnostic.
func StopOf(end session.TurnEnd) (StopReason, string) {
	switch end.Reason.Kind {
	case session.EndCompleted:
		return Completed, ""
	case session.EndMaxTokens:
		return MaxTokens, ""
	case session.EndAborted:
		return Aborted, ""
	case session.EndInterrupted:
		return Failed, "the child's process stopped in the middle of its turn (crash repair closed the turn)"
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

// LogOutcome is what a child's own events (never a seed) show: its final
// output (FinalOutput), its usage, and the stop reason of its last turn
// end (Completed when no turn ended).
func LogOutcome(own []session.Event) Result {
	res := Result{StopReason: Completed, Output: FinalOutput(own), Usage: UsageFromEvents(own)}
	for i := len(own) - 1; i >= 0; i-- {
		if end, ok := own[i].Data.(session.TurnEnd); ok {
			res.StopReason, res.Diagnostic = StopOf(end)
			break
		}
	}
	return res
}

// FinalOutput selects a child's output from its own events: the content
// of the last assistant message with content; else the text it streamed,
// as one text block; else nothing.
func FinalOutput(events []session.Event) []content.Block {
	for i := len(events) - 1; i >= 0; i-- {
		if m, ok := events[i].Data.(session.AssistantMessage); ok && len(m.Message.Content) > 0 {
			return m.Message.Content
		}
	}
	var streamed []byte
	for _, e := range events {
		if c, ok := e.Data.(session.AssistantChunk); ok && c.Chunk.Type == content.ChunkTextDelta {
			streamed = append(streamed, c.Chunk.Text...)
		}
	}
	if len(streamed) > 0 {
		return []content.Block{content.Text(string(streamed))}
	}
	return nil
}

// Headline says in one line why a run did not complete.
func (r StopReason) Headline() string {
	switch r {
	case Completed:
		return "subagent run completed"
	case Aborted:
		return "subagent run cancelled"
	case Failed:
		return "subagent run failed"
	case MaxTokens:
		return "subagent run hit the token limit"
	case Refusal:
		return "subagent declined the task"
	case MaxSteps:
		return "subagent run reached its step cap before it finished"
	case BudgetSpent:
		return "subagent run stopped: the delegation tree's token budget is spent"
	}
	return fmt.Sprintf("subagent run ended abnormally (%s)", r)
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
	case MaxSteps:
		return head + " reached its step cap before it finished."
	case BudgetSpent:
		return head + " stopped before it finished: the delegation tree's token budget is spent."
	}
	return fmt.Sprintf("%s ended abnormally (%s) before it finished.", head, r)
}
