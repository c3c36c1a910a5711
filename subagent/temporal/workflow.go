package temporal

import (
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/dsh-go/dsh/subagent"
)

// The types of the application errors an attempt or a checkpoint fails
// with.
const (
	// ErrSuperseded: the checkpoint is not from the workflow's current
	// attempt, or does not continue its log.
	ErrSuperseded = "Superseded"
	// ErrHistoryFull: the workflow's history is near Temporal's limits.
	ErrHistoryFull = "HistoryFull"
	// ErrHandedBack: the attempt's worker is stopping, or the attempt lost
	// its activity (a heartbeat the cluster did not answer); the child goes
	// on on another attempt.
	ErrHandedBack = "HandedBack"
	// ErrCheckpoint: the attempt could not read or extend the log; the
	// child goes on on another worker.
	ErrCheckpoint = "CheckpointFailed"
	// ErrChild: the worker could not build or run the child.
	ErrChild = "ChildFailed"
)

// History bounds past which the workflow refuses checkpoints, under
// Temporal's limits of 50 MiB and 51,200 events.
const (
	maxHistoryBytes  = 40 << 20
	maxHistoryEvents = 40_000
)

// logState is what the workflow keeps of the child's log: its length and the
// attempt allowed to extend it. The events themselves stay in the history,
// as the checkpoints' arguments.
type logState struct {
	attempt int
	length  int
	// running is the current attempt's activity. Once it has ended (timed
	// out: its worker was taken for dead), the attempt may write no more,
	// even before the next one is scheduled: a worker that was only slow
	// would otherwise write the end of a child it no longer runs.
	running workflow.Future
}

// check reports whether cp extends the log: it comes from the current
// attempt, which is still running, and continues the log exactly.
func (l *logState) check(cp Checkpoint) error {
	if l.running != nil && l.running.IsReady() {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("checkpoint of attempt %d, which has ended", cp.Attempt), ErrSuperseded, nil)
	}
	return l.continues(cp)
}

// continues reports whether cp, of the current attempt, continues the log
// exactly: check without the attempt's being still running, which the
// tail of its outcome is not.
func (l *logState) continues(cp Checkpoint) error {
	if cp.Attempt != l.attempt {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("checkpoint of attempt %d, but attempt %d runs the child", cp.Attempt, l.attempt), ErrSuperseded, nil)
	}
	if cp.From != l.length {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("checkpoint continues the log at %d, but it holds %d events", cp.From, l.length), ErrSuperseded, nil)
	}
	for i, e := range cp.Events {
		if e.Seq != int64(cp.From+i) || e.Type == "" {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("checkpoint event %d has seq %d and type %q", cp.From+i, e.Seq, e.Type), ErrSuperseded, nil)
		}
	}
	return nil
}

// Workflow is a child's workflow: it runs attempts of the child until one
// ends it, starting the next attempt from the log so far when a worker
// died or stopped, at most in.MaxResumes times. A cancelled workflow
// cancels its attempt, waits until the child has stopped and ends
// cancelled.
func Workflow(ctx workflow.Context, in Input) (Outcome, error) {
	l := &logState{}
	err := workflow.SetUpdateHandlerWithOptions(ctx, CheckpointUpdate,
		func(ctx workflow.Context, cp Checkpoint) error {
			if err := l.check(cp); err != nil {
				return err
			}
			l.length += len(cp.Events)
			return nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, cp Checkpoint) error {
			if info := workflow.GetInfo(ctx); info.GetCurrentHistorySize() > maxHistoryBytes || info.GetCurrentHistoryLength() > maxHistoryEvents {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the child's history holds %d events (%d bytes), near Temporal's limits",
					info.GetCurrentHistoryLength(), info.GetCurrentHistorySize()), ErrHistoryFull, nil)
			}
			return l.check(cp)
		}})
	if err != nil {
		return Outcome{}, err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: in.RunTimeout,
		HeartbeatTimeout:    in.HeartbeatTimeout,
		WaitForCancellation: true,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	for {
		l.attempt++
		var out Outcome
		l.running = workflow.ExecuteActivity(actx, ActivityName, Attempt{Input: in, Attempt: l.attempt, From: l.length})
		err := l.running.Get(actx, &out)
		if ctx.Err() != nil {
			return Outcome{}, temporal.NewCanceledError()
		}
		if err == nil && out.Tail != nil {
			if terr := l.continues(*out.Tail); terr != nil {
				return Outcome{StopReason: subagent.Failed, Diagnostic: diagnostic(terr, l.attempt), LogLen: l.length}, nil
			}
			l.length += len(out.Tail.Events)
			out.Tail = nil
		}
		if err == nil {
			out.LogLen = l.length
			return out, nil
		}
		if !resumable(err) || l.attempt > in.MaxResumes {
			return Outcome{StopReason: subagent.Failed, Diagnostic: diagnostic(err, l.attempt), LogLen: l.length}, nil
		}
		workflow.GetLogger(ctx).Info("the child continues on another worker", "attempt", l.attempt+1, "from", l.length, "cause", err)
	}
}

// resumable reports whether an attempt ended because of its worker, so
// that another worker may continue the child: the worker went silent, was
// stopping, or lost the cluster.
func resumable(err error) bool {
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT
	}
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && (ae.Type() == ErrHandedBack || ae.Type() == ErrCheckpoint)
}

// diagnostic explains why a child's workflow failed it.
func diagnostic(err error, attempts int) string {
	var te *temporal.TimeoutError
	switch {
	case errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT:
		return subagent.Diagnostic(fmt.Sprintf("the child's worker went silent %d times; giving up (maxResumes)", attempts))
	case errors.As(err, &te):
		return "the child ran longer than its runTimeout"
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return subagent.Diagnostic(ae.Message())
	}
	return subagent.Diagnostic(err.Error())
}
