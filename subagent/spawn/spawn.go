// Package spawn is the subagent provider that runs a fresh in-process child:
// its own session, no inherited conversation.
package spawn

import (
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// Name is the provider's conventional registry name.
const Name = "spawn"

// New returns the spawn provider creating children through agents.
func New(agents *agent.Registry) (*inproc.Provider, error) {
	return inproc.New(inproc.Config{Name: Name, Agents: agents})
}
