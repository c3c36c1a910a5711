package acpchild

import (
	"cmp"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/subagent/internal/warm"
)

// Pool keeps an ACP agent's processes warm between children (the `pool:`
// block of an acp provider). A child is then a session/new on a running
// process, in a session of its own: its cancellation is session/cancel and
// its disposal session/close (when the agent advertises it; else the
// session is only dropped), and the process stays for the next child. Only
// children of the same launch identity share a process: the same working
// directory and depth (the provider's command, args and env are fixed). A
// process is retired after MaxChildren children, after IdleTimeout without
// one, and at once when it breaks the protocol or does not answer a
// cancellation in time; its exit fails only the children it serves. When
// the pool is full (Size processes, each with Sessions children), a child
// gets a process of its own, as without a pool.
type Pool struct {
	// Size is how many processes are kept (default 1; 0 turns the pool
	// off: a process per child).
	Size *int `yaml:"size"`
	// Sessions is how many children one process serves at once (default
	// DefaultPoolSessions, the sessions `dsh acp` holds at once).
	Sessions int `yaml:"sessions"`
	// IdleTimeout stops a process that has had no child for that long
	// (default DefaultPoolIdle).
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// MaxChildren retires a process once it has served that many children
	// (default DefaultPoolMaxChildren).
	MaxChildren int `yaml:"maxChildren"`
}

// Defaults of Pool.
const (
	DefaultPoolSessions    = 32
	DefaultPoolIdle        = 10 * time.Second
	DefaultPoolMaxChildren = 100
)

// DefaultSelfPool is the pool of a dsh child (`command: self`) whose
// provider has no `pool:` block: one process, kept DefaultPoolIdle after
// its last child.
func DefaultSelfPool() Pool { return Pool{Size: new(1)} }

// poolError is a bad key of the pool block.
type poolError struct{ field, msg string }

// resolve returns the pool a provider runs with (Size 0: none), with its
// defaults, or the first bad key.
func (p *Pool) resolve(dsh bool) (Pool, *poolError) {
	var c Pool
	switch {
	case p != nil:
		c = *p
	case dsh:
		c = DefaultSelfPool()
	default:
		return Pool{Size: new(0)}, nil
	}
	if c.Size == nil {
		c.Size = new(1)
	}
	switch {
	case *c.Size < 0:
		return c, &poolError{"size", fmt.Sprintf("must not be negative (0 turns the pool off), got %d", *c.Size)}
	case c.Sessions < 0:
		return c, &poolError{"sessions", fmt.Sprintf("must not be negative, got %d", c.Sessions)}
	case c.IdleTimeout < 0:
		return c, &poolError{"idleTimeout", fmt.Sprintf("must not be negative, got %s", c.IdleTimeout)}
	case c.MaxChildren < 0:
		return c, &poolError{"maxChildren", fmt.Sprintf("must not be negative, got %d", c.MaxChildren)}
	}
	c.Sessions = cmp.Or(c.Sessions, DefaultPoolSessions)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultPoolIdle)
	c.MaxChildren = cmp.Or(c.MaxChildren, DefaultPoolMaxChildren)
	return c, nil
}

// warm returns the pool's bounds.
func (c Pool) warm() warm.Config {
	return warm.Config{Size: *c.Size, Sessions: c.Sessions, IdleTimeout: c.IdleTimeout, MaxChildren: c.MaxChildren}
}
