// Package warm keeps the processes of out-of-process subagent providers
// running between children, so that a child is a new session on a running
// process instead of a new process. The pool is bounded: at most Size
// processes, each serving at most Sessions children at once and
// MaxChildren in its life, retired after IdleTimeout without a child, at
// once when a child reports it broken, and stopped when it exits or the
// pool closes. Only children with the same key (their launch identity:
// whatever is applied to the process rather than to the session) share a
// process. The package knows no protocol.
package warm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Config bounds a pool.
type Config struct {
	// Size is the number of processes kept that take children (≥ 1); a
	// retired one finishes its children outside it.
	Size int
	// Sessions is how many children one process serves at once (≥ 1).
	Sessions int
	// MaxChildren retires a process once it has served that many
	// children (0: no limit).
	MaxChildren int
	// IdleTimeout stops a process that has had no child for that long
	// (> 0).
	IdleTimeout time.Duration
}

// Process is a started process the pool holds.
type Process interface {
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// Stop ends the process and returns once it is reaped.
	Stop() error
}

// ErrClosed is Acquire's error once the pool is closed.
var ErrClosed = errors.New("the provider is closed: it starts no more children")

// Pool is a bounded set of warm processes of type P.
type Pool[P Process] struct {
	cfg Config

	mu      sync.Mutex
	members []*member[P]
	closed  bool
	starts  int // processes started for the pool, for tests and figures
	wg      sync.WaitGroup
}

// member is one process of the pool, or one being started.
type member[P Process] struct {
	key     string
	proc    P
	ready   chan struct{} // closed once started (or failed: err)
	err     error
	live    int  // children holding it (or waiting for it to start)
	served  int  // children it has been given
	retired bool // takes no more children; stopped when the last ends
	gone    bool // removed from the pool
	idle    *time.Timer
}

// New returns a pool; it checks cfg.
func New[P Process](cfg Config) (*Pool[P], error) {
	switch {
	case cfg.Size < 1:
		return nil, fmt.Errorf("size must be at least 1, got %d", cfg.Size)
	case cfg.Sessions < 1:
		return nil, fmt.Errorf("sessions must be at least 1, got %d", cfg.Sessions)
	case cfg.MaxChildren < 0:
		return nil, fmt.Errorf("maxChildren must not be negative, got %d", cfg.MaxChildren)
	case cfg.IdleTimeout <= 0:
		return nil, fmt.Errorf("idleTimeout must be positive, got %s", cfg.IdleTimeout)
	}
	return &Pool[P]{cfg: cfg}, nil
}

// Lease is one child's use of a process. Release it exactly once.
type Lease[P Process] struct {
	// Process is the process the child runs on.
	Process P
	// Pooled says that the process is shared through the pool; false: it
	// was started for this child alone (the pool was full), and Release
	// stops it.
	Pooled bool

	pool *Pool[P]
	m    *member[P]
	once sync.Once
}

// Acquire returns a process of launch identity key for one child: a
// running one with room, else one it starts with start (the pool's own
// when it has room, after stopping its least recently used idle process of
// another key when full; else a process for this child alone). The pool's
// own start runs on a goroutine of its own with a context that never ends,
// so that a start others wait for survives the first child's
// cancellation: start must bound itself. ctx bounds this child's wait, and
// the start of a process for it alone.
func (p *Pool[P]) Acquire(ctx context.Context, key string, start func(context.Context) (P, error)) (*Lease[P], error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	m := p.pick(key)
	var evict *member[P]
	if m == nil {
		if p.kept() >= p.cfg.Size {
			evict = p.lruIdle()
			if evict == nil {
				p.mu.Unlock()
				return p.alone(ctx, start)
			}
			p.remove(evict)
		}
		m = &member[P]{key: key, ready: make(chan struct{})}
		p.members = append(p.members, m)
		p.starts++
		p.wg.Add(1)
		go p.start(m, start)
	}
	m.live++
	m.served++
	m.retired = m.retired || p.cfg.MaxChildren > 0 && m.served >= p.cfg.MaxChildren
	if m.idle != nil {
		m.idle.Stop()
		m.idle = nil
	}
	if evict != nil {
		p.wg.Add(1)
	}
	p.mu.Unlock()
	if evict != nil {
		go func() {
			defer p.wg.Done()
			p.stop(evict)
		}()
	}
	select {
	case <-m.ready:
	case <-ctx.Done():
		p.release(m, false)
		return nil, context.Cause(ctx)
	}
	if m.err != nil {
		p.release(m, true)
		return nil, m.err
	}
	return &Lease[P]{Process: m.proc, Pooled: true, pool: p, m: m}, nil
}

// pick returns a started or starting process of key with room, the one
// with the fewest children. Under p.mu.
func (p *Pool[P]) pick(key string) *member[P] {
	var best *member[P]
	for _, m := range p.members {
		if m.key != key || m.retired || m.live >= p.cfg.Sessions {
			continue
		}
		if best == nil || m.live < best.live {
			best = m
		}
	}
	return best
}

// kept counts the processes that take children (a retired one only
// finishes its own, outside Size). Under p.mu.
func (p *Pool[P]) kept() int {
	n := 0
	for _, m := range p.members {
		if !m.retired {
			n++
		}
	}
	return n
}

// lruIdle returns the started process without children that has been idle
// longest (the first idle in order: members are kept in order of their
// last release). Under p.mu.
func (p *Pool[P]) lruIdle() *member[P] {
	for _, m := range p.members {
		select {
		case <-m.ready:
			if m.live == 0 {
				return m
			}
		default:
		}
	}
	return nil
}

// alone starts a process for one child, outside the pool.
func (p *Pool[P]) alone(ctx context.Context, start func(context.Context) (P, error)) (*Lease[P], error) {
	proc, err := start(ctx)
	if err != nil {
		return nil, err
	}
	return &Lease[P]{Process: proc, pool: p}, nil
}

// start starts m's process, and watches it: once it exits it leaves the
// pool (its children find out by themselves).
func (p *Pool[P]) start(m *member[P], start func(context.Context) (P, error)) {
	defer p.wg.Done()
	proc, err := start(context.Background())
	p.mu.Lock()
	m.proc, m.err = proc, err
	if err != nil {
		p.remove(m)
	}
	p.mu.Unlock()
	close(m.ready) // a Close meanwhile stops it once it is ready
	if err != nil {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		<-proc.Done()
		p.mu.Lock()
		removed := !m.gone
		p.remove(m)
		p.mu.Unlock()
		if removed {
			proc.Stop() // reaped already: frees its pipes
		}
	}()
}

// remove takes m out of the pool. Under p.mu.
func (p *Pool[P]) remove(m *member[P]) {
	if m.gone {
		return
	}
	m.gone = true
	if m.idle != nil {
		m.idle.Stop()
		m.idle = nil
	}
	for i, o := range p.members {
		if o == m {
			p.members = append(p.members[:i], p.members[i+1:]...)
			break
		}
	}
}

// stop stops a removed member's process once it has started.
func (p *Pool[P]) stop(m *member[P]) error {
	<-m.ready
	if m.err != nil {
		return nil
	}
	return m.proc.Stop()
}

// Release ends the child's use of its process. broken says that the child
// found the process misbehaving (a protocol error, no answer in time): it
// takes no more children. A process left without children is stopped when
// it is retired, has served MaxChildren or is the child's alone, else
// kept until IdleTimeout; Release returns when a process it stops is
// reaped, with Stop's error.
func (l *Lease[P]) Release(broken bool) error {
	var err error
	l.once.Do(func() {
		if !l.Pooled {
			err = l.Process.Stop()
			return
		}
		err = l.pool.release(l.m, broken)
	})
	return err
}

func (p *Pool[P]) release(m *member[P], broken bool) error {
	p.mu.Lock()
	m.live--
	m.retired = m.retired || broken || p.cfg.MaxChildren > 0 && m.served >= p.cfg.MaxChildren
	if m.live > 0 || m.gone {
		p.mu.Unlock()
		return nil
	}
	if m.retired || p.closed {
		p.remove(m)
		p.wg.Add(1) // Close waits for the stop
		p.mu.Unlock()
		defer p.wg.Done()
		return p.stop(m)
	}
	// Kept: last in the order of release, idle until a child comes.
	for i, o := range p.members {
		if o == m {
			p.members = append(append(p.members[:i:i], p.members[i+1:]...), m)
			break
		}
	}
	var t *time.Timer
	t = time.AfterFunc(p.cfg.IdleTimeout, func() {
		p.mu.Lock()
		if m.idle != t || m.live > 0 || m.gone {
			p.mu.Unlock()
			return
		}
		p.remove(m)
		p.wg.Add(1)
		p.mu.Unlock()
		defer p.wg.Done()
		p.stop(m)
	})
	m.idle = t
	p.mu.Unlock()
	return nil
}

// Close stops every process of the pool, with or without children (theirs
// then fail as at any exit), and returns once they are reaped; Acquire
// refuses from then on. A lease of a process started alone is its child's
// to release.
func (p *Pool[P]) Close() error {
	p.mu.Lock()
	p.closed = true
	members := p.members
	p.members = nil
	for _, m := range members {
		m.gone = true
		if m.idle != nil {
			m.idle.Stop()
			m.idle = nil
		}
	}
	p.mu.Unlock()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { errs[i] = p.stop(m) })
	}
	wg.Wait()
	p.wg.Wait()
	return errors.Join(errs...)
}

// Stats says how many processes the pool holds now and how many it has
// started in all.
func (p *Pool[P]) Stats() (held, started int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.members), p.starts
}
