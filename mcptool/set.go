// Package mcptool gives dsh agents the tools of Model Context Protocol
// servers, as Claude Code runs them. A Set holds one connection per
// configured server, shared by every agent and child of the process: it
// connects lazily, lists each server's tools (again when the server says
// they changed) and registers them as mcp__<server>__<tool> (in the
// runtime's global registry, or in a tool.Layer for one delegation tree),
// with list_mcp_resources and read_mcp_resource when a server has
// resources; it maps their results onto tool results capped like the
// built-in tools', answers roots/list with the agents' folders, relays
// progress and logging notifications to the event bus, and restarts a
// server that failed or crashed on a later call, after a backoff, failing
// its tools with a clear error meanwhile. Stdio servers run through internal/proc: their own
// process group, a scrubbed environment, reaped with the group on close.
package mcptool

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
)

// Defaults of Options.
const (
	DefaultRestartBackoff    = time.Second
	DefaultMaxRestartBackoff = time.Minute
	DefaultStopGrace         = 2 * time.Second
)

// Options configure a Set.
type Options struct {
	Log *slog.Logger
	// Events receives the progress notifications of tool calls (nil:
	// dropped).
	Events *event.Bus
	// Getenv expands the ${VAR} references of the server blocks; an empty
	// value counts as unset (default os.Getenv).
	Getenv func(string) string
	// Dir is the working directory of stdio servers without a cwd, and
	// what a relative cwd is relative to (default: the process's). It is
	// always one of the roots the servers are given (roots/list), with
	// the working directory of each agent alive (see MountGlobal).
	Dir string
	// BaseEnv is the environment a stdio server's is scrubbed from
	// (default os.Environ()).
	BaseEnv []string
	// Sandbox is the sandbox mode stdio servers run under (default
	// sandbox.Default, workspace-write: a server may write its working
	// directory and the temporary directories), unless a server's own
	// block sets one; Network is whether they may use the network.
	Sandbox sandbox.Mode
	Network sandbox.Network
	// CacheDir, when set, is a folder a stdio server running under
	// workspace-write may also write, handed to it as its package
	// managers' cache (npm_config_cache, XDG_CACHE_HOME) unless its block's
	// env sets them: so that `npx -y …` and `uvx …` servers run sandboxed,
	// without a way to write the user's own caches.
	CacheDir string
	// OutputLimit caps in bytes the text of one call's result, as
	// tools.outputLimit caps the built-in tools' (default
	// tool.DefaultOutputLimit).
	OutputLimit int
	// Version is dsh's version, sent as the client's.
	Version string
	// RestartBackoff is the wait after a server failed before a call
	// starts it again (default 1s); it doubles with each consecutive
	// failure up to MaxRestartBackoff (default 1m).
	RestartBackoff, MaxRestartBackoff time.Duration
	// StopGrace is how long a stdio server is given after stdin EOF, then
	// after SIGTERM, before its process group is killed (default 2s).
	StopGrace time.Duration
}

// Registrar is where a Set registers tools: a *tool.Registry or a
// *tool.Layer.
type Registrar interface {
	Register(def tool.Definition) (dispose func(), err error)
}

// Set is the MCP servers of a runtime (or of one ACP session): one
// connection per server, started on first need. Its methods are safe for
// concurrent use.
type Set struct {
	opts    Options
	servers []*server // by name
	ctx     context.Context
	cancel  context.CancelFunc // ends connection attempts at Close
	wg      sync.WaitGroup     // connection attempts and watchers

	tokens   atomic.Uint64
	progress sync.Map // progress token → *pending

	finishedMu sync.Mutex
	finished   []string // tokens of the latest calls that ended, oldest first

	rootsMu sync.Mutex
	roots   map[string]*rootRef // by URI

	mu               sync.Mutex
	targets          []*target
	resourcesOffered bool // the resource tools are registered in the targets
	closed           bool
}

// target is a Registrar the Set's tools are mounted in.
type target struct {
	r         Registrar
	disposers map[string][]func() // by server
}

// New validates the server blocks and returns a Set that has started
// nothing yet.
func New(servers map[string]ServerConfig, opts Options) (*Set, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("mcp: no working directory: %w", err)
		}
		opts.Dir = wd
	}
	opts.RestartBackoff = cmp.Or(opts.RestartBackoff, DefaultRestartBackoff)
	opts.MaxRestartBackoff = cmp.Or(opts.MaxRestartBackoff, DefaultMaxRestartBackoff)
	opts.StopGrace = cmp.Or(opts.StopGrace, DefaultStopGrace)
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = tool.DefaultOutputLimit
	}
	s := &Set{opts: opts, roots: map[string]*rootRef{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.addRoot(opts.Dir)
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		cfg := servers[name]
		if err := cfg.Validate(name); err != nil {
			s.cancel()
			return nil, err
		}
		s.servers = append(s.servers, &server{set: s, name: name, toolPrefix: ServerPrefix(name), cfg: cfg})
	}
	for _, srv := range s.servers {
		if srv.toolPrefix == srv.name {
			continue
		}
		for _, other := range s.servers {
			if other != srv && (other.name == srv.toolPrefix || ServerPrefix(other.name) == srv.toolPrefix) {
				sum := sha256.Sum256([]byte(srv.name))
				srv.toolPrefix += "-" + hex.EncodeToString(sum[:3]) // stable: a hash of its own name
				break
			}
		}
	}
	return s, nil
}

// Names returns the servers' names, sorted.
func (s *Set) Names() []string {
	out := make([]string, len(s.servers))
	for i, srv := range s.servers {
		out[i] = srv.name
	}
	return out
}

// Mount registers the tools of every server listed so far in r, and those
// of servers listed later as they are; the disposer unregisters them all.
// A tool r refuses (say, a duplicate name) is logged and left out.
func (s *Set) Mount(r Registrar) (dispose func()) {
	t := &target{r: r, disposers: map[string][]func(){}}
	s.mu.Lock()
	s.targets = append(s.targets, t)
	for _, srv := range s.servers {
		if defs := srv.definitions(); defs != nil {
			s.registerLocked(t, srv.name, defs)
		}
	}
	if s.resourcesOffered {
		s.registerLocked(t, resourcesKey, s.resourceTools())
	}
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.targets = slices.DeleteFunc(s.targets, func(x *target) bool { return x == t })
			ds := t.disposers
			t.disposers = nil
			s.mu.Unlock()
			for _, server := range ds {
				for _, d := range server {
					d()
				}
			}
		})
	}
}

// publish registers a server's tools, listed for the first time or again,
// in every target, in place of those it registered before.
func (s *Set) publish(srv *server, defs []tool.Definition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.targets {
		for _, d := range t.disposers[srv.name] {
			d()
		}
		delete(t.disposers, srv.name)
		s.registerLocked(t, srv.name, defs)
	}
}

func (s *Set) registerLocked(t *target, server string, defs []tool.Definition) {
	for _, d := range defs {
		dispose, err := t.r.Register(d)
		if err != nil {
			s.opts.Log.Warn("MCP tool left out", "server", server, "tool", d.Name, "err", err)
			continue
		}
		t.disposers[server] = append(t.disposers[server], dispose)
	}
}

// Ready starts every server whose tools are not listed yet (unless it is
// waiting out a backoff) and waits until each attempt has ended or ctx is
// done. Each attempt is bounded by its server's startTimeout; a server that
// fails is logged, and its error shows in Status.
func (s *Set) Ready(ctx context.Context) {
	var waits []<-chan struct{}
	for _, srv := range s.servers {
		if ch := srv.listing(); ch != nil {
			waits = append(waits, ch)
		}
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// Status is what a Set knows of one server.
type Status struct {
	Name      string
	Transport string // e.g. "stdio: npx -y server" (variables unexpanded)
	Tools     []string
	Err       error // why the server is unavailable, nil when it is not
}

// Status reports each server: its tools once listed, and its last error
// while it is unavailable.
func (s *Set) Status() []Status {
	out := make([]Status, 0, len(s.servers))
	for _, srv := range s.servers {
		st := Status{Name: srv.name, Transport: srv.cfg.Describe()}
		srv.mu.Lock()
		for _, d := range srv.defs {
			st.Tools = append(st.Tools, d.Name)
		}
		if srv.live == nil {
			st.Err = srv.lastErr
		}
		srv.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// Close stops every server (stdin EOF, then SIGTERM, then SIGKILL to a
// stdio server's process group) and returns once no goroutine or process
// of the Set remains, or ctx ends. Calls in flight fail with MCP_CLOSED;
// later calls too. It is idempotent.
func (s *Set) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	var errs []error
	for _, srv := range s.servers {
		if c := srv.shut(); c != nil {
			errs = append(errs, c.close(s.opts.StopGrace))
		}
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, context.Cause(ctx))
	}
	return errors.Join(errs...)
}

// MountGlobal mounts set's tools in the runtime's registry and starts its
// servers when a top-level agent is created: that agent's creation waits
// (each server bounded by its startTimeout) for the tools to be listed, so
// that its first model request shows them; a server that failed is tried
// again, after its backoff, when the next top-level agent is created.
// Children never wait. Each agent's working directory is one of the roots
// the servers are given while it lives. The disposer unmounts the tools.
func MountGlobal(set *Set, reg *tool.Registry, bus *event.Bus) (dispose func()) {
	unmount := set.Mount(reg)
	unroot := set.followAgents(bus, func(*agent.Agent) bool { return true })
	stop := event.On(bus, func(e agent.Created) {
		if e.Agent.Owner() == nil {
			set.Ready(context.Background())
		}
	})
	return func() {
		stop()
		unroot()
		unmount()
	}
}

// AttachTree gives root's delegation tree the tools of set, in a layer of
// its own: root and every in-process child it creates later see them as
// they see global tools, subject to their tool filters. Call set.Ready
// first for root's first request to list them. The working directories of
// root and of the children it creates (seen on set's Events) are the
// roots the servers are given. The returned detach takes them away.
func AttachTree(root *agent.Agent, set *Set) (detach func()) {
	layer := tool.NewLayer()
	unmount := set.Mount(layer)
	remove := root.Tools().AddLayers(layer)
	unrootSelf := set.addRoot(root.Cwd())
	unroot := set.followAgents(set.opts.Events, inTree(root))
	return func() {
		remove()
		unroot()
		unrootSelf()
		unmount()
	}
}

// Progress is a progress notification of an MCP tool call in flight.
type Progress struct {
	Server   string
	Tool     string // the dsh tool name
	CallID   string
	AgentID  string // the calling agent, "" when unknown
	Progress float64
	Total    float64 // 0 when the server does not know
	Message  string
}

// EventType implements event.Event.
func (Progress) EventType() string { return "mcp/progress" }

// Unavailable is an MCP server that failed to start, or crashed: its tools
// fail until a call after RetryIn starts it again.
type Unavailable struct {
	Server  string
	Err     string
	RetryIn time.Duration
}

// EventType implements event.Event.
func (Unavailable) EventType() string { return "mcp/unavailable" }

// pending is a call that may receive progress.
type pending struct{ Progress }

// keptTokens is how many ended calls keep their progress token: the SDK
// handles notifications apart from responses, so a call's last progress
// can arrive after its result.
const keptTokens = 64

// track registers a call's progress token; the returned func marks the
// call ended.
func (s *Set) track(token string, p *pending) (ended func()) {
	s.progress.Store(token, p)
	return func() {
		s.finishedMu.Lock()
		defer s.finishedMu.Unlock()
		s.finished = append(s.finished, token)
		if len(s.finished) > keptTokens {
			s.progress.Delete(s.finished[0])
			s.finished = s.finished[1:]
		}
	}
}

// onProgress relays a server's progress notification for a call in flight
// to the log (debug) and the bus.
func (s *Set) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p, ok := s.progress.Load(req.Params.ProgressToken)
	if !ok {
		return
	}
	ev := p.(*pending).Progress
	ev.Progress, ev.Total, ev.Message = req.Params.Progress, req.Params.Total, cut(req.Params.Message, 1024)
	s.opts.Log.Debug("MCP progress", "server", ev.Server, "tool", ev.Tool, "call", ev.CallID, "progress", ev.Progress, "total", ev.Total,
		"msg", ev.Message)
	if s.opts.Events != nil {
		s.opts.Events.Emit(ev)
	}
}
