// Package continuable keeps the continuable children of a subagent
// service: a continuable child is a durable session plus at most one
// activation in this process, the live agent (or, for a child in another
// process, the runs of its product) that runs it now. Serve makes a
// manager of them the service's Continuation, so that the service's
// continuable operations (StartContinuable, Followup, Interrupt, the
// drains, the listings) reach it; callers keep using subagent.Service.
//
// The child's log holds its descriptor (see subagent.Descriptor), so that
// it can be rebuilt from the log alone, by any process, even after the
// provider that started it was unregistered. The manager routes every
// message to a child by residency: to the running activation's inbox as a
// later turn, to a waiting one by waking it, or, when there is none, to a
// new activation rebuilt from the log (a cold resume).
//
// An activation settles when its agent is idle with nothing queued and it
// owns no live child activation: the manager then disposes the agent
// (releasing its session's writer lock, so that a later process may
// continue it), tells the parent in exactly one notice how the activation
// ended, and the service emits subagent/end. Every activation is one epoch
// (subagent.Epoch) between subagent/start and subagent/end.
//
// The Go shape differs from the reference's in two places. A foreground
// caller (subagent.Accepted.Wait) takes the first settlement's result
// itself, in its tool result, instead of a notice: it is the same one
// delivery, and the parent does not pay for a model step to read it twice.
// And in-process children are rebuilt from the descriptor alone (model
// route, persona, tool filter and permission policy), without the
// provider, by the subagent.ChildBuilder the manager is handed: the
// provider only contributes what a fresh child starts from
// (subagent.Continuer).
package continuable

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// firstSettlement is who hears of an activation's first settlement: a
// foreground caller instead of the parent's notice, or Settled before it.
type firstSettlement struct {
	claim   chan subagent.Result
	settled func(subagent.Result)
}

// firstSettlementOf makes the firstSettlement of a start with opts.
func firstSettlementOf(opts subagent.ContinuableOptions) firstSettlement {
	if opts.Foreground {
		return firstSettlement{claim: make(chan subagent.Result, 1)}
	}
	return firstSettlement{settled: opts.Settled}
}

var _ subagent.Continuation = (*manager)(nil)

// manager is the manager of continuable children.
type manager struct {
	svc      *subagent.Service
	agents   *agent.Registry
	sessions *session.Store
	build    subagent.ChildBuilder

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
	desc     subagent.Descriptor
	epoch    *subagent.Epoch

	// guarded by manager.mu
	owned    map[*activation]struct{}
	closing  bool
	hushed   bool            // interrupted by the user: its notices wake no one until its parent sends it more work
	first    firstSettlement // who hears of the first settlement, besides the epoch's end
	released chan struct{}   // closed once torn down and forgotten
}

// Serve makes a manager of continuable children serve svc's continuable
// operations (subagent.Service.UseContinuation): build makes their agents
// (in agents, the registry whose live agents the manager checks), sessions
// persists them. Without it, those operations fail with
// CONTINUATION_UNAVAILABLE; with a store whose sessions do not outlive the
// process, with PERSISTENCE_UNAVAILABLE.
func Serve(svc *subagent.Service, agents *agent.Registry, sessions *session.Store, build subagent.ChildBuilder) {
	svc.UseContinuation(&manager{svc: svc, agents: agents, sessions: sessions, build: build, acts: map[string]*activation{},
		byAgent: map[*agent.Agent]*activation{}, building: map[string]chan struct{}{}})
}

// CanContinue implements subagent.Continuation: see subagent.Service.CanContinue.
func (c *manager) CanContinue(name string) bool {
	if !c.sessions.Durable() {
		return false
	}
	p, ok := c.svc.Provider(name)
	return ok && subagent.Continues(p)
}

// StartContinuable implements subagent.Continuation: see subagent.Service.StartContinuable.
func (c *manager) StartContinuable(ctx context.Context, name string, req subagent.StartRequest, opts subagent.ContinuableOptions) (*subagent.Accepted, error) {
	if err := c.admissionOpen(); err != nil {
		return nil, err
	}
	if !c.sessions.Durable() {
		return nil, errorf(subagent.CodePersistenceUnavailable, "continuable children need sessions that outlive the process (the JSONL store)")
	}
	if req.OutputSchema != nil {
		return nil, invalid("start: a continuable child takes no output schema")
	}
	if err := c.svc.Validate(name, &req); err != nil {
		return nil, err
	}
	p, _ := c.svc.Provider(name)
	cont, ok := p.(subagent.Continuer)
	if rp, remote := p.(subagent.RemoteContinuer); remote && !ok {
		return c.startRemote(ctx, name, rp, req, opts)
	}
	if !ok {
		return nil, &subagent.Error{Code: subagent.CodeUnsupportedCapability, Provider: name, Capability: "continuable",
			Msg: fmt.Sprintf("provider %q cannot start continuable children", name)}
	}
	id := opts.ChildID
	if id == "" {
		id = uuid.NewString()
	} else if c.exists(id) {
		return nil, &subagent.Error{Code: subagent.CodeDuplicateChild, Provider: name, Msg: fmt.Sprintf("child id %s is already live or stored", id)}
	}
	parent := req.Parent
	prep, err := cont.PrepareContinuable(ctx, req)
	if err != nil {
		return nil, err
	}
	policy := parent.Policy()
	desc := subagent.Descriptor{Version: subagent.DescriptorVersion, Mode: subagent.Continuable, Provider: name, Label: req.Label,
		AgentProvider: prep.Options.Provider, AgentModel: prep.Options.Model, Persona: req.Persona, ToolFilter: req.ToolFilter, Policy: &policy}
	if desc.Label == "" {
		desc.Label = name
	}
	if ctx.Err() != nil {
		return nil, subagent.AbortedBeforeReady(name, context.Cause(ctx))
	}
	release, err := c.svc.AdmitChild(name, parent)
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
		Label: subagent.ChildLabel(name, desc.Label), Subagent: req.Subagent}, desc, true)
	if err != nil {
		release()
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(name, context.Cause(ctx))
		}
		return nil, fmt.Errorf("subagent %s: create child: %w", name, err)
	}
	first := firstSettlementOf(opts)
	act, err := c.publish(ctx, parent, child, desc, prep.First, first, release)
	if err != nil {
		return nil, err
	}
	return subagent.NewAccepted(id, prep.First.ID, first.claim, act.epoch), nil
}

// Followup implements subagent.Continuation: see subagent.Service.Followup.
func (c *manager) Followup(ctx context.Context, caller *agent.Agent, id string, msg []content.Block) (string, error) {
	m := content.UserMessage(msg...)
	m.Source = content.Source{Kind: content.SourcePlugin, Plugin: subagent.SourcePlugin, Form: subagent.FormRelay, Sender: caller.ID()}
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
				return "", errorf(subagent.CodeActivationClosing, "child %s is closing: %v", id, err)
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
func (c *manager) resume(ctx context.Context, caller *agent.Agent, id string, m content.Message) (string, error) {
	h, events, err := c.sessions.Read(id)
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", &subagent.Error{Code: subagent.CodeNotResumable, Msg: fmt.Sprintf("child %s is unavailable", id), Err: err}
	}
	if h.ParentSession != caller.ID() || h.Origin != session.OriginSubagent {
		return "", unauthorizedParent(id)
	}
	desc, ok, err := subagent.ResumeDescriptor(h, events)
	switch {
	case err != nil:
		return "", &subagent.Error{Code: subagent.CodeNotResumable, Msg: fmt.Sprintf("child %s has a malformed descriptor", id), Err: err}
	case !ok || desc.Mode != subagent.Continuable:
		return "", errorf(subagent.CodeNotResumable, "child %s is not continuable (a one-shot child takes one task): do not retry; start a new one", id)
	case desc.Remote != "":
		return c.resumeRemote(ctx, caller, h, desc, m)
	}
	release, err := c.svc.AdmitChild(desc.Provider, caller)
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
		Policy: desc.Policy, Label: subagent.ChildLabel(desc.Provider, desc.Label)}, desc, false)
	if err != nil {
		release()
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		var se *subagent.Error
		if errors.As(err, &se) {
			return "", err
		}
		return "", &subagent.Error{Code: subagent.CodeNotResumable, Provider: desc.Provider, Msg: fmt.Sprintf("child %s could not be rebuilt", id), Err: err}
	}
	if _, err := c.publish(ctx, caller, child, desc, m, firstSettlement{}, release); err != nil {
		return "", err
	}
	return m.ID, nil
}

// create makes a continuable child's agent with the manager's builder:
// fresh, or rebuilt from its log.
func (c *manager) create(ctx context.Context, opts agent.CreateOptions, desc subagent.Descriptor, fresh bool) (*agent.Agent, error) {
	if c.build == nil {
		return nil, errorf(subagent.CodeContinuationUnavailable, "continuable children need a child builder (continuable.Serve)")
	}
	return c.build.BuildChild(ctx, opts, desc, fresh)
}

// publish makes child resident as an activation of parent and sends it
// first. The parent is checked again here, at the last synchronous point;
// a refusal, or a ctx that ended, disposes the child.
func (c *manager) publish(ctx context.Context, parent, child *agent.Agent, desc subagent.Descriptor, first content.Message,
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
		return rollback(errorf(subagent.CodeUnauthorized, "the parent %s is no longer live", parent.ID()))
	}
	parentAct := c.byAgent[parent]
	if parentAct != nil && parentAct.closing {
		return rollback(errorf(subagent.CodeActivationClosing, "the parent %s is closing", parent.ID()))
	}
	if ctx.Err() != nil {
		return rollback(subagent.AbortedBeforeReady(desc.Provider, context.Cause(ctx)))
	}
	if !child.OnDispose(func() { c.lost(act) }) || !child.OnIdle(func() { c.settleIdle(act) }) {
		return rollback(errorf(subagent.CodeActivationClosing, "child %s was disposed", child.ID()))
	}
	act.epoch = c.svc.NewEpoch(parent, desc.Provider, desc.Label, release)
	act.epoch.Trace(ctx, child.Depth()) // beside the child's turns, under the parent's call
	act.epoch.Announce(act.id, child)
	stop := subagent.SessionProgress(child.Session(), act.epoch.Progress)
	act.epoch.AfterSettle(func(subagent.Result) { stop() })
	c.acts[act.id] = act
	c.byAgent[child] = act
	if parentAct != nil {
		parentAct.owned[act] = struct{}{}
	}
	if err := child.Submit(first, nil); err != nil { // only a child disposed meanwhile refuses: lost tears it down
		return nil, errorf(subagent.CodeActivationClosing, "child %s refused its message: %v", child.ID(), err)
	}
	return act, nil
}

// reserve marks id as being built, so that a concurrent start or cold
// resume of the same id waits; done unmarks it.
func (c *manager) reserve(id string) (done func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.building[id]; busy || c.acts[id] != nil {
		return nil, errorf(subagent.CodeDuplicateChild, "child %s is already being built or resident", id)
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
func (c *manager) exists(id string) bool {
	if _, ok := c.agents.Get(id); ok {
		return true
	}
	_, _, err := c.sessions.Read(id)
	return err == nil
}

// authorize checks that caller is the exact live agent of its id.
func (c *manager) authorize(caller *agent.Agent) error {
	if caller == nil {
		return errorf(subagent.CodeUnauthorized, "no calling agent")
	}
	if live, ok := c.agents.Get(caller.ID()); !ok || live != caller {
		return errorf(subagent.CodeUnauthorized, "the calling agent %s is not live", caller.ID())
	}
	return nil
}

func unauthorizedParent(id string) error {
	return errorf(subagent.CodeUnauthorized, "child %s belongs to another parent session", id)
}

func (c *manager) admissionOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admissionOpenLocked()
}

func (c *manager) admissionOpenLocked() error {
	if c.draining {
		return errorf(subagent.CodeDraining, "the service is tearing continuable children down")
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
func (c *manager) settleIdle(act *activation) {
	if c.claim(act, true) {
		c.teardown(act)
	}
}

// check is settleIdle with the teardown on a goroutine of its own.
func (c *manager) check(act *activation) {
	if c.claim(act, true) {
		go c.teardown(act)
	}
}

// lost tears down an activation whose child something else ended: its
// agent was disposed (by its owner, most often), or its parent agent was.
func (c *manager) lost(act *activation) {
	if c.claim(act, false) {
		go c.teardown(act)
	}
}

// claim marks act as closing, and counts its teardown in flight, unless it
// is closing already or, when idleOnly, still has work (children it owns,
// a running turn, messages).
func (c *manager) claim(act *activation, idleOnly bool) bool {
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
func (c *manager) teardown(act *activation) {
	defer c.wg.Done()
	derr := act.child.dispose(context.Background())
	res := act.child.result() // read from memory: a failed flush or detach loses none of it
	if derr != nil {
		res.Teardown = c.svc.TeardownFailure(act.desc.Provider, act.id, res.StopReason, derr)
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
func (c *manager) notify(act *activation, res subagent.Result) {
	parent := act.parent
	if live, ok := c.agents.Get(act.parentID); !ok || live != parent || parent.ToolHost() {
		return
	}
	msg := subagent.SettledNotice(act.id, res)
	woken := agent.WakesSinceUser(parent.Session().Events(), isSettlement) >= c.svc.WakeBudget()
	c.mu.Lock()
	defer c.mu.Unlock()
	send := parent.Steer
	if pa := c.byAgent[parent]; woken || c.draining || act.hushed || (pa != nil && (pa.closing || pa.hushed)) {
		send = parent.Inject
	}
	if err := send(msg); err != nil && !errors.Is(err, &agent.Error{Code: agent.CodeDisposed}) {
		c.svc.Logger().Warn("subagent: settlement notice not delivered", "child", act.id, "parent", act.parentID, "err", err)
	}
}

// isSettlement reports whether a message is a settlement notice.
func isSettlement(s content.Source) bool {
	return s.Plugin == subagent.SourcePlugin && s.Form == subagent.FormSettled
}

// Drain implements subagent.Continuation: see subagent.Service.Drain.
func (c *manager) Drain(ctx context.Context) error {
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
