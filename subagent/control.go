package subagent

import (
	"context"
	"fmt"
	"slices"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

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
	if err := c.authorize(caller); err != nil {
		return err
	}
	if caller.ID() == target {
		return errorf(CodeUnauthorized, "an agent cannot interrupt itself")
	}
	c.mu.Lock()
	act := c.acts[target]
	if act == nil {
		act = c.byRemoteLocked(target) // the session a dsh child process writes for itself, as list_agents shows it
	}
	if act == nil {
		c.mu.Unlock()
		return c.interruptElsewhere(caller, target)
	}
	if act.closing {
		c.mu.Unlock()
		return nil
	}
	ancestor := c.descends(act, caller.ID())
	c.mu.Unlock()
	if !ancestor {
		return errorf(CodeUnauthorized, "agent %s is not an ancestor of %s", caller.ID(), target)
	}
	act.child.interrupt(session.Cause{Kind: agent.CauseParent, Reason: "interrupted by " + caller.ID()})
	return nil
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
	return s.interruptWhere(reason, inTree(rootID))
}

// InterruptChildren stops, with the user's authority, the running turns
// of the named continuable children and of everything below them, as
// InterruptTree does for a root: ids that are not resident are skipped.
// It returns the ids of the children it interrupted.
func (s *Service) InterruptChildren(ids []string, reason string) []string {
	return s.interruptWhere(reason, namedOrBelow(ids))
}

// inTree selects the activations below the agent rootID, at any depth.
func inTree(rootID string) func(*continuation, *activation) bool {
	return func(c *continuation, act *activation) bool { return c.descends(act, rootID) }
}

// namedOrBelow selects the activations named by ids and those below them.
func namedOrBelow(ids []string) func(*continuation, *activation) bool {
	return func(c *continuation, act *activation) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return act.id == id || c.descends(act, id) })
	}
}

// selectLocked returns the resident activations match selects; c.mu is
// held.
func (c *continuation) selectLocked(match func(*continuation, *activation) bool) []*activation {
	var acts []*activation
	for _, act := range c.acts {
		if match(c, act) {
			acts = append(acts, act)
		}
	}
	return acts
}

// interruptWhere interrupts, with the user's authority, the activations
// match selects that are not closing (see InterruptTree).
func (s *Service) interruptWhere(reason string, match func(*continuation, *activation) bool) []string {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	c.mu.Lock()
	return c.interruptLocked(c.selectLocked(func(c *continuation, act *activation) bool { return !act.closing && match(c, act) }), reason)
}

// interruptLocked hushes acts, unlocks c.mu and interrupts their turns.
func (c *continuation) interruptLocked(acts []*activation, reason string) []string {
	ids := make([]string, 0, len(acts))
	for _, act := range acts {
		act.hushed = true // before the interrupt: its settlement notice must not wake
		ids = append(ids, act.id)
	}
	c.mu.Unlock()
	cause := session.Cause{Kind: agent.CauseUser, Reason: reason}
	for _, act := range acts {
		act.child.interrupt(cause)
		c.check(act) // one idle already (parked, or waiting for its children) settles now, or when they have
	}
	return ids
}

// DrainTree tears down every resident continuable child below the agent
// rootID, at any depth, as Drain does for all of them, while admission
// stays open: their turns end, their notices wake no one and their
// processes end. It returns once they are released or ctx ends.
func (s *Service) DrainTree(ctx context.Context, rootID string) error {
	return s.drainWhere(ctx, inTree(rootID))
}

// DrainChildren tears down the named resident continuable children and
// everything below them, as DrainTree does for a root's; ids that are not
// resident are skipped.
func (s *Service) DrainChildren(ctx context.Context, ids []string) error {
	return s.drainWhere(ctx, namedOrBelow(ids))
}

// drainWhere tears down the activations match selects (see DrainTree).
func (s *Service) drainWhere(ctx context.Context, match func(*continuation, *activation) bool) error {
	c, err := s.continuation()
	if err != nil {
		return nil
	}
	c.mu.Lock()
	return c.drain(ctx, c.selectLocked(match))
}

// drain hushes acts, unlocks c.mu, tears them down and waits for their
// release.
func (c *continuation) drain(ctx context.Context, acts []*activation) error {
	for _, act := range acts {
		act.hushed = true
	}
	c.mu.Unlock()
	for _, act := range acts {
		c.lost(act)
	}
	for _, act := range acts {
		if err := wait(ctx, act.released); err != nil {
			return err
		}
	}
	return nil
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
	if err := ctx.Err(); err != nil {
		return "", context.Cause(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.admissionOpenLocked(); err != nil {
		return "", err
	}
	act := c.byAgent[child]
	switch {
	case act == nil:
		return "", errorf(CodeUnauthorized, "only a resident continuable child can report")
	case act.closing:
		return "", errorf(CodeActivationClosing, "child %s is closing", act.id)
	}
	parent, ok := c.agents.Get(act.parentID)
	if !ok || parent != act.parent {
		return "", errorf(CodeParentUnavailable, "the direct parent %s is not live; the report was not delivered", act.parentID)
	}
	msg := content.UserMessage(append([]content.Block{content.Text(fmt.Sprintf("Background subagent %s reported:", act.id))}, output...)...)
	msg.Source = content.Source{Kind: content.SourcePlugin, Plugin: SourcePlugin, Form: FormReport, Sender: act.id}
	send := parent.Steer
	if quiet {
		send = parent.Inject
	}
	if err := send(msg); err != nil {
		return "", &Error{Code: CodeParentUnavailable, Msg: "the parent refused the report", Err: err}
	}
	return msg.ID, nil
}

// Residency is where a continuable child is in this process.
type Residency string

// The residencies, as list_agents shows them.
const (
	ResidentRunning Residency = "running" // its agent runs a turn
	ResidentIdle    Residency = "idle"    // resident, not running (waiting for its children, or parked)
	NotResident     Residency = "ready"   // no live agent: the next message rebuilds it from its log
)

// Residency reports where child id is.
func (s *Service) Residency(id string) Residency {
	c, err := s.continuation()
	if err != nil {
		return NotResident
	}
	c.mu.Lock()
	act := c.acts[id]
	c.mu.Unlock()
	switch {
	case act == nil:
		return NotResident
	case act.child.busy():
		return ResidentRunning
	}
	return ResidentIdle
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
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, act := range c.acts {
		settling := act.closing || ((act.child.queued() == 0 || act.hushed) && len(act.owned) == 0)
		if !settling && !act.child.busy() {
			continue
		}
		if c.descends(act, parentID) {
			return true
		}
	}
	return false
}

// DescendantInterrupter is a run of an out-of-process child whose process
// runs a seam of its own (a dsh child): it interrupts, with the child's
// authority, a descendant resident in that process.
type DescendantInterrupter interface {
	InterruptDescendant(ctx context.Context, target string) error
}

// interruptElsewhere interrupts target in the process of the resident
// out-of-process child whose conversation target descends from, found by
// walking the stored sessions' lineage up from target; caller must be
// that child's ancestor here. A target below no such child is a no-op.
func (c *continuation) interruptElsewhere(caller *agent.Agent, target string) error {
	id := target
	for range maxOwnerChain {
		h, _, err := c.sessions.Read(id)
		if err != nil || h.ParentSession == "" {
			return nil
		}
		c.mu.Lock()
		act := c.byRemoteLocked(h.ParentSession)
		ancestor := act != nil && c.descends(act, caller.ID())
		c.mu.Unlock()
		switch {
		case act == nil:
			id = h.ParentSession
			continue
		case !ancestor:
			return errorf(CodeUnauthorized, "agent %s is not an ancestor of %s", caller.ID(), target)
		}
		if rc, ok := act.child.(*remoteChild); ok {
			return rc.interruptDescendant(target)
		}
		return nil
	}
	return nil
}

// byRemoteLocked returns the resident out-of-process child that continues
// conversation id, if any. c.mu must be held.
func (c *continuation) byRemoteLocked(id string) *activation {
	for _, act := range c.acts {
		if id != "" && act.desc.Remote == id {
			return act
		}
	}
	return nil
}

// descends reports whether act is below the agent id: following resident
// parents, and then the owners of live agents, so that a continuable child
// under a one-shot child (whose agent owns it, but which is no activation)
// is below the one-shot child's ancestors too. c.mu must be held.
func (c *continuation) descends(act *activation, id string) bool {
	for a, n := act, 0; a != nil && n <= len(c.acts); a, n = c.acts[a.parentID], n+1 {
		if a.parentID == id {
			return true
		}
		for p, m := a.parent, 0; p != nil && m <= maxOwnerChain; p, m = p.Owner(), m+1 {
			if p.ID() == id {
				return true
			}
		}
	}
	return false
}

// maxOwnerChain bounds a walk up the owners of agents.
const maxOwnerChain = 64
