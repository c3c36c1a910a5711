package subagent

import (
	"context"
	"fmt"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// Interrupt stops the current turn of caller's resident descendant target:
// the turn ends aborted, what is queued for it stays parked until the next
// Followup, the activation stays resident and the target's own children
// keep running. Only an ancestor of the target, as its exact live agent,
// may interrupt it (UNAUTHORIZED, which leaves the target alone); a target
// that is not resident (unknown, one-shot, settled) is an accepted no-op
// and is never resumed for it.
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
	if act == nil || act.closing {
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
		settling := act.closing || (act.child.queued() == 0 && len(act.owned) == 0)
		if !settling && !act.child.busy() {
			continue
		}
		if c.descends(act, parentID) {
			return true
		}
	}
	return false
}

// descends reports whether act is below the agent id, following resident
// parents. c.mu must be held.
func (c *continuation) descends(act *activation, id string) bool {
	for a, n := act, 0; a != nil && n <= len(c.acts); a, n = c.acts[a.parentID], n+1 {
		if a.parentID == id {
			return true
		}
	}
	return false
}
