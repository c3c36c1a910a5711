package inproc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

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

// run is one delegation to an in-process child. It holds no goroutine: the
// child's turn-end callback settles it.
type run struct {
	h            *handle
	capture      *Capture // nil without an output schema
	msgID        string   // the task message; cancelling it cancels the run
	fromSeq      int      // the child's events from here on are this run's own
	stopProgress func()
	cancelled    atomic.Bool
	structured   bool
	finished     bool                       // guarded by mu (beside the other flags, so that run stays in its 176-byte class: TestRunSize)
	held         atomic.Pointer[agent.Held] // a foreground task, waiting for Wait to start it
	startCtx     context.Context            // governs a held task until Wait takes it

	mu         sync.Mutex
	stopParent func() bool // stops relaying the start ctx's cancellation

	subagent.Settlement
	disposeOnce sync.Once
	disposeErr  error
}

func newRun(h *handle, c *Capture, structured bool) *run {
	return &run{h: h, capture: c, structured: structured, fromSeq: h.agent.Session().Len()}
}

// start sends the task to the child and reports its activity to progress.
// The start ctx governs the run: its cancellation reaches the child with
// cause "parent". A foreground task is only queued: Wait runs it on the
// waiting goroutine.
func (r *run) start(ctx context.Context, msg content.Message, foreground bool, progress func(subagent.Progress)) {
	r.msgID = msg.ID
	r.stopProgress = subagent.SessionProgress(r.h.agent.Session(), progress)
	var err error
	if foreground {
		var held *agent.Held
		r.startCtx = ctx
		if held, err = r.h.agent.Hold(msg, r.finish); err == nil {
			r.held.Store(held)
		}
	} else {
		err = r.h.agent.Submit(msg, r.finish)
	}
	if err != nil {
		r.stopProgress()
		r.Settle(subagent.Result{StopReason: subagent.Failed, Diagnostic: subagent.Diagnostic(err.Error())})
		return
	}
	// Registered after Submit, so that a ctx already cancelled still
	// reaches the queued message.
	stop := r.relay(ctx)
	if stop == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		stop()
		return
	}
	r.stopParent = stop
}

// relay arranges for ctx's cancellation to abort the run with cause
// parent, and returns the arrangement's stop: nil for a ctx that cannot
// end, which needs none. A ctx with its own AfterFunc method (the one
// context.AfterFunc's documentation names) holds the abort itself: a
// background task's context does, without the children map and done
// channel a cancel context makes for each function registered on it (see
// task.Runtime.Start).
func (r *run) relay(ctx context.Context) (stop func() bool) {
	if c, ok := ctx.(interface{ AfterFunc(func()) func() bool }); ok {
		return c.AfterFunc(func() { r.abort(agent.CauseParent) })
	}
	if ctx.Done() == nil {
		return nil
	}
	return context.AfterFunc(ctx, func() { r.abort(agent.CauseParent) })
}

// Wait implements subagent.Run. The first Wait of a foreground run (see
// subagent.Service.Delegate) runs the child's turn on the calling
// goroutine when ctx cannot end, and otherwise on a goroutine of its own.
func (r *run) Wait(ctx context.Context) (subagent.Result, error) {
	if held := r.held.Swap(nil); held != nil {
		if r.startCtx.Err() != nil { // do not race the start ctx's relay
			r.abort(agent.CauseParent)
		}
		if ctx.Done() == nil {
			held.RunHere()
		} else {
			held.Release()
		}
	}
	return r.Settlement.Wait(ctx)
}

// abort cancels the run's turn, or drops its task while queued.
func (r *run) abort(kind string) {
	r.cancelled.Store(true)
	r.h.agent.CancelMessage(r.msgID, session.Cause{Kind: kind})
}

// finish settles the run from the end of the child's turn.
func (r *run) finish(end session.TurnEnd) {
	r.mu.Lock()
	r.finished = true
	if r.stopParent != nil {
		r.stopParent()
	}
	r.mu.Unlock()
	r.stopProgress()
	own := r.h.agent.Session().Events()[r.fromSeq:]
	res := subagent.LogOutcome(own)
	res.StopReason, res.Diagnostic = subagent.StopOf(end)
	if v, ok := r.capture.Value(); ok {
		res.Structured = v
	} else if r.structured && res.StopReason == subagent.Completed {
		res.StopReason, res.Diagnostic = subagent.Failed, "the child finished without calling structured_output"
	}
	if r.cancelled.Load() && res.StopReason != subagent.Completed {
		res.StopReason = subagent.Aborted
	}
	r.Settle(res)
}

// ID implements subagent.Run: the child's session id.
func (r *run) ID() string { return r.h.agent.ID() }

// LocalAgent implements subagent.Run.
func (r *run) LocalAgent() *agent.Agent { return r.h.agent }

// Dispose implements subagent.Run: it cancels the child, waits for the run
// to settle and, unless a resume took the child over, disposes it.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		r.abort(agent.CauseDisposed)
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
func (r *run) Resume(ctx context.Context, req subagent.ResumeRequest) (subagent.Run, error) {
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
	next := newRun(r.h, nil, false)
	r.h.owner = next
	next.start(ctx, content.UserMessage(req.Prompt...), false, req.Progress)
	return next, nil
}
