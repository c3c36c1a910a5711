package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/subagent/temporal"
)

// conformanceReply behaves by the conformance prompts: complete, hang until
// cancelled, or fail.
func conformanceReply(req llmtest.Request) llmtest.Reply {
	switch req.LastUser {
	case subagenttest.PromptHang:
		return llmtest.Reply{Text: "working", Hang: true}
	case subagenttest.PromptFail:
		return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"model down","type":"invalid_request_error"}}`}
	}
	return llmtest.Reply{Text: "done"}
}

// recorder remembers the children a provider started.
type recorder struct {
	subagent.Provider
	mu  sync.Mutex
	ids []string
}

func (r *recorder) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	run, err := r.Provider.Start(ctx, req)
	if run != nil {
		r.mu.Lock()
		r.ids = append(r.ids, run.ID())
		r.mu.Unlock()
	}
	return run, err
}

// running returns an error naming the children whose workflow still runs.
func (r *recorder) running() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.ids {
		resp, err := cluster.DescribeWorkflowExecution(context.Background(), temporal.WorkflowID(id), "")
		if err != nil {
			return err
		}
		if s := resp.GetWorkflowExecutionInfo().GetStatus(); s == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Errorf("child %s is still running on the cluster", id)
		}
	}
	return nil
}

// The provider passes the seam's conformance suite against a real server
// and a real worker: readiness, cancellation before and after it, dispose,
// failures as stop reasons, independent runs, paired events, no goroutine
// left, and no workflow left running.
func TestConformance(t *testing.T) {
	f := newFleet(t, conformanceReply)
	f.worker("w1", 8)
	var parent *subagenttest.Parent
	var rec *recorder
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			parent = subagenttest.NewParent(t, nil, 0, agent.Options{})
			rec = &recorder{Provider: f.provider(t, parent.Sessions)}
			return rec, parent.Agent
		},
		Leftovers: func() error {
			if live := parent.Sessions.Live(); len(live) != 1 {
				return fmt.Errorf("sessions live: %v", live)
			}
			return rec.running()
		},
		Timeout: time.Minute,
	})
}
