package temporal

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The workflow input carries what the parent decides: lineage, the
// parent's policy narrowed by the request's, what is left of the tree's
// budget, the schema; a request the worker cannot honour is refused before
// anything starts.
func TestInput(t *testing.T) {
	p, err := New(Config{Name: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deny, _ := permission.New(permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Deny}})
	askEdit := permission.AskFor("edit_file")
	pp := subagenttest.NewParent(t, nil, 0, agent.Options{})
	parent, err := pp.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"},
		Policy: &deny, TokenBudget: 1000})
	if err != nil {
		t.Fatal(err)
	}
	parent.Charge(content.Usage{Input: 200, Output: 100})
	narrow, _ := permission.New(askEdit)
	two := 2
	in, err := p.input(subagent.StartRequest{Parent: parent, Prompt: subagenttest.Prompt("task"), Depth: 1, MaxDepth: &two, Policy: &narrow,
		OutputSchema: &jsonschema.Schema{Type: "object"}})
	if err != nil {
		t.Fatal(err)
	}
	if in.ParentSession != parent.ID() || in.Depth != 1 || *in.MaxDepth != 2 || in.TokenBudget != 700 || string(in.OutputSchema) != `{"type":"object"}` {
		t.Errorf("input %+v", in)
	}
	if in.Policy.Decide("bash") != permission.Deny || in.Policy.Decide("edit_file") != permission.Ask || in.Policy.Decide("read_file") != permission.Allow {
		t.Errorf("policy %v: want the parent's deny and the request's ask", in.Policy.Layers())
	}
	hooks, err := hook.New(hook.Config{hook.PreToolUse: {{Hooks: []hook.Command{{Type: "command", Command: "true"}}}}}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]subagent.StartRequest{
		"hooks": {Parent: parent, Prompt: subagenttest.Prompt("x"), Hooks: hooks},
		"a cwd": {Parent: parent, Prompt: subagenttest.Prompt("x"), Cwd: t.TempDir()},
	} {
		if _, err := p.input(req); !errors.Is(err, subagent.ErrUnsupportedCapability) && !errors.Is(err, subagent.ErrInvalidRequest) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}

// describer is a cluster that answers DescribeTaskQueue only, counting the
// calls.
type describer struct {
	client.Client
	calls   atomic.Int32
	pollers atomic.Bool
}

func (d *describer) DescribeTaskQueue(context.Context, string, enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	d.calls.Add(1)
	time.Sleep(time.Millisecond)
	if !d.pollers.Load() {
		return &workflowservice.DescribeTaskQueueResponse{}, nil
	}
	return &workflowservice.DescribeTaskQueueResponse{Pollers: []*taskqueuepb.PollerInfo{{LastAccessTime: timestamppb.Now()}}}, nil
}

// A burst of starts costs the cluster one worker check, not two calls per
// child; a check that found no worker stands for nothing.
func TestCheckWorkersOncePerBurst(t *testing.T) {
	d := &describer{}
	p, err := New(Config{Name: "fleet", Client: d})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var e *Error
		if err := p.checkWorkers(context.Background()); !errors.As(err, &e) || e.Code != CodeNoWorker {
			t.Fatalf("no worker: %v", err)
		}
	}
	if n := d.calls.Load(); n != 2 {
		t.Errorf("%d calls for two checks that found no worker: want each to ask (one call each)", n)
	}
	d.pollers.Store(true)
	d.calls.Store(0)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := p.checkWorkers(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := d.calls.Load(); n != 2 {
		t.Errorf("%d DescribeTaskQueue calls for 50 starts at once: want 2 (workflow and activity queues, once)", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.checking <- struct{}{} // a check under way
	cancel()
	if err := p.checkWorkers(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a start whose ctx ends while it waits for the check: %v", err)
	}
	<-p.checking
}

// starter is a cluster whose first starts time out.
type starter struct {
	client.Client
	timeouts int
	calls    []string
	err      error
}

func (s *starter) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.calls = append(s.calls, opts.ID)
	if len(s.calls) <= s.timeouts {
		return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
	}
	if s.err != nil {
		return nil, s.err
	}
	return startedRun{id: opts.ID}, nil
}

type startedRun struct {
	client.WorkflowRun
	id string
}

func (r startedRun) GetID() string    { return r.id }
func (r startedRun) GetRunID() string { return "run" }

// A start call the SDK gave up on under load is made again with the same
// workflow id, within readyTimeout; any other refusal fails the start.
func TestStartWorkflowAgainAfterATimeout(t *testing.T) {
	s := &starter{timeouts: 2}
	p, err := New(Config{Name: "fleet", Client: s})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := p.startWorkflow(context.Background(), Input{SessionID: "child"})
	if err != nil || wf.GetID() != WorkflowID("child") || len(s.calls) != 3 || s.calls[0] != s.calls[2] {
		t.Fatalf("start: %v, %v after calls %v: want the workflow after three calls with one id", wf, err, s.calls)
	}
	s = &starter{err: serviceerror.NewPermissionDenied("no", "")}
	p, _ = New(Config{Name: "fleet", Client: s})
	var e *Error
	if _, err := p.startWorkflow(context.Background(), Input{SessionID: "child"}); !errors.As(err, &e) || e.Code != CodeCluster || len(s.calls) != 1 {
		t.Errorf("a refused start: %v after %d calls", err, len(s.calls))
	}
	s = &starter{timeouts: 1000}
	p, _ = New(Config{Name: "fleet", Client: s, ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 300 * time.Millisecond}})
	if _, err := p.startWorkflow(context.Background(), Input{SessionID: "child"}); !errors.As(err, &e) || e.Code != CodeCluster {
		t.Errorf("a start that times out until readyTimeout: %v", err)
	}
}
