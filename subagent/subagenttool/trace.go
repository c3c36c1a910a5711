package subagenttool

import (
	"context"

	"github.com/dsh-go/dsh/subagent"
)

// Trace observes the calls of a subagent tool made with a context from
// WithTrace, as net/http/httptrace observes a request: a caller that runs
// the tool itself (dsh mcp) learns which child a call started and how it
// settled, and the call takes the tool's one road to its child.
type Trace struct {
	// Started is called with the child's id once it exists.
	Started func(childID string)
	// Settled is called with a foreground child's result before the call
	// returns.
	Settled func(subagent.Result)
}

type traceKey struct{}

// WithTrace returns ctx carrying tr for the subagent tool calls made with it.
func WithTrace(ctx context.Context, tr *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, tr)
}

func traceOf(ctx context.Context) *Trace {
	tr, _ := ctx.Value(traceKey{}).(*Trace)
	return tr
}

// started is the trace's Started hook, nil without one.
func started(ctx context.Context) func(string) {
	if tr := traceOf(ctx); tr != nil {
		return tr.Started
	}
	return nil
}
