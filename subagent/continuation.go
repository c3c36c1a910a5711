package subagent

import (
	"context"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// Continuable children.
//
// A continuable child is a durable session plus at most one activation in
// a process: the live agent that runs it now. The child's log holds its
// descriptor (see Descriptor), so that it can be rebuilt from the log alone,
// by any process, even after the provider that started it was
// unregistered. Package subagent/continuable keeps them: it routes every
// message to a child by residency, settles activations, tells parents,
// interrupts, drains and lists. This package defines what they are made of
// (Continuer, Preparation, ChildBuilder, RemoteContinuer, the options and
// results below), the Continuation interface the service forwards its
// continuable operations to, and the service API the manager builds on
// (ContinuationSupport below). A service without a Continuation fails those
// operations with CONTINUATION_UNAVAILABLE.

// Continuer is a provider whose children can continue after they settle
// (spawn, fork). It contributes what a fresh child starts from; the
// ChildBuilder handed to the manager of continuable children makes its
// agent, and the manager persists, publishes and rebuilds it.
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
// and persona applied before it is published. Neither the service nor the
// manager of continuable children makes an agent itself.
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

// The source of the messages the service relays between a parent and its
// continuable children (content.Source{Kind: plugin, Plugin: SourcePlugin}),
// by form; Sender names the sending session.
const (
	SourcePlugin = "subagent"
	FormRelay    = "relay"   // a parent's send_message to its child
	FormReport   = "report"  // a child's report to its parent
	FormSettled  = "settled" // the notice of a child's settlement
)

// Accepted is a message a continuable child's inbox accepted.
type Accepted struct {
	ChildID   string
	MessageID string
	result    chan Result    // foreground starts only
	end       SettleNotifier // the activation that took the message
}

// NewAccepted is the acceptance of message messageID by child childID,
// taken by an activation that announces its end through end (an Epoch).
// claim, for a foreground start, is where that activation's first
// settlement is sent (capacity 1); nil otherwise.
func NewAccepted(childID, messageID string, claim chan Result, end SettleNotifier) *Accepted {
	return &Accepted{ChildID: childID, MessageID: messageID, result: claim, end: end}
}

// afterEnd calls fn with the result of the activation that took the
// message once its end has been announced (subagent/end): by then the
// child is released and its parent told.
func (a *Accepted) afterEnd(fn func(Result)) { a.end.AfterSettle(fn) }

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

// Continuation is the manager of continuable children (package
// subagent/continuable's), to which the service forwards its continuable
// operations; each method is documented on the Service method of the same
// name.
type Continuation interface {
	CanContinue(name string) bool
	StartContinuable(ctx context.Context, name string, req StartRequest, opts ContinuableOptions) (*Accepted, error)
	Followup(ctx context.Context, caller *agent.Agent, id string, msg []content.Block) (string, error)
	Report(ctx context.Context, child *agent.Agent, output []content.Block, quiet bool) (string, error)
	Interrupt(caller *agent.Agent, target string) error
	InterruptTree(rootID, reason string) []string
	InterruptChildren(ids []string, reason string) []string
	DrainTree(ctx context.Context, rootID string) error
	DrainChildren(ctx context.Context, ids []string) error
	Drain(ctx context.Context) error
	Residency(id string) Residency
	Working(parentID string) bool
	ListChildren(ctx context.Context, parentID string) ([]ChildRow, error)
	ListDescendants(ctx context.Context, rootID string) ([]ChildRow, error)
	ReportInterrupted(ctx context.Context, parent *agent.Agent) (int, error)
}

// UseContinuation makes c serve the service's continuable operations
// (continuable.Serve calls it).
func (s *Service) UseContinuation(c Continuation) {
	s.mu.Lock()
	s.cont = c
	s.mu.Unlock()
}

func (s *Service) continuation() (Continuation, error) {
	s.mu.Lock()
	c := s.cont
	s.mu.Unlock()
	if c == nil {
		return nil, errorf(CodeContinuationUnavailable, "continuable children need the service to serve continuation (continuable.Serve)")
	}
	return c, nil
}

// CanContinue reports whether children of the named provider can be
// continuable here: the provider is a Continuer or a RemoteContinuer, and
// sessions outlive the process.
func (s *Service) CanContinue(name string) bool {
	c, err := s.continuation()
	return err == nil && c.CanContinue(name)
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
	return c.StartContinuable(ctx, name, req, opts)
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
	return c.Followup(ctx, caller, id, msg)
}

// Report sends output from a resident continuable child to its direct
// parent, one edge up, as "Background subagent <id> reported:" and the
// output: it wakes an idle parent and reaches a busy one at its next step;
// quiet delivers it without a wake. Reporting neither ends the child's turn
// nor its activation. It returns the delivered message's id.
func (s *Service) Report(ctx context.Context, child *agent.Agent, output []content.Block, quiet bool) (string, error) {
	c, err := s.continuation()
	if err != nil {
		return "", err
	}
	return c.Report(ctx, child, output, quiet)
}

// Interrupt stops the current turn of caller's resident descendant target
// (a resident child, or the conversation an out-of-process one continues):
// the turn ends aborted, what is queued for it stays parked until the next
// Followup, the activation stays resident and the target's own children
// keep running. Only an ancestor of the target, as its exact live agent,
// may interrupt it (UNAUTHORIZED, which leaves the target alone). A target
// resident in the process of an out-of-process child (a descendant of the
// conversation it continues, by the stored lineage) is interrupted there,
// by that child, with its authority (DescendantInterrupter). A target
// found nowhere (unknown, one-shot, settled) is an accepted no-op and is
// never resumed for it.
func (s *Service) Interrupt(caller *agent.Agent, target string) error {
	c, err := s.continuation()
	if err != nil {
		return err
	}
	return c.Interrupt(caller, target)
}

// InterruptTree stops, with the user's authority, the running turn of
// every continuable child below the agent rootID, at any depth, in process
// and out (an out-of-process child's run is stopped with its processes):
// each turn ends aborted with cause user and reason, what was queued
// stays parked, and from then on the settlement notices of those children
// wake no one: each is queued for the next turn its parent runs for
// another reason (for the root, the user's next prompt), until the parent
// sends that child more work. No live parent is needed. The root's own
// turn is the caller's to cancel, after this call. It returns the ids of
// the children it interrupted.
func (s *Service) InterruptTree(rootID, reason string) []string {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	return c.InterruptTree(rootID, reason)
}

// InterruptChildren stops, with the user's authority, the running turns
// of the named continuable children and of everything below them, as
// InterruptTree does for a root: ids that are not resident are skipped.
// It returns the ids of the children it interrupted.
func (s *Service) InterruptChildren(ids []string, reason string) []string {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	return c.InterruptChildren(ids, reason)
}

// DrainTree tears down every resident continuable child below the agent
// rootID, at any depth, as Drain does for all of them, while admission
// stays open: their turns end, their notices wake no one and their
// processes end. It returns once they are released or ctx ends.
func (s *Service) DrainTree(ctx context.Context, rootID string) error {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	return c.DrainTree(ctx, rootID)
}

// DrainChildren tears down the named resident continuable children and
// everything below them, as DrainTree does for a root's; ids that are not
// resident are skipped.
func (s *Service) DrainChildren(ctx context.Context, ids []string) error {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	return c.DrainChildren(ctx, ids)
}

// Drain closes admission to continuable children (DRAINING) and tears
// every resident one down, children with their parents; it returns once
// all are gone or ctx ends.
func (s *Service) Drain(ctx context.Context) error {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	return c.Drain(ctx)
}

// Residency reports where child id is.
func (s *Service) Residency(id string) Residency {
	c, err := s.continuation()
	if err != nil {
		return NotResident
	}
	return c.Residency(id)
}

// Working reports whether some continuable child below the agent
// parentID, at any depth, is still working here: running a turn, or
// settling (idle with nothing queued and no children: its notice is on its
// way). An activation parked by an interrupt, or waiting idle for its own
// children, is not working itself.
func (s *Service) Working(parentID string) bool {
	c, err := s.continuation()
	if err != nil {
		return false
	}
	return c.Working(parentID)
}

// ListChildren lists the subagent children of session parentID, stored or
// live (live sessions win), oldest first: their identity is the last valid
// descriptor of their log. A child whose session is still being created
// (no descriptor yet) is left out. Provider availability never filters a
// row. A ctx that ends fails the whole listing with CANCELLED.
func (s *Service) ListChildren(ctx context.Context, parentID string) ([]ChildRow, error) {
	c, err := s.continuation()
	if err != nil {
		return nil, err
	}
	return c.ListChildren(ctx, parentID)
}

// ListDescendants lists the subagent descendants of session rootID in
// pre-order (siblings oldest first), each with its parent and depth. It
// walks through every node, one-shot ones and unreadable ones included,
// never visits a session twice, and does not recurse (a deep chain is
// fine).
func (s *Service) ListDescendants(ctx context.Context, rootID string) ([]ChildRow, error) {
	c, err := s.continuation()
	if err != nil {
		return nil, err
	}
	return c.ListDescendants(ctx, rootID)
}

// ReportInterrupted tells a resumed parent about its children that were
// working when the process running them ended: each child whose stored
// log ends in an interrupted turn, and whose parent has heard nothing from
// it since that turn began, gets one settlement notice, queued (without a
// wake) for the parent's next turn. A child still written by a live
// process is left alone, and so is the session a dsh child process wrote
// for itself: the child's record stands for it. It returns how many notices it queued.
func (s *Service) ReportInterrupted(ctx context.Context, parent *agent.Agent) (int, error) {
	c, err := s.continuation()
	if err != nil {
		return 0, err
	}
	return c.ReportInterrupted(ctx, parent)
}
