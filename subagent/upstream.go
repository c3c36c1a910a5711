package subagent

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/agent"
)

// LiveSlots admits the descendants of a child that runs in another process
// (a dsh child of `command: self`) against its tree's live-children cap, so
// that the cap holds across processes: the provider tells the child Max and
// answers its requests for a place with Acquire (see internal/acpmeta).
type LiveSlots struct {
	max     int
	acquire func() (release func(), err error)
}

// Max is the tree's live-children cap (0: none of its own, only those of
// the processes above it).
func (l *LiveSlots) Max() int { return l.max }

// Acquire takes a place for a descendant about to start, or refuses with
// LIMIT_REACHED. The release gives it back; it may be called more than once.
func (l *LiveSlots) Acquire() (release func(), err error) { return l.acquire() }

// Upstream takes a place for a new child of a tree in the count of another
// process, the tree's parent (see Service.CountUpstream). It refuses with a
// *Error of code LIMIT_REACHED; any other error means the other process
// does not count (an older dsh), and the tree falls back to the local cap.
type Upstream func() (release func(), err error)

// upstream is a tree whose live children another process counts too.
type upstream struct {
	max     int // the parent's cap, narrowing the local one; 0: none
	acquire Upstream
	gone    atomic.Bool // acquire failed other than by refusal: not asked again
}

// CountUpstream makes the tree of root (an agent whose parent is in another
// process) count each child it starts in that process as well, through
// acquire, under max (the parent's cap, which also narrows the local one; 0:
// none). It returns the undo; call it when root is disposed.
func (s *Service) CountUpstream(root *agent.Agent, max int, acquire Upstream) (remove func()) {
	up := &upstream{max: max, acquire: acquire}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.upstream == nil {
		s.upstream = map[*agent.Agent]*upstream{}
	}
	s.upstream[root] = up
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.upstream[root] == up {
			delete(s.upstream, root)
		}
	}
}

// liveLimit is the live-children cap of root's tree: the local one,
// narrowed by the parent process's. s.mu is held.
func (s *Service) liveLimit(up *upstream) int {
	limit := s.maxLive
	if up != nil && up.max > 0 && (limit == 0 || up.max < limit) {
		limit = up.max
	}
	return limit
}

// liveSlots returns what a provider tells a child in another process about
// parent's tree, or nil when nothing limits it.
func (s *Service) liveSlots(name string, parent *agent.Agent) *LiveSlots {
	root := rootOf(parent)
	s.mu.Lock()
	up := s.upstream[root]
	limit := s.liveLimit(up)
	s.mu.Unlock()
	if limit == 0 && up == nil {
		return nil
	}
	return &LiveSlots{max: limit, acquire: func() (func(), error) { return s.admitLive(name, parent) }}
}

// admitUpstream takes the place of a child just counted locally in the
// count of the process above, if any: a refusal undoes the local count.
func (s *Service) admitUpstream(name string, up *upstream, local func()) (release func(), err error) {
	if up == nil || up.gone.Load() {
		return local, nil
	}
	remote, err := up.acquire()
	if err == nil {
		var once sync.Once
		return func() { once.Do(func() { remote(); local() }) }, nil
	}
	if se := (*Error)(nil); errors.As(err, &se) && se.Code == CodeLimitReached {
		local()
		return nil, &Error{Code: CodeLimitReached, Provider: name, Msg: se.Msg}
	}
	up.gone.Store(true)
	s.log.Warn("the parent process does not count this tree's live children; the local cap (subagents.maxLiveChildren) holds alone", "err", err)
	return local, nil
}

// limitReached is the refusal of a start beyond the cap limit.
func limitReached(name string, limit int) error {
	return &Error{Code: CodeLimitReached, Provider: name,
		Msg: fmt.Sprintf("the delegation tree already has %d live children, its cap (subagents.maxLiveChildren): wait for one to finish", limit)}
}

// rootOf is the root of a's in-process tree.
func rootOf(a *agent.Agent) *agent.Agent {
	for a.Owner() != nil {
		a = a.Owner()
	}
	return a
}
