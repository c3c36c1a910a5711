// Package fork is the subagent provider that runs an in-process child seeded
// with its parent's completed turns: the child sees the conversation so far,
// except the turn that is delegating.
package fork

import (
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// Name is the provider's conventional registry name.
const Name = "fork"

// New returns the fork provider creating children through agents.
func New(agents *agent.Registry) (*inproc.Provider, error) {
	return inproc.New(inproc.Config{Name: Name, Agents: agents, Fork: true})
}
