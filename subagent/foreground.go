package subagent

import (
	"context"
	"errors"
)

// Delegate runs a foreground delegation: it starts a child like Start,
// calls started (when non-nil) with the run, waits on the calling
// goroutine for the run to settle and disposes it. Cancelling ctx aborts
// the child, and Delegate still returns only once it has settled.
//
// Because Delegate waits at once and with a wait that cannot end early,
// it sets StartRequest.Foreground: an in-process child may then run its
// turn on the calling goroutine instead of a goroutine of its own.
//
// It returns Start's error and a nil run when no child started;
// otherwise the disposed run, its result, and the error of waiting for
// it, if any. A failure to dispose a run that settled keeps its result:
// it is logged and carried in Result.Teardown (ACTIVATION_TEARDOWN_FAILED).
func (s *Service) Delegate(ctx context.Context, name string, req StartRequest, started func(Run)) (Run, Result, error) {
	adm, err := s.Admit(name, req)
	if err != nil {
		return nil, Result{}, err
	}
	adm.req.Foreground = true
	run, err := adm.Start(ctx)
	if err != nil {
		return nil, Result{}, err
	}
	if started != nil {
		started(run)
	}
	res, werr := run.Wait(context.WithoutCancel(ctx))
	derr := run.Dispose(context.WithoutCancel(ctx))
	if werr != nil {
		return run, res, errors.Join(werr, derr)
	}
	if derr != nil {
		res.Teardown = s.teardownFailed(name, run.ID(), res.StopReason, derr)
	}
	return run, res, nil
}

// teardownFailed logs that child's run settled with stop but could not be
// disposed, and returns the error Result.Teardown carries.
func (s *Service) teardownFailed(provider, child string, stop StopReason, err error) error {
	s.log.Warn("subagent: teardown failed; the child's outcome stands", "child", child,
		"code", CodeTeardownFailed, "stop", stop, "err", err)
	return TeardownFailed(provider, child, err)
}
