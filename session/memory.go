package session

import (
	"slices"
	"sync"
)

// MemoryBackend keeps sessions in memory; for tests and embedding.
type MemoryBackend struct {
	mu       sync.Mutex
	sessions map[string]*memSession
}

var _ Reader = (*MemoryBackend)(nil)

// memSession is a stored session, made with its first persister and
// stored at its first append.
type memSession struct {
	header  Header
	events  []Event
	writers int // open persisters; guarded by MemoryBackend.mu
}

// NewMemoryBackend returns an empty in-memory backend.
func NewMemoryBackend() *MemoryBackend {
	return &MemoryBackend{sessions: map[string]*memSession{}}
}

// memPersister writes to its session, which holds the header: a parked
// child's persister is 24 B, not a second copy of the header.
type memPersister struct {
	b      *MemoryBackend
	s      *memSession
	closed bool
}

// persister returns a new persister of s. b.mu must be held.
func (b *MemoryBackend) persister(s *memSession) *memPersister {
	s.writers++
	return &memPersister{b: b, s: s}
}

// Create implements Backend. The session appears at its first Append.
func (b *MemoryBackend) Create(h Header) (Persister, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sessions[h.ID]; ok {
		return nil, errorf(CodeExists, "session %s is already stored", h.ID)
	}
	return b.persister(&memSession{header: h}), nil
}

// Load implements Backend.
func (b *MemoryBackend) Load(id string) (Header, []Event, Persister, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return Header{}, nil, nil, errorf(CodeNotFound, "no stored session %q", id)
	}
	return s.header, slices.Clone(s.events), b.persister(s), nil
}

// Read implements Reader: a session is live while a persister of it is
// open.
func (b *MemoryBackend) Read(id string) (Header, []Event, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return Header{}, nil, false, errorf(CodeNotFound, "no stored session %q", id)
	}
	return s.header, slices.Clone(s.events), s.writers > 0, nil
}

// List implements Backend.
func (b *MemoryBackend) List() ([]Header, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hs := make([]Header, 0, len(b.sessions))
	for _, s := range b.sessions {
		hs = append(hs, s.header)
	}
	return hs, nil
}

func (p *memPersister) Append(events []Event) error {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	s, ok := p.b.sessions[p.s.header.ID]
	if !ok {
		// No room made: a parked child holds its first checkpoint only.
		p.s.events = slices.Clone(events)
		p.b.sessions[p.s.header.ID] = p.s
		return nil
	}
	s.events = append(growEvents(s.events, len(events)), events...) // as the live log grows
	return nil
}

// keepLog implements logKeeper: the store keeps the session's log, not a
// copy of it, when what it holds is the log's first from events; what a
// parked child has written then costs the store nothing.
func (p *memPersister) keepLog(log []Event, from int) error {
	p.b.mu.Lock()
	s, ok := p.b.sessions[p.s.header.ID]
	switch {
	case !ok && from == 0:
		p.s.events = log
		p.b.sessions[p.s.header.ID] = p.s
	case ok && len(s.events) == from:
		s.events = log
	default:
		p.b.mu.Unlock()
		return p.Append(log[from:])
	}
	p.b.mu.Unlock()
	return nil
}

func (p *memPersister) Close() error {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.s.writers--
	}
	return nil
}
