package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dsh-go/dsh/event"
)

// Persister writes one session's events durably, in order.
type Persister interface {
	// Append writes a batch of events that continues the stored log exactly.
	Append(events []Event) error
	// Close releases the persister's resources.
	Close() error
}

// Backend stores sessions. New sessions are written lazily: nothing exists
// on the backend until the first Append.
type Backend interface {
	// Create returns a persister for a new session.
	Create(h Header) (Persister, error)
	// Load reads a stored session for a writer, which gets the returned
	// persister. A session another live writer holds is refused
	// (CodeBusy). A torn last record is dropped; the events are returned as
	// stored, without closing an interrupted turn.
	Load(id string) (Header, []Event, Persister, error)
	// List returns the headers of every stored session.
	List() ([]Header, error)
}

// Durable is a Backend that can say whether its sessions outlive the
// process (a file store does; the memory store does not).
type Durable interface {
	Durable() bool
}

// Reader is a Backend that can read a stored session without writing to
// it: a reader never repairs, truncates or locks out a file, and learns
// whether a live writer (in any process) holds the session.
type Reader interface {
	// Read returns a stored session as it is now. While live, a writer holds
	// the session: a last record it has not finished writing is left out,
	// and an open turn is still running. Otherwise a torn last record is
	// left out, and an open turn was interrupted. Nothing is changed on the
	// backend either way.
	Read(id string) (h Header, events []Event, live bool, err error)
}

// CreateOptions describe a new session.
type CreateOptions struct {
	ID              string // required: callers mint ids (random UUIDs)
	Cwd             string // absolute, or empty
	ParentSession   string
	Origin          string
	DelegationDepth int
	Seed            []Event // completed turns inherited from another log
}

// Created is emitted on the runtime bus when a session is published.
type Created struct{ Session *Session }

// EventType implements event.Event.
func (Created) EventType() string { return "session/created" }

// Disposed is emitted on the runtime bus when a session is detached.
type Disposed struct{ Session *Session }

// EventType implements event.Event.
func (Disposed) EventType() string { return "session/disposed" }

// Store holds the live sessions of a runtime and persists them.
type Store struct {
	backend Backend
	bus     *event.Bus
	mu      sync.Mutex
	live    map[string]*Session
}

// NewStore returns a store persisting through backend (NewMemoryBackend()
// when nil) and announcing sessions on bus (may be nil).
func NewStore(backend Backend, bus *event.Bus) *Store {
	if backend == nil {
		backend = NewMemoryBackend()
	}
	return &Store{backend: backend, bus: bus, live: map[string]*Session{}}
}

// Prepare validates opts and returns an unpublished session: it is not in the
// store and nothing is written until Enter. A seed must be a balanced log of
// completed turns; a session/end-seed marker follows it.
func (st *Store) Prepare(opts CreateOptions) (*Session, error) {
	h := Header{ID: opts.ID, CreatedAt: time.Now().UnixMilli(), Cwd: opts.Cwd, ParentSession: opts.ParentSession,
		Origin: opts.Origin, DelegationDepth: opts.DelegationDepth}
	if err := validateHeader(h); err != nil {
		return nil, err
	}
	seed := opts.Seed
	if len(seed) > 0 {
		if err := CheckBalanced(seed); err != nil {
			return nil, errorf(CodeInvalidSeed, "session %s: invalid seed: %v", opts.ID, err)
		}
		h.SeedLength = len(seed)
		if seed[len(seed)-1].Type != TypeEndSeed {
			last := seed[len(seed)-1]
			seed = append(slices.Clip(seed), Event{Seq: last.Seq + 1, Time: last.Time, Type: TypeEndSeed, Data: EndSeed{}})
		}
	}
	return newSession(h, seed), nil
}

// Enter publishes a prepared session: it becomes live in the store, its
// persister is attached (seeded events are written with the first batch) and
// session/created is announced. The returned detach flushes and closes it.
// A parent session live in this store is flushed first, so that a child is
// never stored without its parent. A session from PrepareLoad keeps its
// stored log and writer; the closers of its interrupted turn are written
// at once.
func (st *Store) Enter(s *Session) (detach func() error, err error) {
	if parent, ok := st.Get(s.header.ParentSession); ok {
		parent.Flush() // a write error is the parent's to report
	}
	s.mu.Lock()
	var p Persister
	var stored int
	if l := s.loaded; l != nil {
		p, stored = l.p, l.n
	}
	s.loaded = nil
	s.mu.Unlock()
	if p == nil {
		if p, err = st.backend.Create(s.header); err != nil {
			return nil, fmt.Errorf("session %s: %w", s.header.ID, err)
		}
	}
	if err := st.enter(s, p, stored); err != nil {
		p.Close()
		return nil, err
	}
	detach = st.detacher(s)
	if stored > 0 { // a loaded session: persist what closed its interrupted turn
		if err := s.Flush(); err != nil {
			detach()
			return nil, err
		}
	}
	return detach, nil
}

// enter makes s live with persister p, which already holds the events
// before index stored.
func (st *Store) enter(s *Session, p Persister, stored int) error {
	st.mu.Lock()
	if _, dup := st.live[s.header.ID]; dup {
		st.mu.Unlock()
		return errorf(CodeExists, "session %s is already live", s.header.ID)
	}
	st.live[s.header.ID] = s
	st.mu.Unlock()
	s.mu.Lock()
	s.persister, s.persisted = p, int32(stored)
	s.mu.Unlock()
	if st.bus != nil {
		st.bus.Emit(Created{Session: s})
	}
	return nil
}

func (st *Store) detacher(s *Session) func() error {
	return (&detachment{st: st, s: s}).detach
}

// detachment is a live session's detach, run once: one allocation of 48 B
// and its method value, where a closure over a Once and an error was three
// (80 B), for every parked child.
type detachment struct {
	once sync.Once
	st   *Store
	s    *Session
	err  error
}

func (d *detachment) detach() error {
	d.once.Do(func() {
		st, s := d.st, d.s
		d.err = s.close()
		st.mu.Lock()
		delete(st.live, s.header.ID)
		st.mu.Unlock()
		if st.bus != nil {
			st.bus.Emit(Disposed{Session: s})
		}
	})
	return d.err
}

// Create prepares and enters a session in one step.
func (st *Store) Create(opts CreateOptions) (*Session, func() error, error) {
	s, err := st.Prepare(opts)
	if err != nil {
		return nil, nil, err
	}
	detach, err := st.Enter(s)
	if err != nil {
		return nil, nil, err
	}
	return s, detach, nil
}

// Load reads a stored session, closes an interrupted last turn (the closers
// are persisted), and makes it live.
func (st *Store) Load(ctx context.Context, id string) (*Session, func() error, error) {
	s, err := st.PrepareLoad(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	detach, err := st.Enter(s)
	if err != nil {
		return nil, nil, err
	}
	return s, detach, nil
}

// PrepareLoad reads a stored session for a writer, as Load does, and closes
// an interrupted last turn, but leaves the session unpublished, like
// Prepare: Enter makes it live (persisting the closers, and writing no new
// header), Abandon gives it up. Until then the backend's writer lock is
// held: a second writer is refused (CodeBusy).
func (st *Store) PrepareLoad(ctx context.Context, id string) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, live := st.Get(id); live {
		return nil, errorf(CodeExists, "session %s is already live", id)
	}
	h, events, p, err := st.backend.Load(id)
	if err != nil {
		return nil, err
	}
	extra, err := closers(events)
	if err != nil {
		p.Close()
		return nil, errorf(CodeCorrupt, "session %s: %v", id, err)
	}
	s := newSession(h, append(events, extra...))
	s.loaded = &loadedLog{p: p, n: len(events)}
	return s, nil
}

// Abandon releases a session that PrepareLoad read and that will not be
// entered. It is a no-op for any other session.
func (st *Store) Abandon(s *Session) {
	s.mu.Lock()
	l := s.loaded
	s.loaded = nil
	s.mu.Unlock()
	if l != nil {
		l.p.Close()
	}
}

// Durable reports whether the store's sessions outlive the process: its
// backend is a Durable one that says so. Continuing a conversation in a
// later process needs it.
func (st *Store) Durable() bool {
	d, ok := st.backend.(Durable)
	return ok && d.Durable()
}

// Read returns a session's header and events without writing anything. A
// session live in this store is returned as it is. A stored one that a live
// writer (another process) holds is returned as stored so far: its open turn
// is still running. Otherwise an interrupted last turn is closed, in memory
// only, as Load would close it.
func (st *Store) Read(id string) (Header, []Event, error) {
	if s, ok := st.Get(id); ok {
		return s.Header(), s.Events(), nil
	}
	h, events, live, err := st.read(id)
	if err != nil || live {
		return h, events, err
	}
	events, err = Repair(events)
	if err != nil {
		return Header{}, nil, errorf(CodeCorrupt, "session %s: %v", id, err)
	}
	return h, events, nil
}

// read reads a stored session through the backend's Reader, or else
// through Load.
func (st *Store) read(id string) (h Header, events []Event, live bool, err error) {
	if r, ok := st.backend.(Reader); ok {
		return r.Read(id)
	}
	h, events, p, err := st.backend.Load(id)
	if err != nil {
		return Header{}, nil, false, err
	}
	p.Close()
	return h, events, false, nil
}

// FlushLive flushes every live session and returns the write errors met.
func (st *Store) FlushLive() error {
	var errs []error
	for _, id := range st.Live() {
		if s, ok := st.Get(id); ok {
			errs = append(errs, s.Flush())
		}
	}
	return errors.Join(errs...)
}

// Get returns a live session.
func (st *Store) Get(id string) (*Session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.live[id]
	return s, ok
}

// Live returns the ids of the live sessions.
func (st *Store) Live() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := make([]string, 0, len(st.live))
	for id := range st.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// List returns the headers of the stored sessions, newest first.
func (st *Store) List() ([]Header, error) {
	hs, err := st.backend.List()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(hs, func(a, b Header) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	return hs, nil
}
