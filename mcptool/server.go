package mcptool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
)

// server is one configured MCP server and its connection, if any.
type server struct {
	set        *Set
	name       string
	toolPrefix string // the name in its tools' names: mcp__<toolPrefix>__<tool>
	cfg        ServerConfig

	mu        sync.Mutex
	live      *conn         // the connection calls use; nil when none
	attempt   chan struct{} // closed when the connection attempt in flight ends
	lastErr   error         // why the last attempt failed or the last connection ended
	failures  int           // consecutive failures; a successful call resets it
	retryAt   time.Time     // no new attempt before
	defs      []tool.Definition
	listed    bool // defs hold a listing: the first, or the latest after tools/list_changed
	resources bool // the server has resources
	closed    bool

	refreshMu     sync.Mutex  // one listing again at a time
	refreshQueued atomic.Bool // a background listing is due

	logMu      sync.Mutex // the budget of logging notifications (see logBudget)
	logTokens  float64
	logAt      time.Time
	logDropped int
}

// conn is one connection to a server.
type conn struct {
	client   *mcp.Client
	rooted   map[string]bool // URIs of the roots client holds; under Set.rootsMu
	obs      *observer
	observed bool // obs sees the messages as they are read, not only this notification
	session  *mcp.ClientSession
	proc     *proc.Process   // stdio only
	life     context.Context // cancelled when the connection is closed: ends the calls in flight
	end      context.CancelFunc
	ended    chan struct{} // closed once the connection is over and the process reaped
	cause    error         // why it ended; set before ended closes

	closeOnce sync.Once
	closeErr  error
}

func newConn(parent context.Context) *conn {
	c := &conn{ended: make(chan struct{})}
	c.life, c.end = context.WithCancel(parent)
	return c
}

// close ends the calls in flight, stops the process (stdin EOF, then
// SIGTERM, then SIGKILL to its group) and closes the session, which
// returns only once no call is in flight. It is idempotent.
func (c *conn) close(grace time.Duration) error {
	c.closeOnce.Do(func() {
		c.end()
		if c.proc != nil {
			c.closeErr = c.proc.Stop(grace, grace)
		}
		if c.session != nil {
			c.session.Close()
		}
	})
	return c.closeErr
}

func (s *server) definitions() []tool.Definition {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.listed {
		return nil
	}
	return s.defs
}

// listing starts a connection attempt when the tools are not listed yet
// and none is in flight or due to wait, and returns the channel closed when
// the attempt in flight ends (nil when there is none).
func (s *server) listing() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.listed || s.closed || time.Now().Before(s.retryAt):
		return nil
	case s.attempt != nil:
		return s.attempt
	}
	return s.dialLocked()
}

// dialLocked starts a connection attempt; s.mu must be held.
func (s *server) dialLocked() chan struct{} {
	ch := make(chan struct{})
	s.attempt = ch
	s.set.wg.Add(1)
	go s.dial(ch)
	return ch
}

// shut marks the server closed and returns its live connection, if any.
func (s *server) shut() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	c := s.live
	s.live = nil
	return c
}

// failedLocked records a failure and schedules the next attempt; s.mu must
// be held.
func (s *server) failedLocked(err error) {
	s.lastErr = err
	s.failures = min(s.failures+1, 16)
	d := s.set.opts.RestartBackoff
	for range s.failures - 1 {
		d *= 2
		if d >= s.set.opts.MaxRestartBackoff {
			d = s.set.opts.MaxRestartBackoff
			break
		}
	}
	s.retryAt = time.Now().Add(d)
	s.set.opts.Log.Warn("MCP server unavailable", "server", s.name, "err", err, "retryIn", d)
	if s.set.opts.Events != nil {
		s.set.opts.Events.Emit(Unavailable{Server: s.name, Err: err.Error(), RetryIn: d})
	}
}

// unavailableLocked is the error of a call while the server waits out its
// backoff; s.mu must be held.
func (s *server) unavailableLocked() error {
	wait := time.Until(s.retryAt).Round(100 * time.Millisecond)
	return &Error{Code: CodeUnavailable, Server: s.name,
		Msg: fmt.Sprintf("unavailable: %v (dsh starts it again on a call in %s or later)", s.lastErr, max(wait, 0))}
}

// dial makes one connection attempt and, on success, watches the
// connection until it ends.
func (s *server) dial(done chan struct{}) {
	defer s.set.wg.Done()
	defer close(done)
	c, defs, err := s.open()
	s.mu.Lock()
	s.attempt = nil
	var publish, offer bool
	switch {
	case s.closed:
		if c != nil {
			s.mu.Unlock()
			c.close(s.set.opts.StopGrace)
			return
		}
	case err != nil:
		s.failedLocked(err)
	default: // a first listing, or a new one after a restart
		s.live, s.lastErr = c, nil
		s.defs, s.listed, publish = defs, true, true
		if caps := c.session.InitializeResult().Capabilities; caps != nil && caps.Resources != nil {
			s.resources = true
		}
		offer = s.resources
	}
	s.mu.Unlock()
	if err != nil {
		return
	}
	s.set.syncRoots(c) // a root added or removed while it connected
	s.set.wg.Add(1)
	go s.watch(c)
	if publish {
		s.set.publish(s, defs)
	}
	if offer {
		s.set.offerResources()
	}
	s.set.opts.Log.Info("MCP server connected", "server", s.name, "tools", len(defs))
}

// watch waits for a connection to end (the server exited or closed it, or
// dsh closed it), stops its process, and records why.
func (s *server) watch(c *conn) {
	defer s.set.wg.Done()
	werr := c.session.Wait()
	c.close(s.set.opts.StopGrace)
	cause := errors.New("the connection closed")
	switch {
	case c.proc != nil:
		cause = fmt.Errorf("the server exited: %s", c.proc.Diagnostic())
	case werr != nil:
		cause = fmt.Errorf("the connection broke: %v", werr)
	}
	s.mu.Lock()
	if s.live == c {
		s.live = nil
		s.failedLocked(cause)
	}
	s.mu.Unlock()
	c.cause = cause
	close(c.ended) // after the server's state tells of the end: a caller waiting for it sees both
}

// open starts the server, performs the handshake and lists the tools, all
// within the start timeout.
func (s *server) open() (*conn, []tool.Definition, error) {
	cfg, err := s.cfg.expanded(func(name string) (string, bool) {
		v := s.set.opts.Getenv(name)
		return v, v != ""
	})
	if err != nil {
		return nil, nil, &Error{Code: CodeUnavailable, Server: s.name, Msg: err.Error()}
	}
	if cfg.HeadersHelper != "" {
		if cfg.Headers, err = s.helperHeaders(s.set.ctx, cfg); err != nil {
			return nil, nil, err
		}
	}
	// The connection's context governs the attempt too (an SSE stream
	// lives as long as the context its transport connects with); the
	// start timeout ends it from outside.
	c := newConn(s.set.ctx)
	c.obs = newObserver()
	ctx := c.life
	timeout := cmp.Or(s.cfg.StartTimeout, DefaultStartTimeout)
	var timedOut atomic.Bool
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		c.end()
	})
	transport, err := s.transport(cfg, c)
	if err != nil {
		timer.Stop()
		c.end()
		return nil, nil, &Error{Code: CodeUnavailable, Server: s.name, Msg: "cannot start: " + err.Error()}
	}
	fail := func(what string, err error) (*conn, []tool.Definition, error) {
		timer.Stop()
		c.close(s.set.opts.StopGrace)
		reason := err.Error()
		if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
			reason = "the server closed the connection"
		}
		msg := fmt.Sprintf("%s failed: %s", what, reason)
		if timedOut.Load() {
			msg = fmt.Sprintf("%s did not finish within %s (startTimeout)", what, timeout)
		}
		if c.proc != nil {
			msg += "; " + c.proc.Diagnostic()
		}
		return nil, nil, &Error{Code: CodeUnavailable, Server: s.name, Msg: msg}
	}
	if _, streamable := transport.(*mcp.StreamableClientTransport); !streamable {
		transport, c.observed = observed{transport, c.obs}, true
	}
	copts := &mcp.ClientOptions{Logger: s.set.opts.Log, ProgressNotificationHandler: s.set.onProgress,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.changed(c) }}
	s.takeLogs(copts)
	client := mcp.NewClient(&mcp.Implementation{Name: "dsh", Version: cmp.Or(s.set.opts.Version, "dev")}, copts)
	c.client, c.rooted = client, map[string]bool{}
	s.set.syncRoots(c)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fail("the handshake (initialize)", err)
	}
	c.session = cs
	s.askForLogs(ctx, cs)
	c.obs.stale.Store(false) // the listing below is the latest
	tools, err := s.list(ctx, c)
	if err != nil {
		return fail("listing the tools", err)
	}
	if !timer.Stop() { // the timeout fired as the listing ended
		return fail("the start", context.DeadlineExceeded)
	}
	return c, s.toolDefinitions(tools, c.obs), nil
}

// list lists the server's tools, at most MaxTools.
func (s *server) list(ctx context.Context, c *conn) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	if caps := c.session.InitializeResult().Capabilities; caps == nil || caps.Tools == nil {
		return nil, nil
	}
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(tools) == MaxTools {
			s.set.opts.Log.Warn("MCP server lists too many tools; dsh takes the first ones", "server", s.name, "max", MaxTools)
			break
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// changed handles a tools/list_changed notification that arrives between
// calls: the tools are listed again in the background, by one goroutine at
// most whatever the number of notifications.
func (s *server) changed(c *conn) {
	if !c.observed {
		c.obs.stale.Store(true)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.live != c || !s.refreshQueued.CompareAndSwap(false, true) {
		return
	}
	s.set.wg.Add(1)
	go func() {
		defer s.set.wg.Done()
		s.refreshQueued.Store(false) // a notification from now on queues another
		s.refresh(c)
	}()
}

// refresh lists the tools of c's server again when it said they changed,
// and mounts the new listing in place of the old, bounded by the start
// timeout.
func (s *server) refresh(c *conn) {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if !c.obs.stale.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(c.life, cmp.Or(s.cfg.StartTimeout, DefaultStartTimeout))
	defer cancel()
	tools, err := s.list(ctx, c)
	if err != nil {
		s.set.opts.Log.Warn("MCP server's tools changed but listing them again failed; dsh keeps the former list", "server", s.name, "err", err)
		return
	}
	defs := s.toolDefinitions(tools, c.obs)
	s.mu.Lock()
	if s.closed || s.live != c {
		s.mu.Unlock()
		return
	}
	s.defs = defs
	s.mu.Unlock()
	s.set.publish(s, defs)
	s.set.opts.Log.Info("MCP server's tools changed", "server", s.name, "tools", len(defs))
}

// transport makes the server's transport; a stdio server's process starts
// here.
func (s *server) transport(cfg ServerConfig, c *conn) (mcp.Transport, error) {
	var host string
	if u, err := url.Parse(cfg.URL); err == nil {
		host = u.Host
	}
	client := &http.Client{Transport: headers{base: http.DefaultTransport, host: host, values: cfg.Headers}}
	switch cfg.Transport() {
	case TypeHTTP:
		return &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, MaxRetries: -1}, nil
	case TypeSSE:
		return &mcp.SSEClientTransport{Endpoint: cfg.URL, HTTPClient: client}, nil
	}
	dir := s.set.opts.Dir
	if cfg.Cwd != "" {
		dir = cfg.Cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.set.opts.Dir, dir)
		}
	}
	env := make([]string, 0, len(cfg.Env))
	for _, k := range sortedKeys(cfg.Env) {
		env = append(env, k+"="+cfg.Env[k])
	}
	policy := sandbox.For(cfg.Sandbox.Or(s.set.opts.Sandbox).Or(sandbox.Default), dir).WithNetwork(s.set.opts.Network)
	if cache := s.set.opts.CacheDir; cache != "" && policy.Mode == sandbox.WorkspaceWrite {
		if err := os.MkdirAll(cache, 0o700); err != nil {
			return nil, fmt.Errorf("the cache folder of MCP servers: %w", err)
		}
		policy.Writable = append(policy.Writable, cache)
		for _, k := range []string{"npm_config_cache", "XDG_CACHE_HOME"} {
			if _, set := cfg.Env[k]; !set {
				env = append(env, k+"="+filepath.Join(cache, k))
			}
		}
	}
	p, err := proc.Start(proc.Spec{Path: cfg.Command, Args: cfg.Args, Dir: dir, BaseEnv: s.set.opts.BaseEnv,
		PassEnv: cfg.PassEnv, Env: env, Sandbox: policy})
	if err != nil {
		return nil, err
	}
	c.proc = p
	return &mcp.IOTransport{Reader: io.NopCloser(p.Stdout()), Writer: p.Stdin()}, nil
}

// headers adds the configured headers to the requests to the server's
// host (not to another host a redirect points at).
type headers struct {
	base   http.RoundTripper
	host   string
	values map[string]string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.values) > 0 && r.URL.Host == h.host {
		r = r.Clone(r.Context())
		for k, v := range h.values {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// toolDefinitions turns a listing into dsh tools. A name that two tools
// end up sharing once sanitized gets a hash; a schema dsh cannot read
// becomes an open object, and the description says so.
func (s *server) toolDefinitions(tools []*mcp.Tool, obs *observer) []tool.Definition {
	defs := make([]tool.Definition, 0, len(tools))
	seen := map[string]bool{}
	for _, t := range tools {
		if obs.requiresTask(t.Name) {
			s.set.opts.Log.Warn("MCP tool left out: it runs only as a task (execution.taskSupport: required), which dsh does not support",
				"server", s.name, "tool", t.Name)
			continue
		}
		name := ToolName(s.toolPrefix, t.Name)
		if seen[name] {
			name = hashed(name, t.Name)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		desc := description(t)
		params, err := parameters(t.InputSchema)
		if err != nil {
			s.set.opts.Log.Warn("MCP tool schema unreadable", "server", s.name, "tool", t.Name, "err", err)
			params = &jsonschema.Schema{Type: "object"}
			desc += "\n(dsh could not read this tool's input schema; pass the arguments its description asks for.)"
		}
		mcpName := t.Name
		defs = append(defs, tool.Definition{Name: name, Description: desc, Parameters: params,
			ConcurrencySafe: t.Annotations != nil && t.Annotations.ReadOnlyHint,
			Execute: func(ctx context.Context, call tool.Call) (tool.Result, error) {
				return s.call(ctx, call, mcpName)
			}})
	}
	return defs
}

// connection returns the live connection, starting one when there is none
// and the server is not waiting out a backoff. One attempt at most is made
// for a call.
func (s *server) connection(ctx context.Context) (*conn, error) {
	tried := false
	for {
		s.mu.Lock()
		var wait <-chan struct{}
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, &Error{Code: CodeClosed, Server: s.name, Msg: "closed: dsh is shutting down"}
		case s.live != nil:
			c := s.live
			s.mu.Unlock()
			return c, nil
		case s.attempt != nil:
			wait = s.attempt
		case tried || time.Now().Before(s.retryAt):
			err := s.unavailableLocked()
			s.mu.Unlock()
			return nil, err
		default:
			wait = s.dialLocked()
		}
		s.mu.Unlock()
		tried = true
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// errCallTimeout is the cause of a call that outlived callTimeout.
var errCallTimeout = errors.New("call timeout")

// call runs a tool of the server.
func (s *server) call(ctx context.Context, call tool.Call, mcpName string) (tool.Result, error) {
	var res *mcp.CallToolResult
	err := s.request(ctx, "the call of "+mcpName, func(ctx context.Context, c *conn) (err error) {
		token := fmt.Sprintf("dsh-%d", s.set.tokens.Add(1))
		p := &pending{Progress{Server: s.name, Tool: call.Name, CallID: call.ID}}
		if a, ok := call.Caller.(interface{ ID() string }); ok {
			p.AgentID = a.ID()
		}
		defer s.set.track(token, p)()
		params := &mcp.CallToolParams{Name: mcpName, Arguments: json.RawMessage(call.Arguments)}
		params.SetProgressToken(token)
		askForCallLogs(params)
		res, err = c.session.CallTool(ctx, params)
		if c.obs.stale.Load() { // the call changed the tools: the next request lists the new ones
			s.refresh(c)
		}
		return err
	})
	if err != nil {
		return tool.Result{}, err
	}
	return toResult(res, s.set.opts.OutputLimit, s.name), nil
}

// request runs do over the server's connection (started when there is
// none), bounded by the server's callTimeout and ended with the
// connection, and maps its failure onto an *Error; what names the request
// ("the call of echo").
func (s *server) request(ctx context.Context, what string, do func(ctx context.Context, c *conn) error) error {
	c, err := s.connection(ctx)
	if err != nil {
		return err
	}
	if t := s.cfg.CallTimeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, t, errCallTimeout)
		defer cancel()
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	err = do(callCtx, c)
	var we *jsonrpc.Error
	switch {
	case err == nil:
		s.mu.Lock()
		s.failures = 0
		s.mu.Unlock()
		return nil
	case errors.Is(context.Cause(ctx), errCallTimeout):
		return &Error{Code: CodeTimeout, Server: s.name,
			Msg: fmt.Sprintf("%s outlived the server's callTimeout (%s)", what, s.cfg.CallTimeout)}
	case c.life.Err() != nil:
		return s.broken(c, err)
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case !errors.Is(err, mcp.ErrConnectionClosed) && errors.As(err, &we):
		return &Error{Code: CodeProtocol, Server: s.name, Msg: what + ": " + cut(we.Message, 4096)}
	}
	return s.broken(c, err)
}

// broken handles a call that failed because the connection did: the
// connection is closed (the watcher records why) and the call's error says
// what happened and that the server is started again on a later call.
func (s *server) broken(c *conn, err error) error {
	c.close(s.set.opts.StopGrace)
	select {
	case <-c.ended:
		err = c.cause
	case <-time.After(s.set.opts.StopGrace):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return &Error{Code: CodeClosed, Server: s.name, Msg: "closed: dsh is shutting down"}
	}
	return &Error{Code: CodeUnavailable, Server: s.name,
		Msg: fmt.Sprintf("the call failed: %v; dsh starts the server again on a later call", err)}
}
