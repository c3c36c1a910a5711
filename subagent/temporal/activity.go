package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// Host is what a worker runs children with: its runtime's agents (built
// over Worker.Sessions), their default model route and limits, its
// workspace and its permission policy.
type Host struct {
	Agents *agent.Registry
	// Options are the children's default model route and limits (the
	// worker's agent block); a child's AgentOptions override them.
	Options agent.Options
	// Cwd is the workspace: every child's working directory.
	Cwd string
	// Policy is the worker's permission policy; it narrows every child's.
	Policy permission.Policy
}

// activities run attempts of children on a worker.
type activities struct {
	driver    *inproc.Provider
	host      Host
	store     logStore
	sessions  *sessions
	caps      *depthCaps
	heartbeat time.Duration // how often an attempt records a heartbeat
	timeout   time.Duration // bounds each checkpoint write
}

// RunChild runs one attempt of a child: it reads the log so far (when the
// attempt continues one), runs the child's turn with the in-process
// driver, heartbeating, and returns how the turn ended, with the end of
// the log (the events after its last step boundary). A
// cancelled activity cancels the child and returns once it has stopped; a
// stopping worker, or an attempt that lost its activity, hands the child
// back (ErrHandedBack) without writing what the interrupted step did.
func (a *activities) RunChild(ctx context.Context, at Attempt) (Outcome, error) {
	in := at.Input
	info := activity.GetInfo(ctx)
	wf := execution{id: info.WorkflowExecution.ID, runID: info.WorkflowExecution.RunID}
	req, err := a.request(in)
	if err != nil {
		return Outcome{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrChild, nil)
	}
	var seed []session.Event
	if at.From > 0 {
		if seed, err = a.store.read(ctx, wf, at.From); err != nil {
			return Outcome{}, temporal.NewApplicationErrorWithCause("read the child's log: "+err.Error(), ErrCheckpoint, err)
		}
		if res, ended := inproc.LogResult(seed, req.OutputSchema != nil); ended { // its worker died before reporting
			return Outcome{StopReason: res.StopReason, Diagnostic: res.Diagnostic}, nil
		}
	}
	wctx := context.WithoutCancel(ctx)
	s := &sink{store: a.store, wf: wf, attempt: at.Attempt, next: at.From, ctx: wctx, timeout: a.timeout}
	if err := a.sessions.expect(ctx, in.SessionID, s); err != nil { // an earlier attempt here is still stopping
		return Outcome{}, temporal.NewApplicationErrorWithCause("wait for the child's earlier attempt: "+err.Error(), ErrChild, err)
	}
	defer a.sessions.forget(in.SessionID)
	if in.MaxDepth != nil {
		a.caps.set(in.SessionID, *in.MaxDepth)
		defer a.caps.forget(in.SessionID)
	}
	runCtx, stopChild := context.WithCancel(wctx)
	defer stopChild()
	run, err := a.driver.StartDetached(runCtx, req, inproc.Detached{SessionID: in.SessionID, ParentSession: in.ParentSession,
		Cwd: a.host.Cwd, Options: a.host.Options, TokenBudget: in.TokenBudget, Seed: seed})
	if err != nil {
		if ferr := s.failure(); ferr != nil {
			return Outcome{}, writeError(ferr)
		}
		return Outcome{}, temporal.NewNonRetryableApplicationError("the worker could not start the child: "+err.Error(), ErrChild, nil)
	}
	if !s.isOpen() { // the runtime's sessions do not go through Worker.Sessions
		stopChild()
		run.Dispose(wctx)
		return Outcome{}, temporal.NewNonRetryableApplicationError("the worker's runtime does not keep its sessions through Worker.Sessions", ErrChild, nil)
	}
	handedBack := a.follow(ctx, run.Done(), activity.GetWorkerStopChannel(ctx), func() { activity.RecordHeartbeat(ctx, s.length()) }, s, stopChild)
	res, _ := run.Wait(wctx)
	derr := run.Dispose(wctx)
	switch {
	case handedBack:
		return Outcome{}, temporal.NewApplicationError(fmt.Sprintf("the worker stopped or lost the child's activity (%v); the child goes on on another attempt",
			context.Cause(ctx)), ErrHandedBack)
	case s.failure() != nil:
		return Outcome{}, writeError(s.failure())
	case derr != nil:
		return Outcome{}, temporal.NewApplicationErrorWithCause("close the child: "+derr.Error(), ErrCheckpoint, derr)
	}
	tail, err := s.finish()
	if err != nil {
		return Outcome{}, writeError(err)
	}
	return Outcome{StopReason: res.StopReason, Diagnostic: res.Diagnostic, Tail: tail}, nil
}

// follow heartbeats until the run's done closes. Only the workflow's
// cancellation (a cancelled activity) cancels the child, whose turn ends
// aborted. Any other end of the activity's ctx hands the child back: the
// worker stopping, or the activity lost (the SDK gives an attempt up when
// the cluster, overloaded, does not answer a heartbeat in time, or when the
// attempt has timed out there). The child's log is silenced and the child
// stopped: the step it was in will be done again by the next attempt. The
// first heartbeat goes a tick after the start (the heartbeat timeout runs
// from the start): a short child costs the cluster no heartbeat.
func (a *activities) follow(ctx context.Context, done, stopping <-chan struct{}, heartbeat func(), s *sink, stop func()) (handedBack bool) {
	tick := time.NewTicker(a.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false
		case <-tick.C:
			heartbeat()
		case <-ctx.Done():
			handedBack = !temporal.IsCanceledError(context.Cause(ctx))
			if handedBack {
				s.silence()
			}
			stop()
			<-done
			return handedBack
		case <-stopping:
			s.silence()
			stop()
			<-done
			return true
		}
	}
}

// writeError is the attempt's error when writing the log failed: the child
// goes on on another worker unless this attempt was superseded.
func writeError(err error) error {
	if superseded(err) {
		return temporal.NewNonRetryableApplicationError("the child moved on to another attempt: "+err.Error(), ErrSuperseded, nil)
	}
	return temporal.NewApplicationErrorWithCause("write the child's log: "+err.Error(), ErrCheckpoint, err)
}

// request is the start request the in-process driver gets for in. It
// checks again what the parent's service checked: a worker does not trust
// its input more than its configuration.
func (a *activities) request(in Input) (subagent.StartRequest, error) {
	policy := a.host.Policy.NarrowBy(in.Policy)
	req := subagent.StartRequest{Label: in.Label, Prompt: in.Prompt, AgentOptions: in.AgentOptions, MaxDepth: in.MaxDepth,
		ToolFilter: in.ToolFilter, Persona: in.Persona, Policy: &policy, Depth: in.Depth}
	switch {
	case in.SessionID == "" || len(in.Prompt) == 0:
		return req, fmt.Errorf("the child's input has no session id or no prompt")
	case in.Depth < 1:
		return req, fmt.Errorf("the child's depth %d is not positive", in.Depth)
	case in.MaxDepth != nil && in.Depth > *in.MaxDepth:
		return req, fmt.Errorf("subagent depth %d exceeds maxDepth %d", in.Depth, *in.MaxDepth)
	}
	if len(in.OutputSchema) > 0 {
		var schema jsonschema.Schema
		if err := json.Unmarshal(in.OutputSchema, &schema); err != nil {
			return req, fmt.Errorf("output schema: %w", err)
		}
		if err := subagent.CheckSchema(&schema); err != nil {
			return req, err
		}
		req.OutputSchema = &schema
	}
	return req, nil
}
