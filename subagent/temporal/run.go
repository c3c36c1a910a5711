package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// run is one child's workflow, followed through its history.
type run struct {
	p          *Provider
	in         Input
	wfID       string
	runID      string
	structured bool
	progress   func(subagent.Progress)
	store      *session.Store
	cwd        string // the parent's: the replica is filed with its parent's sessions

	ready      chan struct{} // closed at the first checkpoint the workflow accepted
	readyOnce  sync.Once
	stopWatch  context.CancelFunc
	watched    chan struct{} // closed when the watcher has returned
	aborting   atomic.Bool   // the parent cancelled or terminated the workflow
	stopRelay  func() bool
	relayed    chan struct{} // closed when the relayed cancellation has been sent
	terminated atomic.Bool

	// The replica of the child's log in the parent's store; only the
	// watcher touches them.
	replica      *session.Session
	add          func([]session.Event) error
	detach       func() error
	stopProgress func()
	replicaErr   error

	subagent.Settlement
	disposeOnce sync.Once
	disposeErr  error
}

func newRun(p *Provider, req subagent.StartRequest, in Input, wfID, runID string) *run {
	store := p.cfg.Sessions
	if store == nil {
		store = session.NewStore(nil, nil)
	}
	r := &run{p: p, in: in, wfID: wfID, runID: runID, structured: req.OutputSchema != nil, progress: req.Progress, store: store,
		cwd: req.Parent.Cwd(), ready: make(chan struct{}), watched: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.stopWatch = cancel
	go r.watch(ctx)
	return r
}

// ID implements subagent.Run: the child's session id.
func (r *run) ID() string { return r.in.SessionID }

// LocalAgent implements subagent.Run: nil, the child is remote.
func (r *run) LocalAgent() *agent.Agent { return nil }

// awaitReady returns once a worker has claimed the child. Otherwise (ctx
// ended, readyTimeout passed, or the workflow ended unclaimed) it
// terminates the workflow, waits for the watcher and fails.
func (r *run) awaitReady(ctx context.Context) error {
	timer := time.NewTimer(r.p.cfg.ReadyTimeout)
	defer timer.Stop()
	var err error
	select {
	case <-r.ready:
		if ctx.Err() == nil {
			return nil
		}
		err = subagent.AbortedBeforeReady(r.p.cfg.Name, context.Cause(ctx))
	case <-ctx.Done():
		err = subagent.AbortedBeforeReady(r.p.cfg.Name, context.Cause(ctx))
	case <-timer.C:
		err = &Error{Code: CodeNoWorker, Msg: fmt.Sprintf("no worker claimed the child within readyTimeout (%s): the workers of task queue %s are busy, stuck or gone",
			r.p.cfg.ReadyTimeout, r.p.cfg.TaskQueue)}
	case <-r.Done():
		select {
		case <-r.ready: // claimed by the outcome of its only attempt
			if ctx.Err() == nil {
				return nil
			}
			err = subagent.AbortedBeforeReady(r.p.cfg.Name, context.Cause(ctx))
		default:
			res, _ := r.Wait(context.Background())
			err = &Error{Code: CodeRefused, Msg: "the child's workflow ended before a worker claimed it: " + res.Diagnostic}
		}
	}
	r.aborting.Store(true)
	if terr := r.terminate(context.Background(), "the parent gave up before a worker claimed the child"); terr != nil {
		err = errors.Join(err, terr)
	}
	return err
}

// relayCancel cancels the workflow when the start ctx ends.
func (r *run) relayCancel(ctx context.Context) {
	r.relayed = make(chan struct{})
	r.stopRelay = context.AfterFunc(ctx, func() {
		defer close(r.relayed)
		r.aborting.Store(true)
		r.cancel(context.Background())
	})
}

// rpcTimeout bounds each call the run makes to the cluster.
func (r *run) rpcTimeout() time.Duration { return r.p.cfg.ReadyTimeout }

// cancel asks the workflow to cancel its child.
func (r *run) cancel(ctx context.Context) {
	ctx, done := context.WithTimeout(ctx, r.rpcTimeout())
	defer done()
	if err := r.p.client.CancelWorkflow(ctx, r.wfID, r.runID); err != nil && !closed(err) {
		r.p.cfg.Log.Warn("temporal: cancel a child", "workflow", r.wfID, "err", err)
	}
}

// terminate ends the workflow at once and waits until the watcher has seen
// it end; the child's worker learns it at its next heartbeat.
func (r *run) terminate(ctx context.Context, reason string) error {
	r.terminated.Store(true)
	tctx, done := context.WithTimeout(context.WithoutCancel(ctx), r.rpcTimeout())
	defer done()
	if err := r.p.client.TerminateWorkflow(tctx, r.wfID, r.runID, reason); err != nil && !closed(err) {
		r.stopWatch()
		<-r.watched
		return &Error{Code: CodeCluster, Msg: "terminate the child's workflow " + r.wfID, Err: err}
	}
	select {
	case <-r.watched:
		return nil
	case <-tctx.Done():
	case <-ctx.Done():
	}
	r.stopWatch()
	<-r.watched
	return &Error{Code: CodeCluster, Msg: "the child's workflow " + r.wfID + " was terminated, but its end was not seen"}
}

// closed reports whether err says the workflow has already ended.
func closed(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// Dispose implements subagent.Run: it cancels the workflow, waits up to
// cancelGrace for the child to stop, then terminates the workflow; it
// returns once the workflow is closed.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() { r.disposeErr = r.dispose(ctx) })
	return r.disposeErr
}

func (r *run) dispose(ctx context.Context) error {
	if r.stopRelay != nil && !r.stopRelay() {
		<-r.relayed // the relay's call is under way: no goroutine outlives Dispose
	}
	select {
	case <-r.Done():
		<-r.watched
		return nil
	default:
	}
	r.aborting.Store(true)
	r.cancel(ctx)
	grace := time.NewTimer(r.p.cfg.CancelGrace)
	defer grace.Stop()
	select {
	case <-r.Done():
		<-r.watched
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	return r.terminate(ctx, "disposed: the child did not stop within cancelGrace")
}

// watch follows the workflow's history until it closes, replicating the
// child's log and settling the run. A broken long poll is resumed after
// the last event seen.
func (r *run) watch(ctx context.Context) {
	defer close(r.watched)
	var reader logReader
	var last int64
	backoff := 100 * time.Millisecond
	var lastErr error
	for {
		it := r.p.client.GetWorkflowHistory(ctx, r.wfID, r.runID, true, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				lastErr = err
				break
			}
			if e.GetEventId() <= last {
				continue
			}
			last, backoff = e.GetEventId(), 100*time.Millisecond
			if r.event(&reader, e) {
				return
			}
		}
		if ctx.Err() != nil {
			r.settle(subagent.Result{StopReason: subagent.Aborted,
				Diagnostic: subagent.Diagnostic(fmt.Sprintf("the end of the child's workflow %s was not seen (last error: %v)", r.wfID, lastErr))})
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// event handles one history event and reports whether the workflow closed.
func (r *run) event(reader *logReader, e *historypb.HistoryEvent) (closed bool) {
	cp, err := reader.add(e)
	switch {
	case err != nil:
		r.replicaFailed(err)
	case cp != nil:
		r.apply(cp)
	}
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		r.settle(r.result(e))
		return true
	}
	return false
}

// apply copies an accepted checkpoint into the replica, which the first
// one (the claim: readiness) creates. The replica's header is the parent's
// view: the lineage it asked for, and its own working directory (the
// worker's is a path of another host), so that the child is listed with
// its parent's sessions.
func (r *run) apply(cp *Checkpoint) {
	r.readyOnce.Do(func() {
		defer close(r.ready)
		h := session.Header{ID: r.in.SessionID, CreatedAt: time.Now().UnixMilli(), Cwd: r.cwd, ParentSession: r.in.ParentSession,
			Origin: session.OriginSubagent, DelegationDepth: r.in.Depth}
		if cp.Header != nil && cp.Header.CreatedAt > 0 {
			h.CreatedAt = cp.Header.CreatedAt
		}
		s, add, detach, err := r.store.Replicate(h)
		if err != nil {
			r.replicaFailed(err)
			return
		}
		r.replica, r.add, r.detach = s, add, detach
		r.stopProgress = subagent.SessionProgress(s, r.progress)
	})
	if r.add != nil && r.replicaErr == nil && len(cp.Events) > 0 {
		if err := r.add(cp.Events); err != nil {
			r.replicaFailed(err)
		}
	}
}

func (r *run) replicaFailed(err error) {
	if r.replicaErr == nil {
		r.replicaErr = err
		r.p.cfg.Log.Warn("temporal: the child's log cannot be kept", "child", r.in.SessionID, "err", err)
	}
}

// result is the run's result once its workflow closed with e: what the
// child's log shows when its turn ended, else what the workflow says.
func (r *run) result(e *historypb.HistoryEvent) subagent.Result {
	var events []session.Event
	if r.replica != nil {
		events = r.replica.Events()
	}
	res, ended := inproc.LogResult(events, r.structured)
	if !ended {
		res = subagent.Result{Output: subagent.FinalOutput(events), Usage: subagent.UsageFromEvents(events), StopReason: subagent.Failed}
	}
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		var out Outcome
		if err := converter.GetDefaultDataConverter().FromPayloads(e.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &out); err != nil {
			res.StopReason, res.Diagnostic = subagent.Failed, subagent.Diagnostic("the child's outcome does not decode: "+err.Error())
		} else if !ended {
			res.StopReason, res.Diagnostic = out.StopReason, out.Diagnostic
		}
		if r.replicaErr == nil && out.LogLen != len(events) {
			r.replicaFailed(fmt.Errorf("the log holds %d events, the workflow %d", len(events), out.LogLen))
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		if !ended {
			res.StopReason = subagent.Aborted
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		if !ended && !r.terminated.Load() {
			a := e.GetWorkflowExecutionTerminatedEventAttributes()
			res.Diagnostic = subagent.Diagnostic(fmt.Sprintf("the child's workflow was terminated by %s: %s", a.GetIdentity(), a.GetReason()))
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		if !ended {
			res.Diagnostic = fmt.Sprintf("the child ran longer than its runTimeout (%s)", r.in.RunTimeout)
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		if !ended {
			res.Diagnostic = subagent.Diagnostic("the child's workflow failed: " + e.GetWorkflowExecutionFailedEventAttributes().GetFailure().GetMessage())
		}
	default:
		if !ended {
			res.Diagnostic = "the child's workflow continued as new, which dsh never asks for"
		}
	}
	if r.aborting.Load() && res.StopReason != subagent.Completed {
		res.StopReason = subagent.Aborted
	}
	return res
}

// settle closes the replica and settles the run.
func (r *run) settle(res subagent.Result) {
	if r.stopProgress != nil {
		r.stopProgress()
	}
	if r.detach != nil {
		if err := r.detach(); err != nil {
			r.replicaFailed(err)
		}
	}
	r.Settle(res)
}
