package inproc

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// handle is a child agent and the run that currently owns it; a resume
// moves ownership to the new run.
type handle struct {
	agent    *agent.Agent
	mu       sync.Mutex
	owner    *run
	disposed bool
}

// run is one delegation to an in-process child.
type run struct {
	h          *handle
	capture    *capture
	structured bool
	progress   func(subagent.Progress)
	ctx        context.Context
	cancel     context.CancelCauseFunc
	stopParent func() bool // stops relaying the start ctx's cancellation
	fromSeq    int         // the child's events from here on are this run's own

	subagent.Settlement
	disposeOnce sync.Once
	disposeErr  error
}

func newRun(ctx context.Context, h *handle, c *capture, structured bool, progress func(subagent.Progress)) *run {
	// The start ctx governs the run; its cancellation reaches the child
	// with cause "parent".
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r := &run{h: h, capture: c, structured: structured, progress: progress, ctx: rctx, cancel: cancel,
		fromSeq: h.agent.Session().Len()}
	r.stopParent = context.AfterFunc(ctx, func() {
		cancel(&agent.CancelError{Cause: session.Cause{Kind: agent.CauseParent}})
	})
	return r
}

// drive sends the task, waits for the child's turn and settles the result.
func (r *run) drive(msg content.Message) {
	defer r.stopParent()
	stop := subagent.SessionProgress(r.h.agent.Session(), r.progress)
	defer stop()
	end, err := r.h.agent.Run(r.ctx, msg)
	own := r.h.agent.Session().Events()[r.fromSeq:]
	res := subagent.Result{Output: subagent.FinalOutput(own), Usage: subagent.UsageFromEvents(own)}
	switch {
	case err != nil:
		res.StopReason, res.Diagnostic = subagent.Failed, subagent.Diagnostic(err.Error())
	default:
		res.StopReason, res.Diagnostic = stopReason(end)
	}
	if v, ok := r.capture.get(); ok {
		res.Structured = v
	} else if r.structured && res.StopReason == subagent.Completed {
		res.StopReason, res.Diagnostic = subagent.Failed, "the child finished without calling structured_output"
	}
	if r.ctx.Err() != nil && res.StopReason != subagent.Completed {
		res.StopReason = subagent.Aborted
	}
	r.Settle(res)
}

// stopReason maps a turn end to a stop reason and diagnostic.
func stopReason(end session.TurnEnd) (subagent.StopReason, string) {
	switch end.Reason.Kind {
	case session.EndCompleted:
		return subagent.Completed, ""
	case session.EndMaxTokens:
		return subagent.MaxTokens, ""
	case session.EndAborted:
		return subagent.Aborted, ""
	case session.EndBlocked:
		return subagent.Refusal, ""
	}
	if f := end.Reason.Error; f != nil {
		return subagent.Failed, subagent.Diagnostic(fmt.Sprintf("%s: %s", f.Code, f.Message))
	}
	return subagent.Failed, "the child's turn ended " + end.Reason.Kind
}

// ID implements subagent.Run: the child's session id.
func (r *run) ID() string { return r.h.agent.ID() }

// LocalAgent implements subagent.Run.
func (r *run) LocalAgent() *agent.Agent { return r.h.agent }

// Dispose implements subagent.Run: it cancels the child, waits for the run
// to settle and, unless a resume took the child over, disposes it.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		r.cancel(&agent.CancelError{Cause: session.Cause{Kind: agent.CauseDisposed}})
		<-r.Done()
		r.h.mu.Lock()
		owns := r.h.owner == r
		if owns {
			r.h.disposed = true
		}
		r.h.mu.Unlock()
		if owns {
			r.disposeErr = r.h.agent.Dispose(context.WithoutCancel(ctx))
		}
	})
	return r.disposeErr
}

// SendMessage implements subagent.Steerer: msg reaches the running child at
// its next step boundary.
func (r *run) SendMessage(ctx context.Context, msg []content.Block) error {
	select {
	case <-r.Done():
		return errors.New("inproc: the run has settled; use Resume")
	default:
	}
	return r.h.agent.Steer(content.UserMessage(msg...))
}

// Resume implements subagent.Resumer: a settled child takes a follow-up task
// in the same session, as a new run that now owns the child.
func (r *run) Resume(ctx context.Context, msg []content.Block) (subagent.Run, error) {
	select {
	case <-r.Done():
	default:
		return nil, errors.New("inproc: the run has not settled; use SendMessage")
	}
	if ctx.Err() != nil {
		return nil, subagent.AbortedBeforeReady("inproc", context.Cause(ctx))
	}
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	switch {
	case r.h.disposed:
		return nil, errors.New("inproc: the run was disposed")
	case r.h.owner != r:
		return nil, errors.New("inproc: the child was already resumed")
	}
	next := newRun(ctx, r.h, &capture{}, false, r.progress)
	r.h.owner = next
	go next.drive(content.UserMessage(msg...))
	return next, nil
}
