package continuable

import (
	"context"
	"fmt"
	"slices"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// Interrupt implements subagent.Continuation: see subagent.Service.Interrupt.
func (c *manager) Interrupt(caller *agent.Agent, target string) error {
	if err := c.authorize(caller); err != nil {
		return err
	}
	if caller.ID() == target {
		return errorf(subagent.CodeUnauthorized, "an agent cannot interrupt itself")
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
		return errorf(subagent.CodeUnauthorized, "agent %s is not an ancestor of %s", caller.ID(), target)
	}
	act.child.interrupt(session.Cause{Kind: agent.CauseParent, Reason: "interrupted by " + caller.ID()})
	return nil
}

// InterruptTree implements subagent.Continuation: see subagent.Service.InterruptTree.
func (c *manager) InterruptTree(rootID, reason string) []string {
	return c.interruptWhere(reason, inTree(rootID))
}

// InterruptChildren implements subagent.Continuation: see subagent.Service.InterruptChildren.
func (c *manager) InterruptChildren(ids []string, reason string) []string {
	return c.interruptWhere(reason, namedOrBelow(ids))
}

// inTree selects the activations below the agent rootID, at any depth.
func inTree(rootID string) func(*manager, *activation) bool {
	return func(c *manager, act *activation) bool { return c.descends(act, rootID) }
}

// namedOrBelow selects the activations named by ids and those below them.
func namedOrBelow(ids []string) func(*manager, *activation) bool {
	return func(c *manager, act *activation) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return act.id == id || c.descends(act, id) })
	}
}

// selectLocked returns the resident activations match selects; c.mu is
// held.
func (c *manager) selectLocked(match func(*manager, *activation) bool) []*activation {
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
func (c *manager) interruptWhere(reason string, match func(*manager, *activation) bool) []string {
	c.mu.Lock()
	return c.interruptLocked(c.selectLocked(func(c *manager, act *activation) bool { return !act.closing && match(c, act) }), reason)
}

// interruptLocked hushes acts, unlocks c.mu and interrupts their turns.
func (c *manager) interruptLocked(acts []*activation, reason string) []string {
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

// DrainTree implements subagent.Continuation: see subagent.Service.DrainTree.
func (c *manager) DrainTree(ctx context.Context, rootID string) error {
	return c.drainWhere(ctx, inTree(rootID))
}

// DrainChildren implements subagent.Continuation: see subagent.Service.DrainChildren.
func (c *manager) DrainChildren(ctx context.Context, ids []string) error {
	return c.drainWhere(ctx, namedOrBelow(ids))
}

// drainWhere tears down the activations match selects (see DrainTree).
func (c *manager) drainWhere(ctx context.Context, match func(*manager, *activation) bool) error {
	c.mu.Lock()
	return c.drain(ctx, c.selectLocked(match))
}

// drain hushes acts, unlocks c.mu, tears them down and waits for their
// release.
func (c *manager) drain(ctx context.Context, acts []*activation) error {
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

// Report implements subagent.Continuation: see subagent.Service.Report.
func (c *manager) Report(ctx context.Context, child *agent.Agent, output []content.Block, quiet bool) (string, error) {
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
		return "", errorf(subagent.CodeUnauthorized, "only a resident continuable child can report")
	case act.closing:
		return "", errorf(subagent.CodeActivationClosing, "child %s is closing", act.id)
	}
	parent, ok := c.agents.Get(act.parentID)
	if !ok || parent != act.parent {
		return "", errorf(subagent.CodeParentUnavailable, "the direct parent %s is not live; the report was not delivered", act.parentID)
	}
	msg := content.UserMessage(append([]content.Block{content.Text(fmt.Sprintf("Background subagent %s reported:", act.id))}, output...)...)
	msg.Source = content.Source{Kind: content.SourcePlugin, Plugin: subagent.SourcePlugin, Form: subagent.FormReport, Sender: act.id}
	send := parent.Steer
	if quiet {
		send = parent.Inject
	}
	if err := send(msg); err != nil {
		return "", &subagent.Error{Code: subagent.CodeParentUnavailable, Msg: "the parent refused the report", Err: err}
	}
	return msg.ID, nil
}

// Residency implements subagent.Continuation: see subagent.Service.Residency.
func (c *manager) Residency(id string) subagent.Residency {
	c.mu.Lock()
	act := c.acts[id]
	c.mu.Unlock()
	switch {
	case act == nil:
		return subagent.NotResident
	case act.child.busy():
		return subagent.ResidentRunning
	}
	return subagent.ResidentIdle
}

// Working implements subagent.Continuation: see subagent.Service.Working.
func (c *manager) Working(parentID string) bool {
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

// interruptElsewhere interrupts target in the process of the resident
// out-of-process child whose conversation target descends from, found by
// walking the stored sessions' lineage up from target; caller must be
// that child's ancestor here. A target below no such child is a no-op.
func (c *manager) interruptElsewhere(caller *agent.Agent, target string) error {
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
			return errorf(subagent.CodeUnauthorized, "agent %s is not an ancestor of %s", caller.ID(), target)
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
func (c *manager) byRemoteLocked(id string) *activation {
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
func (c *manager) descends(act *activation, id string) bool {
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
