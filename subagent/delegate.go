package subagent

import (
	"context"
	"errors"
)

// One road to a child.
//
// Delegate is the one way a caller runs a child: the subagent tool in
// every mode, `dsh mcp` (which runs that tool) and embedders. It admits
// the child, starts it, waits for it or leaves it in the background, and
// settles and disposes it, whether it is one-shot or continuable,
// foreground or background, in process or not. The shape: a continuable
// child is the general case (a durable session, resident while it has
// work, continued by Followup), and a one-shot child is one that is
// released at its first settlement; both report that first settlement
// through the same Delegation. Service.Start stays beneath it as the
// provider-level call whose Run the caller owns (the conformance suite's).

// DelegateOptions choose how Delegate runs a child.
type DelegateOptions struct {
	// Continuable keeps the child after it settles so that Followup can
	// give it more work: resident while it has work, stored otherwise. The
	// provider must continue children and sessions must outlive the
	// process (see CanContinue); the request takes no output schema.
	Continuable bool
	// Background returns once the child has started instead of once it
	// settled; AfterSettle callbacks hear of its first settlement, and so
	// does a continuable child's parent, in a notice. A one-shot child
	// runs under ctx (its cancellation aborts it); a continuable one
	// outlives it (ctx governs its start).
	Background bool
	// Started, when set, is called with the child's id once it exists,
	// before Delegate returns.
	Started func(childID string)
	// Settled, when set, is called with the first settlement's result
	// before anyone else hears of it (a waiter, AfterSettle callbacks, a
	// continuable child's parent): a background child's SubagentStop hooks.
	Settled func(Result)
	// ChildID reserves a continuable child's id (see ContinuableOptions).
	ChildID string
}

// Delegation is a child that Delegate started, followed to its first
// settlement. A one-shot child is disposed by then; a continuable one
// stays the service's, known by ChildID.
type Delegation struct {
	// ChildID is the child's id: its session id for an in-process child,
	// the run's id for a one-shot out-of-process one.
	ChildID string
	// Continuable reports that the child outlives its first settlement.
	Continuable bool
	// Local reports that the child ran in this process, so that its whole
	// answer is in its session.
	Local bool

	settlement Settlement
	svc        *Service
	run        Run          // a one-shot child's; nil for a continuable one
	settled    func(Result) // DelegateOptions.Settled
}

// Wait returns the first settlement's result, or ctx's cause if ctx ends
// first. A teardown failure is in Result.Teardown, not an error.
func (d *Delegation) Wait(ctx context.Context) (Result, error) { return d.settlement.Wait(ctx) }

// Done is closed at the first settlement.
func (d *Delegation) Done() <-chan struct{} { return d.settlement.Done() }

// AfterSettle calls fn with the first settlement's result, once it is
// known: on the settling goroutine, or at once when that is past.
func (d *Delegation) AfterSettle(fn func(Result)) { d.settlement.AfterSettle(fn) }

// Stop aborts the child's current work, and its children's: a one-shot
// child's run, or a continuable child's turn (with the user's authority:
// see Service.InterruptChildren), which ends it even before its first
// turn began, and whose end then wakes no one.
func (d *Delegation) Stop() {
	if d.run != nil {
		go d.run.Dispose(context.Background()) // the settlement reports its error
		return
	}
	d.svc.InterruptChildren([]string{d.ChildID}, "stopped by the call that delegated it")
}

// Delegate runs a child on the named provider as opts say; see the road
// above. It returns the error of a start refused or failed, and no
// delegation; otherwise a foreground delegation has settled (a child
// that could not be waited for settles Failed with the error as its
// diagnostic). Cancelling ctx aborts a foreground child, and Delegate
// still returns only once it has settled.
func (s *Service) Delegate(ctx context.Context, name string, req StartRequest, opts DelegateOptions) (*Delegation, error) {
	if opts.Continuable {
		return s.delegateContinuable(ctx, name, req, opts)
	}
	adm, err := s.Admit(name, req)
	if err != nil {
		return nil, err
	}
	return adm.Delegate(ctx, opts)
}

// Delegate starts the admitted one-shot child as Service.Delegate does; an
// admission is used at most once. A caller that must know of a refusal
// before it commits to a background run (a task) admits first.
func (a *Admission) Delegate(ctx context.Context, opts DelegateOptions) (*Delegation, error) {
	if opts.Continuable {
		a.Release()
		return nil, invalid("delegate: an admission starts a one-shot child")
	}
	a.req.Foreground = !opts.Background // the wait below cannot end early
	run, err := a.Start(ctx)
	if err != nil {
		return nil, err
	}
	d := &Delegation{ChildID: run.ID(), Local: run.LocalAgent() != nil, svc: a.s, run: run, settled: opts.Settled}
	if opts.Started != nil {
		opts.Started(d.ChildID)
	}
	if !opts.Background {
		res, werr := run.Wait(context.Background()) // see StartRequest.Foreground: this wait cannot end early
		d.finish(a.name, res, werr)
		return d, nil
	}
	name := a.name // not a: a parked child need not hold its admission and the request in it
	if sn, ok := run.(SettleNotifier); ok {
		// The callback runs on the child's goroutine, which Dispose waits
		// for: finish on a goroutine of its own.
		sn.AfterSettle(func(res Result) { go d.finish(name, res, nil) })
	} else {
		go func() {
			res, werr := run.Wait(context.Background())
			d.finish(name, res, werr)
		}()
	}
	return d, nil
}

// finish disposes a settled one-shot child of the named provider and
// settles the delegation with res: a wait that failed (werr) settles it
// Failed, a failed disposal keeps res with Result.Teardown set.
func (d *Delegation) finish(provider string, res Result, werr error) {
	derr := d.run.Dispose(context.Background())
	switch {
	case werr != nil:
		res = Result{StopReason: Failed, Diagnostic: Diagnostic(errors.Join(werr, derr).Error()), Output: res.Output, Usage: res.Usage}
	case derr != nil:
		res.Teardown = d.svc.TeardownFailure(provider, d.ChildID, res.StopReason, derr)
	}
	d.settle(res, d.settled)
}

// delegateContinuable is Delegate for a continuable child. Its
// delegation settles once the first activation's end is announced, so
// that whoever hears of it finds the child released.
func (s *Service) delegateContinuable(ctx context.Context, name string, req StartRequest, opts DelegateOptions) (*Delegation, error) {
	d := &Delegation{Continuable: true, svc: s}
	co := ContinuableOptions{ChildID: opts.ChildID, Foreground: !opts.Background, Settled: opts.Settled}
	if !opts.Background {
		co.Settled = nil // the foreground settlement below tells it
	}
	acc, err := s.StartContinuable(ctx, name, req, co)
	if err != nil {
		return nil, err
	}
	d.ChildID = acc.ChildID
	p, _ := s.Provider(name)
	_, d.Local = p.(Continuer)
	if opts.Started != nil {
		opts.Started(d.ChildID)
	}
	if opts.Background {
		acc.afterEnd(func(res Result) { d.settlement.Settle(res) })
		return d, nil
	}
	acc.afterEnd(func(res Result) { d.settle(res, opts.Settled) })
	// The caller's cancellation interrupts the child's turn; the child then
	// settles aborted.
	stop := context.AfterFunc(ctx, d.Stop)
	defer stop()
	<-d.Done()
	return d, nil
}

// settle records the first settlement, telling first (when set) before
// anyone else.
func (d *Delegation) settle(res Result, first func(Result)) {
	if first != nil {
		first(res)
	}
	d.settlement.Settle(res)
}
