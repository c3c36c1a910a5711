package subagent

import (
	"context"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/permission"
)

// AuthorizeChild decides a permission request that an out-of-process child
// made, by its parent's permission policy (agent.Authorize): req.Agent names
// the asking agent below the child, and label (see ChildLabel) names the
// child. An ask in flight gives up, refused, when cancelled closes (the run
// was cancelled). The result is nil when the call may run.
func AuthorizeChild(parent *agent.Agent, label string, cancelled <-chan struct{}, req permission.Request) error {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-cancelled:
			stop()
		case <-done:
		}
	}()
	req.Agent = append([]string{label}, req.Agent...)
	return parent.Authorize(ctx, req)
}
