package codex

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/dsh-go/dsh/subagent/childproc"
)

// codexProc is a running `codex app-server` past initialize: its
// connection, its CODEX_HOME, and the turns of its open threads, to which
// it routes what Codex sends. One run has it alone, or, pooled, several at
// once and many in turn.
type codexProc struct {
	cfg        Config
	proc       *childproc.Process
	conn       *conn
	removeHome func() // removes a temporary CODEX_HOME
	done       chan struct{}

	mu      sync.Mutex
	threads map[string]*turnState
}

// startProcess spawns Codex in dir with a CODEX_HOME (the configured one,
// else a temporary one removed when the process stops) and the extra
// variables, and performs initialize and initialized within ctx and
// ReadyTimeout. Nothing of it is left when it fails. async answers Codex's
// requests on goroutines of their own, so that one child's permission ask
// never holds up the others of a shared process.
func (p *Provider) startProcess(ctx context.Context, dir string, extra []string, async bool) (*codexProc, error) {
	home, tempHome := p.cfg.CodexHome, false
	if home == "" {
		d, err := os.MkdirTemp("", "dsh-codex-home-")
		if err != nil {
			return nil, p.fail("codex home", err)
		}
		home, tempHome = d, true
	} else if err := childproc.CheckDir(home); err != nil {
		return nil, p.fail("codex home", err)
	}
	removeHome := func() {
		if tempHome {
			os.RemoveAll(home)
		}
	}
	child, err := p.cfg.Spawn(dir, p.cfg.Args, append([]string{"CODEX_HOME=" + home}, extra...)...)
	if err != nil {
		removeHome()
		return nil, p.fail("spawn", err)
	}
	c := &codexProc{cfg: p.cfg, proc: child, removeHome: removeHome, threads: map[string]*turnState{}, done: make(chan struct{})}
	c.conn = newConn(child.Stdin(), child.Stdout(), p.maxLine, router{c})
	c.conn.async = async
	go c.conn.serve()
	go func() {
		select {
		case <-child.Done():
		case <-c.conn.done: // a line it cannot read: the process serves no one
		}
		close(c.done)
	}()
	if err := c.greet(ctx); err != nil {
		c.stop(0)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "handshake", Err: err, Diagnostic: child.Diagnostic()}
	}
	return c, nil
}

// greet performs initialize and initialized within ReadyTimeout.
func (c *codexProc) greet(ctx context.Context) error {
	hctx, cancel := context.WithTimeoutCause(ctx, c.cfg.ReadyTimeout, &childproc.ReadyTimeoutError{After: c.cfg.ReadyTimeout, Waiting: "answer to the handshake"})
	defer cancel()
	initParams := map[string]any{
		"clientInfo":   map[string]any{"name": "dsh", "title": "dsh", "version": "0"},
		"capabilities": map[string]any{"experimentalApi": false},
	}
	errc := make(chan error, 1)
	go func() {
		err := c.conn.call(hctx, "initialize", initParams, nil)
		if err == nil {
			err = c.conn.notify("initialized", nil)
		}
		errc <- err
	}()
	var err error
	select {
	case err = <-errc:
	case <-hctx.Done(): // the call may be stuck writing; stop ends it
		return context.Cause(hctx)
	}
	return c.exitError(hctx, err, "the handshake")
}

// exitError explains a lost connection by Codex's exit, when it exited.
func (c *codexProc) exitError(ctx context.Context, err error, during string) error {
	if err != nil && ctx.Err() == nil && lostConnection(err) && c.proc.Exited(childproc.ExitGrace) {
		return &childproc.ExitError{Program: "codex", During: during, Diagnostic: c.proc.Diagnostic()}
	}
	return err
}

// Done implements warm.Process: closed once Codex has exited or its
// connection has ended.
func (c *codexProc) Done() <-chan struct{} { return c.done }

// Stop implements warm.Process: the stop ladder (stdin EOF, on which
// Codex exits, then SIGTERM and SIGKILL to its process group); it returns
// once the connection has ended and a temporary CODEX_HOME is removed.
func (c *codexProc) Stop() error { return c.stop(c.cfg.EOFGrace) }

func (c *codexProc) stop(eofGrace time.Duration) error {
	err := c.proc.Stop(eofGrace, c.cfg.TermGrace)
	<-c.conn.done
	c.removeHome()
	return err
}

// healthy reports whether Codex runs and its connection is open.
func (c *codexProc) healthy() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// attach routes what Codex sends about thread to s.
func (c *codexProc) attach(thread string, s *turnState) {
	c.mu.Lock()
	c.threads[thread] = s
	c.mu.Unlock()
}

// detach stops routing thread.
func (c *codexProc) detach(thread string) {
	c.mu.Lock()
	delete(c.threads, thread)
	c.mu.Unlock()
}

// route returns the turn of thread; a message naming no thread goes to the
// process's only turn, if it has one.
func (c *codexProc) route(params json.RawMessage) *turnState {
	var p struct {
		ThreadID string `json:"threadId"`
	}
	json.Unmarshal(params, &p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.ThreadID != "" {
		return c.threads[p.ThreadID]
	}
	if len(c.threads) == 1 {
		for _, s := range c.threads {
			return s
		}
	}
	return nil
}

// router is the handler of a Codex process's connection: it hands what
// Codex sends about a thread to that thread's turn, and drops what names
// no open thread (a request for none is refused).
type router struct{ c *codexProc }

// notify implements handler.
func (rt router) notify(method string, params json.RawMessage) {
	if s := rt.c.route(params); s != nil {
		s.notify(method, params)
	}
}

// request implements handler.
func (rt router) request(method string, params json.RawMessage) (any, *wireError) {
	if s := rt.c.route(params); s != nil {
		return s.request(method, params)
	}
	return nil, &wireError{Code: codeMethodNotFound, Message: "dsh has no open thread for " + method}
}
