package subagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-go/dsh/telemetry"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// Out-of-process continuable children.
//
// A product that keeps its own conversations (an ACP agent with
// session/load, Codex with thread/resume, Claude Code with --resume)
// continues a child by the id of its conversation there. The service keeps
// the child's local record: a session of its own (origin subagent, under
// the parent) whose descriptor names the provider and that remote id, and
// whose turns record each message sent and the answer that came back. A
// follow-up to such a child starts a new run of the provider that resumes
// the remote conversation (RemoteContinuer.ResumeRun): its process is
// fresh, its conversation is not. Routing, authority, the one notice per
// activation and interrupts are those of an in-process child. A provider
// whose product cannot continue a conversation refuses the resume with
// NOT_RESUMABLE, saying so.

// RemoteContinuer is an out-of-process provider whose children's
// conversations can be continued by id. Its runs are RemoteRuns.
type RemoteContinuer interface {
	// ResumeRun starts a run that continues the conversation remote with
	// req.Prompt; ctx governs the run as in Provider.Start. A product that
	// cannot continue it fails with a NOT_RESUMABLE *Error.
	ResumeRun(ctx context.Context, req StartRequest, remote string) (Run, error)
}

// ResumeChecker is a RemoteContinuer that knows, before any child exists,
// whether its product will be able to continue a conversation (Codex
// keeps none without a codexHome).
type ResumeChecker interface {
	CanResume() bool
}

// Continues reports whether p can start continuable children: in process
// (Continuer), or out of process through a product that can continue
// their conversations (RemoteContinuer, unless its ResumeChecker says it
// cannot).
func Continues(p Provider) bool {
	if _, ok := p.(Continuer); ok {
		return true
	}
	if _, ok := p.(RemoteContinuer); !ok {
		return false
	}
	rc, ok := p.(ResumeChecker)
	return !ok || rc.CanResume()
}

// RemoteRun is a run whose conversation its product can continue.
type RemoteRun interface {
	// RemoteSession is the id of the run's conversation in its product.
	RemoteSession() string
}

// NotResumable returns the error a provider gives when its child's
// product cannot continue a conversation.
func NotResumable(provider, why string) error {
	return &Error{Code: CodeNotResumable, Provider: provider,
		Msg: fmt.Sprintf("provider %q cannot continue its child: %s; start a new child instead", provider, why)}
}

// startRemote starts a continuable child on an out-of-process provider.
func (s *Service) startRemote(ctx context.Context, c *continuation, name string, p RemoteContinuer, req StartRequest, opts ContinuableOptions) (*Accepted, error) {
	id := opts.ChildID
	if id == "" {
		id = uuid.NewString()
	} else if c.exists(id) {
		return nil, &Error{Code: CodeDuplicateChild, Provider: name, Msg: fmt.Sprintf("child id %s is already live or stored", id)}
	}
	desc := Descriptor{Version: DescriptorVersion, Mode: Continuable, Provider: name, Label: req.Label,
		Persona: req.Persona, ToolFilter: req.ToolFilter} // a dsh child gets them again when it is continued
	if desc.Label == "" {
		desc.Label = name
	}
	first := content.UserMessage(req.Prompt...)
	return c.materializeRemote(ctx, req.Parent, session.Header{ID: id, Cwd: req.Parent.Cwd(), ParentSession: req.Parent.ID(),
		Origin: session.OriginSubagent, DelegationDepth: req.Depth}, desc, req, first, firstSettlementOf(opts),
		func(ctx context.Context, req StartRequest) (Run, error) {
			if start, ok := p.(Provider); ok {
				return start.Start(ctx, req)
			}
			return nil, invalid("provider %q cannot start children", name)
		})
}

// resumeRemote continues out-of-process child h, whose descriptor is
// desc, with m: a new run of its provider resumes its conversation.
func (s *Service) resumeRemote(ctx context.Context, caller *agent.Agent, h session.Header, desc Descriptor, m content.Message) (string, error) {
	c, err := s.continuation()
	if err != nil {
		return "", err
	}
	p, _ := s.Provider(desc.Provider)
	rp, ok := p.(RemoteContinuer)
	if !ok {
		return "", errorf(CodeNotResumable, "child %s ran on provider %q, which is not registered here or cannot continue it", h.ID, desc.Provider)
	}
	req := StartRequest{Label: desc.Label, Prompt: m.Content, Parent: caller, Depth: h.DelegationDepth,
		Persona: desc.Persona, ToolFilter: desc.ToolFilter}
	acc, err := c.materializeRemote(ctx, caller, h, desc, req, m, firstSettlement{}, func(ctx context.Context, req StartRequest) (Run, error) {
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
func (c *continuation) materializeRemote(ctx context.Context, parent *agent.Agent, h session.Header, desc Descriptor, req StartRequest,
	first content.Message, settlement firstSettlement, start func(context.Context, StartRequest) (Run, error)) (*Accepted, error) {
	release, err := c.svc.admit(desc.Provider, parent)
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
	t := c.svc.epochTracker(act, release)
	req.Progress = t.progress
	req.LiveSlots = c.svc.liveSlots(desc.Provider, parent)
	req.Descriptor = &Descriptor{Version: DescriptorVersion, Mode: OneShot, Provider: desc.Provider, Label: desc.Label}
	rc := &remoteChild{provider: desc.Provider, tmpl: req, remote: desc.Remote, onIdle: func() { c.check(act) }}
	rc.start = func(ctx context.Context, req StartRequest) (Run, error) {
		p, _ := c.svc.Provider(desc.Provider)
		rp, ok := p.(RemoteContinuer)
		if !ok {
			return nil, errorf(CodeNotResumable, "provider %q was unregistered", desc.Provider)
		}
		return rp.ResumeRun(ctx, req, rc.remote)
	}
	// The start ctx governs the run only until it is accepted.
	rctx, cancel := context.WithCancelCause(context.Background())
	rctx, t.span = c.svc.runSpan(telemetry.Continue(rctx, ctx), t.info, req.Depth) // the call's trace, the run's lifetime
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	run, err := start(rctx, withPrompt(req, first))
	stop()
	if err == nil && ctx.Err() != nil {
		run.Dispose(context.Background())
		err = AbortedBeforeReady(desc.Provider, context.Cause(ctx))
	}
	if err != nil {
		cancel(nil)
		release()
		var se *Error
		if ctx.Err() != nil || errors.As(err, &se) {
			return nil, err
		}
		return nil, &Error{Code: CodeNotResumable, Provider: desc.Provider, Msg: fmt.Sprintf("child %s could not be continued", h.ID), Err: err}
	}
	rollback := func(err error) (*Accepted, error) {
		cancel(nil)
		run.Dispose(context.Background())
		if rc.detach != nil {
			rc.detach()
		}
		release()
		return nil, err
	}
	if rc.remote == "" {
		rr, ok := run.(RemoteRun)
		if !ok || rr.RemoteSession() == "" {
			return rollback(errorf(CodeNotResumable, "provider %q named no conversation to continue", desc.Provider))
		}
		rc.remote, desc.Remote = rr.RemoteSession(), rr.RemoteSession()
		act.desc = desc
		rc.log, rc.detach, err = c.sessions.Create(session.CreateOptions{ID: h.ID, Cwd: h.Cwd, ParentSession: h.ParentSession,
			Origin: h.Origin, DelegationDepth: h.DelegationDepth})
		if err == nil {
			err = AppendDescriptor(rc.log, desc)
		}
	} else {
		rc.log, rc.detach, err = c.sessions.Load(ctx, h.ID)
	}
	if err != nil {
		return rollback(&Error{Code: CodeNotResumable, Provider: desc.Provider, Msg: fmt.Sprintf("child %s: its log", h.ID), Err: err})
	}
	act.child = rc
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.admissionOpenLocked(); err != nil {
		return rollback(err)
	}
	if live, ok := c.agents.Get(parent.ID()); !ok || live != parent {
		return rollback(errorf(CodeUnauthorized, "the parent %s is no longer live", parent.ID()))
	}
	parentAct := c.byAgent[parent]
	if parentAct != nil && parentAct.closing {
		return rollback(errorf(CodeActivationClosing, "the parent %s is closing", parent.ID()))
	}
	if !parent.OnDispose(func() { c.lost(act) }) {
		return rollback(errorf(CodeUnauthorized, "the parent %s is disposed", parent.ID()))
	}
	act.epoch = t.announceEpoch(act)
	c.acts[act.id] = act
	if parentAct != nil {
		parentAct.owned[act] = struct{}{}
	}
	rc.begin(run, cancel, first)
	return &Accepted{ChildID: h.ID, MessageID: first.ID, result: settlement.claim, epoch: act.epoch}, nil
}

func withPrompt(req StartRequest, m content.Message) StartRequest {
	req.Prompt = m.Content
	return req
}

// remoteChild is an out-of-process continuable child: one run at a time,
// each continuing the same remote conversation, with the messages that
// wait for it queued in order.
type remoteChild struct {
	provider string
	tmpl     StartRequest // every run's request, but for its prompt
	remote   string
	start    func(ctx context.Context, req StartRequest) (Run, error) // a run that resumes remote
	log      *session.Session
	detach   func() error
	onIdle   func()
	wg       sync.WaitGroup // run watchers and starters

	mu       sync.Mutex
	run      Run
	cancel   context.CancelCauseFunc
	starting bool // a run is being started for a popped message
	queue    []content.Message
	parked   bool
	disposed bool
	last     Result // the last run's outcome
	usage    map[string]content.Usage
}

// begin records m as a turn of the child's log and follows run, its answer.
func (r *remoteChild) begin(run Run, cancel context.CancelCauseFunc, m content.Message) {
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
func (r *remoteChild) end(res Result) {
	n := r.log.LastTurn()
	if len(res.Output) > 0 {
		r.log.Append(session.TypeAssistantMessage, session.AssistantMessage{Turn: n, Step: 1,
			Message: content.AssistantMessage(r.provider, "", res.Output)})
	}
	reason := session.EndReason{Kind: session.EndCompleted}
	switch res.StopReason {
	case Completed:
	case Aborted:
		reason = session.EndReason{Kind: session.EndAborted, Cause: &session.Cause{Kind: agent.CauseParent}}
	case MaxTokens:
		reason.Kind = session.EndMaxTokens
	case Refusal:
		reason.Kind = session.EndBlocked
	default:
		reason = session.EndReason{Kind: session.EndError, Error: &content.Failure{Code: string(res.StopReason), Message: res.Diagnostic}}
	}
	r.log.Append(session.TypeTurnEnd, session.TurnEnd{Turn: n, Reason: reason})
	r.last = res
	for k, u := range res.Usage {
		r.usage = AddUsage(r.usage, k, u)
	}
}

// watch waits for run's answer, ends its process, records the answer and
// starts the next queued message, or reports the child idle.
func (r *remoteChild) watch(run Run) {
	defer r.wg.Done()
	res, err := run.Wait(context.Background())
	if err != nil {
		res = Result{StopReason: Failed, Diagnostic: Diagnostic(err.Error())}
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
		failed := Result{StopReason: Failed, Diagnostic: Diagnostic(err.Error())}
		if ctx.Err() != nil {
			failed = Result{StopReason: Aborted}
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
	di, ok := run.(DescendantInterrupter)
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

func (r *remoteChild) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.last
	res.Usage = r.usage
	return res
}
