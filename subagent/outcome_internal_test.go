package subagent

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/session"
)

// Every known stop reason reaches the model as itself: a headline of its
// own and a settlement notice of its own, never "ended abnormally".
func TestEveryStopReasonIsWorded(t *testing.T) {
	headlines, notices := map[string]StopReason{}, map[string]StopReason{}
	for _, r := range []StopReason{Completed, Aborted, Failed, MaxTokens, Refusal, MaxSteps, BudgetSpent} {
		if !r.Known() {
			t.Fatalf("%q is not Known", r)
		}
		h, n := r.Headline(), settledSummary("c1", r)
		if strings.Contains(h, "abnormally") || strings.Contains(n, "abnormally") {
			t.Errorf("%q is worded as unknown: %q / %q", r, h, n)
		}
		if prev, dup := headlines[h]; dup {
			t.Errorf("%q and %q share the headline %q", r, prev, h)
		}
		if prev, dup := notices[n]; dup {
			t.Errorf("%q and %q share the notice %q", r, prev, n)
		}
		headlines[h], notices[n] = r, r
	}
	if h := StopReason("exploded").Headline(); !strings.Contains(h, "abnormally (exploded)") {
		t.Errorf("an unknown reason's headline %q does not name it", h)
	}
}

// Each way a turn ends maps to one stop reason, in one place.
func TestStopOf(t *testing.T) {
	for kind, want := range map[string]StopReason{
		session.EndCompleted: Completed, session.EndMaxTokens: MaxTokens, session.EndAborted: Aborted,
		session.EndBlocked: Refusal, session.EndMaxSteps: MaxSteps, session.EndBudget: BudgetSpent,
		session.EndInterrupted: Failed,
	} {
		if got, _ := StopOf(session.TurnEnd{Reason: session.EndReason{Kind: kind}}); got != want {
			t.Errorf("StopOf(%s) = %s, want %s", kind, got, want)
		}
	}
}
