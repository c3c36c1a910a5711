package mcptool

//lint:file-ignore SA1019 MCP roots are deprecated as of protocol 2026-07-28, but the servers of today (and Claude Code) use them

import (
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/event"
)

// The roots a Set's clients answer roots/list with are the folders its
// agents work in: the Set's Dir always, and the working directory of each
// agent created while the Set is mounted (a worktree child's worktree)
// for as long as that agent lives. Connections are one per server for
// every agent, so every server sees the roots of all of them.

// rootRef is a root and how many holders keep it.
type rootRef struct {
	root *mcp.Root
	n    int
}

// FileURI returns the file:// URI of an absolute path.
func FileURI(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive: file:///C:/x
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// addRoot makes dir a root until remove is called; holders of the same
// dir share it.
func (s *Set) addRoot(dir string) (remove func()) {
	if dir == "" {
		return func() {}
	}
	uri := FileURI(filepath.Clean(dir))
	s.rootsMu.Lock()
	r := s.roots[uri]
	if r == nil {
		r = &rootRef{root: &mcp.Root{URI: uri, Name: filepath.Base(dir)}}
		s.roots[uri] = r
	}
	r.n++
	s.rootsMu.Unlock()
	s.syncLive()
	var done bool
	return func() {
		s.rootsMu.Lock()
		if done {
			s.rootsMu.Unlock()
			return
		}
		done = true
		if r.n--; r.n == 0 {
			delete(s.roots, uri)
		}
		s.rootsMu.Unlock()
		s.syncLive()
	}
}

// syncLive brings the roots of every live connection up to date; each
// client notifies its server when they changed.
func (s *Set) syncLive() {
	for _, srv := range s.servers {
		srv.mu.Lock()
		c := srv.live
		srv.mu.Unlock()
		if c != nil {
			s.syncRoots(c)
		}
	}
}

// syncRoots makes c's client hold exactly the Set's roots.
func (s *Set) syncRoots(c *conn) {
	s.rootsMu.Lock()
	defer s.rootsMu.Unlock()
	var gone []string
	for uri := range c.rooted {
		if s.roots[uri] == nil {
			gone = append(gone, uri)
			delete(c.rooted, uri)
		}
	}
	var added []*mcp.Root
	for uri, r := range s.roots {
		if !c.rooted[uri] {
			added = append(added, r.root)
			c.rooted[uri] = true
		}
	}
	if len(gone) > 0 {
		c.client.RemoveRoots(gone...)
	}
	c.client.AddRoots(added...)
}

// followAgents makes the working directory of each agent created on bus
// that in reports true a root while the agent lives; stop undoes it.
func (s *Set) followAgents(bus *event.Bus, in func(*agent.Agent) bool) (stop func()) {
	if bus == nil {
		return func() {}
	}
	var mu sync.Mutex
	held := map[*agent.Agent]func(){}
	stopCreated := event.On(bus, func(e agent.Created) {
		if !in(e.Agent) {
			return
		}
		remove := s.addRoot(e.Agent.Cwd())
		mu.Lock()
		held[e.Agent] = remove
		mu.Unlock()
	})
	stopDisposed := event.On(bus, func(e agent.Disposed) {
		mu.Lock()
		remove := held[e.Agent]
		delete(held, e.Agent)
		mu.Unlock()
		if remove != nil {
			remove()
		}
	})
	return func() {
		stopCreated()
		stopDisposed()
		mu.Lock()
		all := held
		held = map[*agent.Agent]func(){}
		mu.Unlock()
		for _, remove := range all {
			remove()
		}
	}
}

// inTree reports whether a is root or one of its descendants.
func inTree(root *agent.Agent) func(*agent.Agent) bool {
	return func(a *agent.Agent) bool {
		for ; a != nil; a = a.Owner() {
			if a == root {
				return true
			}
		}
		return false
	}
}
