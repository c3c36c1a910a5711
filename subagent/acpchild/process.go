package acpchild

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/subagent/childproc"
)

// agentProc is a running agent process past initialize: its connection,
// what the agent advertised, and the runs of its open sessions, to which
// it routes what the agent sends. One run has it alone, or, pooled, several
// at once and many in turn.
type agentProc struct {
	cfg  Config
	proc *childproc.Process
	conn *acpsdk.ClientSideConnection
	init acpsdk.InitializeResponse
	done chan struct{} // closed once the process has exited or its connection ended

	mu    sync.Mutex
	runs  map[acpsdk.SessionId]*run
	ended bool // the process exited
}

// startProcess spawns the agent in dir with extra variables and performs
// initialize within ctx. Nothing of it is left running when it fails.
func (p *Provider) startProcess(ctx context.Context, dir string, extra []string) (*agentProc, error) {
	child, err := p.cfg.Spawn(dir, p.cfg.Args, extra...)
	if err != nil {
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "spawn", Err: err}
	}
	a := &agentProc{cfg: p.cfg, proc: child, runs: map[acpsdk.SessionId]*run{}, done: make(chan struct{})}
	// No SetLogger: in acp-go-sdk v0.13.0 it races with the connection's
	// receive goroutine, which starts in the constructor; the connection
	// logs through slog.Default.
	a.conn = acpsdk.NewClientSideConnection(router{a}, child.Stdin(), child.Stdout())
	go func() {
		select {
		case <-child.Done():
		case <-a.conn.Done(): // a line it cannot read: the process serves no one
		}
		close(a.done)
	}()
	go a.watch()
	hctx, cancel := context.WithTimeoutCause(ctx, p.cfg.ReadyTimeout,
		&childproc.ReadyTimeoutError{After: p.cfg.ReadyTimeout, Waiting: "answer to initialize"})
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		init, err := a.conn.Initialize(hctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber,
			ClientCapabilities: acpsdk.ClientCapabilities{}, ClientInfo: &acpsdk.Implementation{Name: "dsh", Version: "0"}})
		a.init = init
		errc <- err
	}()
	select {
	case err = <-errc:
		if err != nil {
			err = fmt.Errorf("initialize: %w", err)
		}
	case <-hctx.Done():
		err = context.Cause(hctx)
	case <-child.Done():
		err = &childproc.ExitError{Program: "the agent", During: "the handshake", Diagnostic: child.Diagnostic()}
	}
	if err != nil {
		child.Stop(0, p.cfg.TermGrace)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "handshake", Err: err,
			Diagnostic: child.Diagnostic()}
	}
	return a, nil
}

// Done implements warm.Process: closed once the process has exited or its
// connection has ended.
func (a *agentProc) Done() <-chan struct{} { return a.done }

// Stop implements warm.Process: the stop ladder.
func (a *agentProc) Stop() error { return a.proc.Stop(a.cfg.EOFGrace, a.cfg.TermGrace) }

// healthy reports whether the process runs and its connection is open.
func (a *agentProc) healthy() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// closes reports whether the agent advertised session/close.
func (a *agentProc) closes() bool { return a.init.AgentCapabilities.SessionCapabilities.Close != nil }

// watch gives back the places the runs hold for their children once the
// process has exited.
func (a *agentProc) watch() {
	<-a.proc.Done()
	a.mu.Lock()
	a.ended = true
	runs := a.runs
	a.runs = map[acpsdk.SessionId]*run{}
	a.mu.Unlock()
	for _, r := range runs {
		r.slots.close()
	}
}

// attach routes the agent's traffic for r's session to r.
func (a *agentProc) attach(r *run) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		r.slots.close()
		return nil
	}
	if o, ok := a.runs[r.session]; ok && o != r {
		return fmt.Errorf("session %s is open for another child of this process", r.session)
	}
	a.runs[r.session] = r
	return nil
}

// detach stops routing r's session.
func (a *agentProc) detach(r *run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs[r.session] == r {
		delete(a.runs, r.session)
	}
}

// route returns the run of session id, or nil.
func (a *agentProc) route(id acpsdk.SessionId) *run {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[id]
}

// router is the client side of an agent process's connection: it hands
// what the agent sends about a session to that session's run, and drops
// what names no open session. It advertises no file system or terminal
// capability, so those requests are refused.
type router struct{ a *agentProc }

var _ acpsdk.Client = router{}

// SessionUpdate implements acpsdk.Client.
func (rt router) SessionUpdate(ctx context.Context, n acpsdk.SessionNotification) error {
	if r := rt.a.route(n.SessionId); r != nil {
		r.client.sessionUpdate(n)
	}
	return nil
}

// RequestPermission implements acpsdk.Client: the session's run decides; a
// request for no open session is cancelled.
func (rt router) RequestPermission(ctx context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	if r := rt.a.route(p.SessionId); r != nil {
		return r.client.requestPermission(p), nil
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}, nil
}

// HandleExtensionMethod implements acpsdk.ExtensionMethodHandler: a dsh
// child's requests for places under the tree's live-children cap and their
// release, for the session they name. Other extension methods are not
// served.
func (rt router) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case acpmeta.MethodAdmit:
		var p acpmeta.Admit
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, acpsdk.NewInvalidParams(err.Error())
		}
		r := rt.a.route(acpsdk.SessionId(p.SessionID))
		if r == nil {
			return acpmeta.Admitted{Refused: "the child has ended"}, nil
		}
		return r.slots.admit()
	case acpmeta.MethodRelease:
		var p acpmeta.Release
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, acpsdk.NewInvalidParams(err.Error())
		}
		if r := rt.a.route(acpsdk.SessionId(p.SessionID)); r != nil {
			r.slots.release(p.Slot)
		}
		return nil, nil
	}
	return nil, acpsdk.NewMethodNotFound(method)
}

// ReadTextFile implements acpsdk.Client: not advertised, refused.
func (router) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, acpsdk.NewMethodNotFound("fs/read_text_file")
}

// WriteTextFile implements acpsdk.Client: not advertised, refused.
func (router) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, acpsdk.NewMethodNotFound("fs/write_text_file")
}

// CreateTerminal implements acpsdk.Client: not advertised, refused.
func (router) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, acpsdk.NewMethodNotFound("terminal/create")
}

// KillTerminal implements acpsdk.Client: not advertised, refused.
func (router) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, acpsdk.NewMethodNotFound("terminal/kill")
}

// TerminalOutput implements acpsdk.Client: not advertised, refused.
func (router) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, acpsdk.NewMethodNotFound("terminal/output")
}

// ReleaseTerminal implements acpsdk.Client: not advertised, refused.
func (router) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, acpsdk.NewMethodNotFound("terminal/release")
}

// WaitForTerminalExit implements acpsdk.Client: not advertised, refused.
func (router) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, acpsdk.NewMethodNotFound("terminal/wait_for_exit")
}
