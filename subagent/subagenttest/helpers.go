package subagenttest

import (
	"context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/subagent"
)

// ParentAgent returns a fresh top-level parent agent without a model, for
// providers whose children run out of process.
func ParentAgent(t testing.TB) *agent.Agent {
	return NewParent(t, nil, 0, agent.Options{}).Agent
}

// Wait returns run's result, failing t when waiting fails or takes over
// 30 seconds.
func Wait(t testing.TB, run subagent.Run) subagent.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Dispose disposes run, failing t on an error.
func Dispose(t testing.TB, run subagent.Run) {
	t.Helper()
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
}
