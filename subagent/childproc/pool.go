package childproc

import (
	"cmp"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/internal/warm"
)

// Pool keeps a provider's child processes warm between children (the
// `pool:` block of an acp or codex provider): a child is then a new
// session (ACP session/new, Codex thread/start) on a running process, in a
// session of its own, cancelled and ended by the protocol, and the process
// stays for the next child. Only children of the same launch identity
// share a process: whatever is applied to the process rather than to the
// session (the working directory, the depth, a trace context given in the
// environment; the provider's command, args and env are fixed). A process
// is retired after MaxChildren children, after IdleTimeout without one,
// and at once when it breaks the protocol or does not answer a
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

// Resolve returns the pool a provider runs with: p with its defaults, else
// dflt (nil: none); a Size of 0 means none. Its error is a
// *subagent.ConfigError naming the bad key of the block ("pool.size").
func (p *Pool) Resolve(kind, provider string, dflt *Pool) (Pool, error) {
	var c Pool
	switch {
	case p != nil:
		c = *p
	case dflt != nil:
		c = *dflt
	default:
		return Pool{Size: new(0)}, nil
	}
	bad := func(field, format string, args ...any) error {
		return &subagent.ConfigError{Kind: kind, Provider: provider, Field: "pool." + field, Msg: fmt.Sprintf(format, args...)}
	}
	if c.Size == nil {
		c.Size = new(1)
	}
	switch {
	case *c.Size < 0:
		return c, bad("size", "must not be negative (0 turns the pool off), got %d", *c.Size)
	case c.Sessions < 0:
		return c, bad("sessions", "must not be negative, got %d", c.Sessions)
	case c.IdleTimeout < 0:
		return c, bad("idleTimeout", "must not be negative, got %s", c.IdleTimeout)
	case c.MaxChildren < 0:
		return c, bad("maxChildren", "must not be negative, got %d", c.MaxChildren)
	}
	c.Sessions = cmp.Or(c.Sessions, DefaultPoolSessions)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, DefaultPoolIdle)
	c.MaxChildren = cmp.Or(c.MaxChildren, DefaultPoolMaxChildren)
	return c, nil
}

// On reports whether a resolved pool keeps processes.
func (p Pool) On() bool { return p.Size != nil && *p.Size > 0 }

// Bounds are a resolved pool's, for the providers' warm.Pool.
func (p Pool) Bounds() warm.Config {
	return warm.Config{Size: *p.Size, Sessions: p.Sessions, IdleTimeout: p.IdleTimeout, MaxChildren: p.MaxChildren}
}
