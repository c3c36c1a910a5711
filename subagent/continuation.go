package subagent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// Continuable children.
//
// A continuable child is a durable session plus at most one activation in
// this process: the live agent that runs it now. The child's log holds its
// descriptor (see Descriptor), so that it can be rebuilt from the log alone,
// by any process, even after the provider that started it was
// unregistered. The service routes every message to a child by residency:
// to the running activation's inbox as a later turn, to a waiting one by
// waking it, or, when there is none, to a new activation rebuilt from the
// log (a cold resume).
//
// An activation settles when its agent is idle with nothing queued and it
// owns no live child activation: the service then disposes the agent
// (releasing its session's writer lock, so that a later process may
// continue it), tells the parent in exactly one notice how the activation
// ended, and emits subagent/end. Every activation is one epoch between
// subagent/start and subagent/end.
//
// The Go shape differs from the reference's in two places. A foreground
// caller (Accepted.Wait) takes the first settlement's result itself, in its
// tool result, instead of a notice: it is the same one delivery, and the
// parent does not pay for a model step to read it twice. And in-process
// children are rebuilt from the descriptor alone (model route, persona,
// tool filter and permission policy), without the provider, by the
// service's ChildBuilder: the provider only contributes what a fresh child
// starts from (Continuer).

// Continuer is a provider whose children can continue after they settle
// (spawn, fork). It contributes what a fresh child starts from; the
// service's ChildBuilder makes its agent, and the service persists,
// publishes and rebuilds it.
type Continuer interface {
	PrepareContinuable(ctx context.Context, req StartRequest) (Preparation, error)
}

// Preparation is what a fresh continuable child starts from.
type Preparation struct {
	// Seed is the log the child inherits (fork: its parent's completed
	// turns); nil for none.
	Seed []session.Event
	// First is the child's first user message: its instructions and task.
	First content.Message
	// Options are the child's model route and limits.
	Options agent.Options
}

// ChildBuilder makes the agent of an in-process continuable child (package
// inproc implements it): from opts, fresh (desc is then written first into
// its log) or rebuilt from its log (opts.Resume), with desc's tool filter
// and persona applied before it is published. The service makes no agent
// itself.
type ChildBuilder interface {
	BuildChild(ctx context.Context, opts agent.CreateOptions, desc Descriptor, fresh bool) (*agent.Agent, error)
}

// ContinuableOptions tune StartContinuable.
type ContinuableOptions struct {
	// ChildID reserves the child's id; a live or stored one is refused
	// (DUPLICATE_CHILD). Default: a random UUID.
	ChildID string
	// Foreground promises that the caller waits for the first settlement
	// with Accepted.Wait, which then replaces the settlement notice.
	Foreground bool
	// Settled, when set on a start that is not Foreground, is called with
	// the first activation's result once it has settled, before the parent
	// is told (a background child's SubagentStop hooks).
	Settled func(Result)
}

// firstSettlement is who hears of an activation's first settlement: a
// foreground caller instead of the parent's notice, or Settled before it.
type firstSettlement struct {
	claim   chan Result
	settled func(Result)
}

// firstSettlementOf makes the firstSettlement of a start with opts.
func firstSettlementOf(opts ContinuableOptions) firstSettlement {
	if opts.Foreground {
		return firstSettlement{claim: make(chan Result, 1)}
	}
	return firstSettlement{settled: opts.Settled}
}

// Accepted is a message a continuable child's inbox accepted.
type Accepted struct {
	ChildID   string
	MessageID string
	result    chan Result // foreground starts only
	epoch     *epoch      // the activation that took the message
}

// afterEnd calls fn with the result of the activation that took the
// message once its end has been announced (subagent/end): by then the
// child is released and its parent told.
func (a *Accepted) afterEnd(fn func(Result)) { a.epoch.AfterSettle(fn) }

// Wait returns the result of the activation that took the first message
// of a foreground start, once it settled; ctx's cause if ctx ends first.
func (a *Accepted) Wait(ctx context.Context) (Result, error) {
	if a.result == nil {
		return Result{}, invalid("wait: the start was not a foreground one")
	}
	select {
	case r := <-a.result:
		a.result <- r // later waits see it too
		return r, nil
	case <-ctx.Done():
		return Result{}, context.Cause(ctx)
	}
}

// continuation is the service's manager of continuable children.
type continuation struct {
	svc      *Service
	agents   *agent.Registry
	sessions *session.Store
	build    ChildBuilder

	mu       sync.Mutex
	acts     map[string]*activation // by child id
	byAgent  map[*agent.Agent]*activation
	building map[string]chan struct{} // ids being materialized
	draining bool
	wg       sync.WaitGroup // teardowns in flight
}

// activation is a continuable child resident in this process.
type activation struct {
	id       string
	parentID string       // the durable direct parent
	parent   *agent.Agent // its live agent, the child agent's owner
	agent    *agent.Agent // the in-process child; nil for an out-of-process one
	child    child
	desc     Descriptor
	epoch    *epoch

	// guarded by continuation.mu
	owned    map[*activation]struct{}
	closing  bool
	hushed   bool            // interrupted by the user: its notices wake no one until its parent sends it more work
	first    firstSettlement // who hears of the first settlement, besides the epoch's end
	released chan struct{}   // closed once torn down and forgotten
}

// ServeContinuation lets the service start and continue continuable
// children: build makes their agents (in agents, the registry whose
// live agents the service checks), sessions persists them. Without it, continuable
// operations fail with CONTINUATION_UNAVAILABLE; with a store whose
// sessions do not outlive the process, with PERSISTENCE_UNAVAILABLE.
func (s *Service) ServeContinuation(agents *agent.Registry, sessions *session.Store, build ChildBuilder) {
	c := &continuation{svc: s, agents: agents, sessions: sessions, build: build, acts: map[string]*activation{},
		byAgent: map[*agent.Agent]*activation{}, building: map[string]chan struct{}{}}
	s.mu.Lock()
	s.cont = c
	s.mu.Unlock()
}

func (s *Service) continuation() (*continuation, error) {
	s.mu.Lock()
	c := s.cont
	s.mu.Unlock()
	if c == nil {
		return nil, errorf(CodeContinuationUnavailable, "continuable children need the service to serve continuation")
	}
	return c, nil
}

// CanContinue reports whether children of the named provider can be
// continuable here: the provider is a Continuer or a RemoteContinuer, and
// sessions outlive the process.
func (s *Service) CanContinue(name string) bool {
	c, err := s.continuation()
	if err != nil || !c.sessions.Durable() {
		return false
	}
	p, ok := s.Provider(name)
	return ok && Continues(p)
}

// StartContinuable starts a continuable child on the named provider and
// returns once its inbox accepted req.Prompt, before any model request.
// In order: admission (DRAINING), persistence (PERSISTENCE_UNAVAILABLE),
// the provider (NO_PROVIDER, UNSUPPORTED_CAPABILITY unless it is a
// Continuer), the depth cap, the reserved id (DUPLICATE_CHILD), the live
// children cap, the provider's preparation, then the child is created with
// its descriptor, published (subagent/start) and sent the prompt. A failure
// at any point leaves no agent and no activation; ctx governs the start
// only.
func (s *Service) StartContinuable(ctx context.Context, name string, req StartRequest, opts ContinuableOptions) (*Accepted, error) {
	c, err := s.continuation()
	if err != nil {
		return nil, err
	}
	if err := c.admissionOpen(); err != nil {
		return nil, err
	}
	if !c.sessions.Durable() {
		return nil, errorf(CodePersistenceUnavailable, "continuable children need sessions that outlive the process (the JSONL store)")
	}
	if req.OutputSchema != nil {
		return nil, invalid("start: a continuable child takes no output schema")
	}
	if err := s.validate(name, &req); err != nil {
		return nil, err
	}
	p, _ := s.Provider(name)
	cont, ok := p.(Continuer)
	if rp, remote := p.(RemoteContinuer); remote && !ok {
		return s.startRemote(ctx, c, name, rp, req, opts)
	}
	if !ok {
		return nil, &Error{Code: CodeUnsupportedCapability, Provider: name, Capability: "continuable",
			Msg: fmt.Sprintf("provider %q cannot start continuable children", name)}
	}
	id := opts.ChildID
	if id == "" {
		id = uuid.NewString()
	} else if c.exists(id) {
		return nil, &Error{Code: CodeDuplicateChild, Provider: name, Msg: fmt.Sprintf("child id %s is already live or stored", id)}
	}
	parent := req.Parent
	prep, err := cont.PrepareContinuable(ctx, req)
	if err != nil {
		return nil, err
	}
	policy := parent.Policy()
	desc := Descriptor{Version: DescriptorVersion, Mode: Continuable, Provider: name, Label: req.Label,
		AgentProvider: prep.Options.Provider, AgentModel: prep.Options.Model, Persona: req.Persona, ToolFilter: req.ToolFilter, Policy: &policy}
	if desc.Label == "" {
		desc.Label = name
	}
	if ctx.Err() != nil {
		return nil, AbortedBeforeReady(name, context.Cause(ctx))
	}
	release, err := s.admit(name, parent)
	if err != nil {
		return nil, err
	}
	done, err := c.reserve(id)
	if err != nil {
		release()
		return nil, err
	}
	defer done()
	child, err := c.create(ctx, agent.CreateOptions{SessionID: id, Cwd: parent.Cwd(), ParentSession: parent.ID(),
		Origin: session.OriginSubagent, DelegationDepth: req.Depth, Seed: prep.Seed, Options: prep.Options, Owner: parent,
		Label: ChildLabel(name, desc.Label)}, desc, true)
	if err != nil {
		release()
		if ctx.Err() != nil {
			return nil, AbortedBeforeReady(name, context.Cause(ctx))
		}
		return nil, fmt.Errorf("subagent %s: create child: %w", name, err)
	}
	first := firstSettlementOf(opts)
	act, err := c.publish(ctx, parent, child, desc, prep.First, first, release)
	if err != nil {
		return nil, err
	}
	return &Accepted{ChildID: id, MessageID: prep.First.ID, result: first.claim, epoch: act.epoch}, nil
}

// Followup sends msg to caller's continuable child id as a later turn of
// its own: queued behind a running activation's turns, waking an idle one,
// or rebuilding one from the child's log when none is resident (a cold
// resume, which works in any process and after the provider that started
// the child was unregistered). Only the child's durable direct parent, as
// its exact live agent, may send (UNAUTHORIZED). It returns the accepted
// message's id; a message is never both delivered and refused.
func (s *Service) Followup(ctx context.Context, caller *agent.Agent, id string, msg []content.Block) (string, error) {
	c, err := s.continuation()
	if err != nil {
		return "", err
	}
	m := content.UserMessage(msg...)
	m.Source = content.Source{Kind: content.SourcePlugin, Plugin: SourcePlugin, Form: FormRelay, Sender: caller.ID()}
	for {
		if err := c.authorize(caller); err != nil {
			return "", err
		}
		if err := ctx.Err(); err != nil {
			return "", context.Cause(ctx)
		}
		c.mu.Lock()
		if err := c.admissionOpenLocked(); err != nil {
			c.mu.Unlock()
			return "", err
		}
		if act := c.acts[id]; act != nil {
			if act.closing { // S9: wait for its release, then resume it cold
				c.mu.Unlock()
				if err := wait(ctx, act.released); err != nil {
					return "", err
				}
				continue
			}
			defer c.mu.Unlock()
			if act.parentID != caller.ID() {
				return "", unauthorizedParent(id)
			}
			if err := act.child.submit(m); err != nil {
				return "", errorf(CodeActivationClosing, "child %s is closing: %v", id, err)
			}
			act.hushed = false // work its parent asked for: its settlement may wake it again
			return m.ID, nil
		}
		if ch, busy := c.building[id]; busy {
			c.mu.Unlock()
			if err := wait(ctx, ch); err != nil {
				return "", err
			}
			continue
		}
		c.mu.Unlock()
		return c.resume(ctx, caller, id, m)
	}
}

// resume rebuilds child id from its log and sends it m.
func (c *continuation) resume(ctx context.Context, caller *agent.Agent, id string, m content.Message) (string, error) {
	h, events, err := c.sessions.Read(id)
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", &Error{Code: CodeNotResumable, Msg: fmt.Sprintf("child %s is unavailable", id), Err: err}
	}
	if h.ParentSession != caller.ID() || h.Origin != session.OriginSubagent {
		return "", unauthorizedParent(id)
	}
	desc, ok, err := ResumeDescriptor(h, events)
	switch {
	case err != nil:
		return "", &Error{Code: CodeNotResumable, Msg: fmt.Sprintf("child %s has a malformed descriptor", id), Err: err}
	case !ok || desc.Mode != Continuable:
		return "", errorf(CodeNotResumable, "child %s is not continuable (a one-shot child takes one task): do not retry; start a new one", id)
	case desc.Remote != "":
		return c.svc.resumeRemote(ctx, caller, h, desc, m)
	}
	release, err := c.svc.admit(desc.Provider, caller)
	if err != nil {
		return "", err
	}
	done, err := c.reserve(id)
	if err != nil {
		release()
		return "", err
	}
	defer done()
	po := caller.Options()
	opts := agent.Options{Provider: desc.AgentProvider, Model: desc.AgentModel, MaxParallelToolCalls: po.MaxParallelToolCalls,
		MaxSteps: po.MaxSteps, CompactAt: po.CompactAt, MaxDelegationDepth: po.MaxDelegationDepth, SubagentDepth: h.DelegationDepth}
	if opts.Provider == "" {
		opts.Provider, opts.Model = po.Provider, po.Model
	}
	child, err := c.create(ctx, agent.CreateOptions{SessionID: id, Resume: true, Options: opts, Owner: caller,
		Policy: desc.Policy, Label: ChildLabel(desc.Provider, desc.Label)}, desc, false)
	if err != nil {
		release()
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		var se *Error
		if errors.As(err, &se) {
			return "", err
		}
		return "", &Error{Code: CodeNotResumable, Provider: desc.Provider, Msg: fmt.Sprintf("child %s could not be rebuilt", id), Err: err}
	}
	if _, err := c.publish(ctx, caller, child, desc, m, firstSettlement{}, release); err != nil {
		return "", err
	}
	return m.ID, nil
}

// create makes a continuable child's agent with the service's builder:
// fresh, or rebuilt from its log.
func (c *continuation) create(ctx context.Context, opts agent.CreateOptions, desc Descriptor, fresh bool) (*agent.Agent, error) {
	if c.build == nil {
		return nil, errorf(CodeContinuationUnavailable, "continuable children need a child builder (ServeContinuation)")
	}
	return c.build.BuildChild(ctx, opts, desc, fresh)
}

// publish makes child resident as an activation of parent and sends it
// first. The parent is checked again here, at the last synchronous point;
// a refusal, or a ctx that ended, disposes the child.
func (c *continuation) publish(ctx context.Context, parent, child *agent.Agent, desc Descriptor, first content.Message,
	settlement firstSettlement, release func()) (*activation, error) {
	act := &activation{id: child.ID(), parentID: parent.ID(), parent: parent, agent: child, desc: desc,
		owned: map[*activation]struct{}{}, first: settlement, released: make(chan struct{})}
	act.child = &localChild{a: child, from: child.Session().Len()}
	rollback := func(err error) (*activation, error) {
		child.Dispose(context.Background())
		release()
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.admissionOpenLocked(); err != nil {
		return rollback(err)
	}
	if live, ok := c.agents.Get(parent.ID()); !ok || live != parent || parent.Disposed() {
		return rollback(errorf(CodeUnauthorized, "the parent %s is no longer live", parent.ID()))
	}
	parentAct := c.byAgent[parent]
	if parentAct != nil && parentAct.closing {
		return rollback(errorf(CodeActivationClosing, "the parent %s is closing", parent.ID()))
	}
	if ctx.Err() != nil {
		return rollback(AbortedBeforeReady(desc.Provider, context.Cause(ctx)))
	}
	if !child.OnDispose(func() { c.lost(act) }) || !child.OnIdle(func() { c.settleIdle(act) }) {
		return rollback(errorf(CodeActivationClosing, "child %s was disposed", child.ID()))
	}
	t := c.svc.epochTracker(act, release)
	_, t.span = c.svc.runSpan(ctx, t.info, child.Depth()) // beside the child's turns, under the parent's call
	act.epoch = t.announceEpoch(act)
	stop := SessionProgress(child.Session(), t.progress)
	act.epoch.AfterSettle(func(Result) { stop() })
	c.acts[act.id] = act
	c.byAgent[child] = act
	if parentAct != nil {
		parentAct.owned[act] = struct{}{}
	}
	if err := child.Submit(first, nil); err != nil { // only a child disposed meanwhile refuses: lost tears it down
		return nil, errorf(CodeActivationClosing, "child %s refused its message: %v", child.ID(), err)
	}
	return act, nil
}

// reserve marks id as being built, so that a concurrent start or cold
// resume of the same id waits; done unmarks it.
func (c *continuation) reserve(id string) (done func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.building[id]; busy || c.acts[id] != nil {
		return nil, errorf(CodeDuplicateChild, "child %s is already being built or resident", id)
	}
	ch := make(chan struct{})
	c.building[id] = ch
	return func() {
		c.mu.Lock()
		delete(c.building, id)
		c.mu.Unlock()
		close(ch)
	}, nil
}

// exists reports whether id is a live agent or a stored session.
func (c *continuation) exists(id string) bool {
	if _, ok := c.agents.Get(id); ok {
		return true
	}
	_, _, err := c.sessions.Read(id)
	return err == nil
}

// authorize checks that caller is the exact live agent of its id.
func (c *continuation) authorize(caller *agent.Agent) error {
	if caller == nil {
		return errorf(CodeUnauthorized, "no calling agent")
	}
	if live, ok := c.agents.Get(caller.ID()); !ok || live != caller {
		return errorf(CodeUnauthorized, "the calling agent %s is not live", caller.ID())
	}
	return nil
}

func unauthorizedParent(id string) error {
	return errorf(CodeUnauthorized, "child %s belongs to another parent session", id)
}

func (c *continuation) admissionOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admissionOpenLocked()
}

func (c *continuation) admissionOpenLocked() error {
	if c.draining {
		return errorf(CodeDraining, "the service is tearing continuable children down")
	}
	return nil
}

func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Settlement comes up the call stack: an in-process child's agent calls
// settleIdle on the goroutine that drove it, once it stopped (agent.OnIdle),
// and the settlement of a child may settle its idle parent in turn, on
// the same goroutine. Only a teardown that another path starts (a
// disposal, an interrupt, a remote child's end) runs on a goroutine of its
// own, since its caller may hold what the teardown waits for.

// settleIdle settles act now if it is idle with nothing queued (or was
// interrupted by the user) and owns no live child.
func (c *continuation) settleIdle(act *activation) {
	if c.claim(act, true) {
		c.teardown(act)
	}
}

// check is settleIdle with the teardown on a goroutine of its own.
func (c *continuation) check(act *activation) {
	if c.claim(act, true) {
		go c.teardown(act)
	}
}

// lost tears down an activation whose child something else ended: its
// agent was disposed (by its owner, most often), or its parent agent was.
func (c *continuation) lost(act *activation) {
	if c.claim(act, false) {
		go c.teardown(act)
	}
}

// claim marks act as closing, and counts its teardown in flight, unless it
// is closing already or, when idleOnly, still has work (children it owns,
// a running turn, messages).
func (c *continuation) claim(act *activation, idleOnly bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A child the user interrupted settles with its queue parked: the user
	// stopped that work, and what was queued is reported as not run.
	if act.closing || idleOnly && (len(act.owned) > 0 || act.child.busy() || act.child.queued() > 0 && !act.hushed) {
		return false
	}
	act.closing = true
	c.wg.Add(1)
	return true
}

// teardown disposes a settled activation's agent, tells its parent how the
// epoch ended (or hands the result to a foreground waiter), releases its
// place in the parent's activation and forgets it; subagent/end follows.
func (c *continuation) teardown(act *activation) {
	defer c.wg.Done()
	derr := act.child.dispose(context.Background())
	res := act.child.result() // read from memory: a failed flush or detach loses none of it
	if derr != nil {
		res.Teardown = c.svc.teardownFailed(act.desc.Provider, act.id, res.StopReason, derr)
	}
	c.mu.Lock()
	first := act.first
	act.first = firstSettlement{}
	parentAct := c.byAgent[act.parent]
	c.mu.Unlock()
	if first.claim != nil {
		first.claim <- res
	} else {
		if first.settled != nil {
			first.settled(res)
		}
		c.notify(act, res)
	}
	c.mu.Lock()
	delete(c.acts, act.id)
	if act.agent != nil {
		delete(c.byAgent, act.agent)
	}
	if parentAct != nil {
		delete(parentAct.owned, act)
	}
	c.mu.Unlock()
	close(act.released)
	act.epoch.Settle(res)
	if parentAct != nil {
		c.settleIdle(parentAct)
	}
}

// notify sends the settlement notice to act's parent: it wakes an idle
// parent with a new turn and reaches a busy one at its next step; a parent
// that is closing, or that notices alone have woken LimitWakes times in a
// row, gets it without a wake, and one that is gone none.
func (c *continuation) notify(act *activation, res Result) {
	parent := act.parent
	if live, ok := c.agents.Get(act.parentID); !ok || live != parent || parent.ToolHost() {
		return
	}
	msg := settledNotice(act.id, res)
	woken := agent.WakesSinceUser(parent.Session().Events(), isSettlement) >= c.svc.wakeBudget()
	c.mu.Lock()
	defer c.mu.Unlock()
	send := parent.Steer
	if pa := c.byAgent[parent]; woken || c.draining || act.hushed || (pa != nil && (pa.closing || pa.hushed)) {
		send = parent.Inject
	}
	if err := send(msg); err != nil && !errors.Is(err, &agent.Error{Code: agent.CodeDisposed}) {
		c.svc.log.Warn("subagent: settlement notice not delivered", "child", act.id, "parent", act.parentID, "err", err)
	}
}

// isSettlement reports whether a message is a settlement notice.
func isSettlement(s content.Source) bool { return s.Plugin == SourcePlugin && s.Form == FormSettled }

// Drain closes admission to continuable children (DRAINING) and tears
// every resident one down, children with their parents; it returns once
// all are gone or ctx ends.
func (s *Service) Drain(ctx context.Context) error {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	c.mu.Lock()
	c.draining = true
	acts := make([]*activation, 0, len(c.acts))
	for _, act := range c.acts {
		acts = append(acts, act)
	}
	c.mu.Unlock()
	for _, act := range acts {
		c.lost(act) // its teardown disposes its agent, which disposes the children it owns
	}
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	return wait(ctx, done)
}
