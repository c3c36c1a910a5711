package subagent

import "context"

// Residency is where a continuable child is in this process.
type Residency string

// The residencies, as list_agents shows them.
const (
	ResidentRunning Residency = "running" // its agent runs a turn
	ResidentIdle    Residency = "idle"    // resident, not running (waiting for its children, or parked)
	NotResident     Residency = "ready"   // no live agent: the next message rebuilds it from its log
)

// DescendantInterrupter is a run of an out-of-process child whose process
// runs a seam of its own (a dsh child): it interrupts, with the child's
// authority, a descendant resident in that process.
type DescendantInterrupter interface {
	InterruptDescendant(ctx context.Context, target string) error
}
