package continuable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/telemetry"
)

// startRemote starts a continuable child on an out-of-process provider.
func (c *manager) startRemote(ctx context.Context, name string, p subagent.RemoteContinuer, req subagent.StartRequest, opts subagent.ContinuableOptions) (*subagent.Accepted, error) {
	id := opts.ChildID
	if id == "" {
		id = uuid.NewString()
	} else if c.exists(id) {
		return nil, &subagent.Error{Code: subagent.CodeDuplicateChild, Provider: name, Msg: fmt.Sprintf("child id %s is already live or stored", id)}
	}
	desc := subagent.Descriptor{Version: subagent.DescriptorVersion, Mode: subagent.Continuable, Provider: name, Label: req.Label,
		Persona: req.Persona, ToolFilter: req.ToolFilter} // a dsh child gets them again when it is continued
	if desc.Label == "" {
		desc.Label = name
	}
	first := content.UserMessage(req.Prompt...)
	return c.materializeRemote(ctx, req.Parent, session.Header{ID: id, Cwd: req.Parent.Cwd(), ParentSession: req.Parent.ID(),
		Origin: session.OriginSubagent, DelegationDepth: req.Depth}, desc, req, first, firstSettlementOf(opts),
		func(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
			if start, ok := p.(subagent.Provider); ok {
				return start.Start(ctx, req)
			}
			return nil, invalid("provider %q cannot start children", name)
		})
}

// resumeRemote continues out-of-process child h, whose descriptor is
// desc, with m: a new run of its provider resumes its conversation.
func (c *manager) resumeRemote(ctx context.Context, caller *agent.Agent, h session.Header, desc subagent.Descriptor, m content.Message) (string, error) {
	p, _ := c.svc.Provider(desc.Provider)
	rp, ok := p.(subagent.RemoteContinuer)
	if !ok {
		return "", errorf(subagent.CodeNotResumable, "child %s ran on provider %q, which is not registered here or cannot continue it", h.ID, desc.Provider)
	}
	req := subagent.StartRequest{Label: desc.Label, Prompt: m.Content, Parent: caller, Depth: h.DelegationDepth,
		Persona: desc.Persona, ToolFilter: desc.ToolFilter}
	acc, err := c.materializeRemote(ctx, caller, h, desc, req, m, firstSettlement{}, func(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
		return rp.ResumeRun(ctx, req, desc.Remote)
	})
	if err != nil {
		return "", err
	}
	return acc.MessageID, nil
}

// materializeRemote starts the first run of an out-of-process activation
// with first (start: the provider starts it or resumes it), records the
// child's log — created from h, or loaded when h.ParentSession is stored
// already — and publishes the activation. ctx governs until acceptance.
func (c *manager) materializeRemote(ctx context.Context, parent *agent.Agent, h session.Header, desc subagent.Descriptor, req subagent.StartRequest,
	first content.Message, settlement firstSettlement, start func(context.Context, subagent.StartRequest) (subagent.Run, error)) (*subagent.Accepted, error) {
	release, err := c.svc.AdmitChild(desc.Provider, parent)
	if err != nil {
		return nil, err
	}
	done, err := c.reserve(h.ID)
	if err != nil {
		release()
		return nil, err
	}
	defer done()
	act := &activation{id: h.ID, parentID: parent.ID(), parent: parent, desc: desc, owned: map[*activation]struct{}{},
		first: settlement, released: make(chan struct{})}
	act.epoch = c.svc.NewEpoch(parent, desc.Provider, desc.Label, release)
	req.Progress = act.epoch.Progress
	req.LiveSlots = c.svc.ChildSlots(desc.Provider, parent)
	req.Descriptor = &subagent.Descriptor{Version: subagent.DescriptorVersion, Mode: subagent.OneShot, Provider: desc.Provider, Label: desc.Label}
	rc := &remoteChild{provider: desc.Provider, tmpl: req, remote: desc.Remote, onIdle: func() { c.check(act) }}
	rc.start = func(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
		p, _ := c.svc.Provider(desc.Provider)
		rp, ok := p.(subagent.RemoteContinuer)
		if !ok {
			return nil, errorf(subagent.CodeNotResumable, "provider %q was unregistered", desc.Provider)
		}
		return rp.ResumeRun(ctx, req, rc.remote)
	}
	// The start ctx governs the run only until it is accepted.
	rctx, cancel := context.WithCancelCause(context.Background())
	rctx = act.epoch.Trace(telemetry.Continue(rctx, ctx), req.Depth) // the call's trace, the run's lifetime
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	run, err := start(rctx, withPrompt(req, first))
	stop()
	if err == nil && ctx.Err() != nil {
		run.Dispose(context.Background())
		err = subagent.AbortedBeforeReady(desc.Provider, context.Cause(ctx))
	}
	if err != nil {
		cancel(nil)
		release()
		var se *subagent.Error
		if ctx.Err() != nil || errors.As(err, &se) {
			return nil, err
		}
		return nil, &subagent.Error{Code: subagent.CodeNotResumable, Provider: desc.Provider, Msg: fmt.Sprintf("child %s could not be continued", h.ID), Err: err}
	}
	rollback := func(err error) (*subagent.Accepted, error) {
		cancel(nil)
		run.Dispose(context.Background())
		if rc.detach != nil {
			rc.detach()
		}
		release()
		return nil, err
	}
	if rc.remote == "" {
		rr, ok := run.(subagent.RemoteRun)
		if !ok || rr.RemoteSession() == "" {
			return rollback(errorf(subagent.CodeNotResumable, "provider %q named no conversation to continue", desc.Provider))
		}
		rc.remote, desc.Remote = rr.RemoteSession(), rr.RemoteSession()
		act.desc = desc
		rc.log, rc.detach, err = c.sessions.Create(session.CreateOptions{ID: h.ID, Cwd: h.Cwd, ParentSession: h.ParentSession,
			Origin: h.Origin, DelegationDepth: h.DelegationDepth})
		if err == nil {
			err = subagent.AppendDescriptor(rc.log, desc)
		}
	} else {
		rc.log, rc.detach, err = c.sessions.Load(ctx, h.ID)
	}
	if err != nil {
		return rollback(&subagent.Error{Code: subagent.CodeNotResumable, Provider: desc.Provider, Msg: fmt.Sprintf("child %s: its log", h.ID), Err: err})
	}
	act.child = rc
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.admissionOpenLocked(); err != nil {
		return rollback(err)
	}
	if live, ok := c.agents.Get(parent.ID()); !ok || live != parent {
		return rollback(errorf(subagent.CodeUnauthorized, "the parent %s is no longer live", parent.ID()))
	}
	parentAct := c.byAgent[parent]
	if parentAct != nil && parentAct.closing {
		return rollback(errorf(subagent.CodeActivationClosing, "the parent %s is closing", parent.ID()))
	}
	if !parent.OnDispose(func() { c.lost(act) }) {
		return rollback(errorf(subagent.CodeUnauthorized, "the parent %s is disposed", parent.ID()))
	}
	act.epoch.Announce(act.id, nil)
	c.acts[act.id] = act
	if parentAct != nil {
		parentAct.owned[act] = struct{}{}
	}
	rc.begin(run, cancel, first)
	return subagent.NewAccepted(h.ID, first.ID, settlement.claim, act.epoch), nil
}

func withPrompt(req subagent.StartRequest, m content.Message) subagent.StartRequest {
	req.Prompt = m.Content
	return req
}

// remoteChild is an out-of-process continuable child: one run at a time,
// each continuing the same remote conversation, with the messages that
// wait for it queued in order.
type remoteChild struct {
	provider string
	tmpl     subagent.StartRequest // every run's request, but for its prompt
	remote   string
	start    func(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) // a run that resumes remote
	log      *session.Session
	detach   func() error
	onIdle   func()
	wg       sync.WaitGroup // run watchers and starters

	mu       sync.Mutex
	run      subagent.Run
	cancel   context.CancelCauseFunc
	starting bool // a run is being started for a popped message
	queue    []content.Message
	parked   bool
	disposed bool
	last     subagent.Result // the last run's outcome
	usage    map[string]content.Usage
}

// begin records m as a turn of the child's log and follows run, its answer.
func (r *remoteChild) begin(run subagent.Run, cancel context.CancelCauseFunc, m content.Message) {
	r.mu.Lock()
	r.run, r.cancel = run, cancel
	r.record(m)
	r.mu.Unlock()
	r.wg.Add(1)
	go r.watch(run)
}

// record opens a turn holding m, on disk at once: a crash from here on
// leaves the turn interrupted, and the child reported as such to a
// resumed parent. r.mu must be held.
func (r *remoteChild) record(m content.Message) {
	r.log.Append(session.TypeTurnStart, session.TurnStart{Turn: r.log.LastTurn() + 1})
	r.log.Append(session.TypeUserMessage, m)
	r.log.Flush()
}

// end closes the open turn with res. r.mu must be held.
func (r *remoteChild) end(res subagent.Result) {
	n := r.log.LastTurn()
	if len(res.Output) > 0 {
		r.log.Append(session.TypeAssistantMessage, session.AssistantMessage{Turn: n, Step: 1,
			Message: content.AssistantMessage(r.provider, "", res.Output)})
	}
	reason := session.EndReason{Kind: session.EndCompleted}
	switch res.StopReason {
	case subagent.Completed:
	case subagent.Aborted:
		reason = session.EndReason{Kind: session.EndAborted, Cause: &session.Cause{Kind: agent.CauseParent}}
	case subagent.MaxTokens:
		reason.Kind = session.EndMaxTokens
	case subagent.Refusal:
		reason.Kind = session.EndBlocked
	default:
		reason = session.EndReason{Kind: session.EndError, Error: &content.Failure{Code: string(res.StopReason), Message: res.Diagnostic}}
	}
	r.log.Append(session.TypeTurnEnd, session.TurnEnd{Turn: n, Reason: reason})
	r.last = res
	for k, u := range res.Usage {
		r.usage = subagent.AddUsage(r.usage, k, u)
	}
}

// watch waits for run's answer, ends its process, records the answer and
// starts the next queued message, or reports the child idle.
func (r *remoteChild) watch(run subagent.Run) {
	defer r.wg.Done()
	res, err := run.Wait(context.Background())
	if err != nil {
		res = subagent.Result{StopReason: subagent.Failed, Diagnostic: subagent.Diagnostic(err.Error())}
	}
	run.Dispose(context.Background()) // the process ends with each answer; the conversation stays
	r.mu.Lock()
	r.cancel(nil)
	r.run, r.cancel = nil, nil
	r.end(res)
	next, ok := r.pop()
	r.mu.Unlock()
	if ok {
		r.next(next)
		return
	}
	r.onIdle()
}

// pop takes the next queued message unless the queue is parked. r.mu must
// be held.
func (r *remoteChild) pop() (content.Message, bool) {
	if r.parked || r.disposed || len(r.queue) == 0 {
		return content.Message{}, false
	}
	m := r.queue[0]
	r.queue = r.queue[1:]
	r.starting = true
	return m, true
}

// next starts a run that continues the conversation with m; a failure to
// start is that turn's answer.
func (r *remoteChild) next(m content.Message) {
	for {
		ctx, cancel := context.WithCancelCause(context.Background())
		r.mu.Lock()
		r.cancel = cancel // an interrupt or a disposal stops the start too
		r.mu.Unlock()
		run, err := r.start(ctx, withPrompt(r.tmpl, m))
		r.mu.Lock()
		r.starting, r.cancel = false, nil
		if err == nil && !r.disposed {
			r.mu.Unlock()
			r.begin(run, cancel, m)
			return
		}
		cancel(nil)
		if err == nil { // disposed meanwhile
			r.mu.Unlock()
			run.Dispose(context.Background())
			r.onIdle()
			return
		}
		failed := subagent.Result{StopReason: subagent.Failed, Diagnostic: subagent.Diagnostic(err.Error())}
		if ctx.Err() != nil {
			failed = subagent.Result{StopReason: subagent.Aborted}
		}
		r.record(m)
		r.end(failed)
		var ok bool
		m, ok = r.pop()
		r.mu.Unlock()
		if !ok {
			r.onIdle()
			return
		}
	}
}

func (r *remoteChild) submit(m content.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.disposed {
		return errors.New("the child is closing")
	}
	r.queue = append(r.queue, m)
	r.parked = false
	if r.run != nil || r.starting {
		return nil
	}
	next, _ := r.pop()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.next(next)
	}()
	return nil
}

func (r *remoteChild) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.run != nil || r.starting
}

func (r *remoteChild) queued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

func (r *remoteChild) interrupt(cause session.Cause) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parked = true
	if r.cancel != nil {
		r.cancel(&agent.CancelError{Cause: cause})
	}
}

// interruptDescendant asks the running run's process to interrupt target,
// a descendant resident there; with no run (the process ends with each
// answer, and its descendants with it) there is nothing to interrupt.
func (r *remoteChild) interruptDescendant(target string) error {
	r.mu.Lock()
	run := r.run
	r.mu.Unlock()
	di, ok := run.(subagent.DescendantInterrupter)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), interruptTimeout)
	defer cancel()
	return di.InterruptDescendant(ctx, target)
}

// interruptTimeout bounds how long an interrupt waits for a child process
// to take it.
const interruptTimeout = 10 * time.Second

// dispose cancels the running turn, drops what is queued, waits until no
// run or goroutine of the child remains and closes its log.
func (r *remoteChild) dispose(ctx context.Context) error {
	r.mu.Lock()
	r.disposed = true
	r.queue = nil
	if r.cancel != nil {
		r.cancel(&agent.CancelError{Cause: session.Cause{Kind: agent.CauseDisposed}})
	}
	r.mu.Unlock()
	r.wg.Wait()
	return r.detach()
}

func (r *remoteChild) result() subagent.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.last
	res.Usage = r.usage
	return res
}
