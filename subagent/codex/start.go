package codex

import (
	"cmp"
	"context"
	"errors"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/telemetry"
)

// inputItem is a turn/start UserInput of type text.
type inputItem struct {
	Type         string `json:"type"`
	Text         string `json:"text"`
	TextElements []any  `json:"text_elements"`
}

// Start spawns Codex, performs initialize, initialized and thread/start
// within ReadyTimeout, and only then returns the run; the prompt's text
// blocks are sent as one turn once it is ready.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	return p.start(ctx, req, "")
}

// ResumeRun implements subagent.RemoteContinuer: a new Codex process
// resumes the thread remote (thread/resume) and takes req.Prompt as its
// next turn. Only threads kept in a configured CodexHome can continue.
func (p *Provider) ResumeRun(ctx context.Context, req subagent.StartRequest, remote string) (subagent.Run, error) {
	if p.cfg.CodexHome == "" {
		return nil, subagent.NotResumable(p.cfg.Name, "without codex.codexHome Codex keeps no thread to resume (set it to let children continue)")
	}
	return p.start(ctx, req, remote)
}

// CanResume implements subagent.ResumeChecker: Codex continues only the
// threads it keeps in a configured CodexHome.
func (p *Provider) CanResume() bool { return p.cfg.CodexHome != "" }

// start starts a run on a new thread, or on the resumed thread remote.
func (p *Provider) start(ctx context.Context, req subagent.StartRequest, remote string) (subagent.Run, error) {
	cwd, err := p.cfg.Begin(ctx, providerKind, req)
	if err != nil {
		return nil, err
	}
	var input []inputItem
	for _, text := range childproc.Texts(req.Prompt) {
		input = append(input, inputItem{Type: "text", Text: text, TextElements: []any{}})
	}
	home, tempHome := p.cfg.CodexHome, false
	if home == "" {
		dir, err := os.MkdirTemp("", "dsh-codex-home-")
		if err != nil {
			return nil, p.fail("codex home", err)
		}
		home, tempHome = dir, true
	} else if err := childproc.CheckDir(home); err != nil {
		return nil, p.fail("codex home", err)
	}
	removeHome := func() {
		if tempHome {
			os.RemoveAll(home)
		}
	}
	child, err := p.cfg.Spawn(cwd, p.cfg.Args, append([]string{"CODEX_HOME=" + home}, telemetry.Env(ctx)...)...) // Codex continues a TRACEPARENT it is given
	if err != nil {
		removeHome()
		return nil, p.fail("spawn", err)
	}
	cancelled := make(chan struct{})
	label := subagent.ChildLabel(p.cfg.Name, req.Label)
	state := newTurnState(p.cfg.PermissionMode, req.Progress, func(ask permission.Request) bool {
		return subagent.AuthorizeChild(req.Parent, label, cancelled, ask) == nil
	})
	r := &run{cfg: p.cfg, id: "codex-" + uuid.NewString(), proc: child, turn: state,
		conn: newConn(child.Stdin(), child.Stdout(), p.maxLine, state), removeHome: removeHome,
		cancelled: cancelled}
	go r.conn.serve()

	if err := r.handshake(ctx, cwd, remote); err != nil {
		r.teardown(0)
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "handshake", Err: err, Diagnostic: child.Diagnostic()}
	}
	if ctx.Err() != nil { // aborted between the handshake and publication
		r.teardown(0)
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	r.start(ctx, input)
	return r, nil
}

// handshake performs initialize, initialized and thread/start (or
// thread/resume of remote) within ReadyTimeout.
func (r *run) handshake(ctx context.Context, cwd, remote string) error {
	hctx, cancel := context.WithTimeoutCause(ctx, r.cfg.ReadyTimeout, &childproc.ReadyTimeoutError{After: r.cfg.ReadyTimeout, Waiting: "answer to the handshake"})
	defer cancel()
	errc := make(chan error, 1)
	r.writers.Go(func() { errc <- r.greet(hctx, cwd, remote) })
	var err error
	select {
	case err = <-errc:
	case <-hctx.Done(): // greet may be stuck writing; teardown ends it
		return context.Cause(hctx)
	case <-r.proc.Done():
		// Codex exited: its stdout ends and so does greet.
		select {
		case err = <-errc:
		case <-hctx.Done():
			return context.Cause(hctx)
		}
	}
	if err != nil && hctx.Err() == nil && lostConnection(err) && r.proc.Exited(time.Second) {
		return &childproc.ExitError{Program: "codex", During: "the handshake", Diagnostic: r.proc.Diagnostic()}
	}
	return err
}

// lostConnection reports whether err means the stream to or from Codex
// broke, rather than Codex answering or writing something wrong.
func lostConnection(err error) bool {
	var rpc *RPCError
	var proto *ProtocolError
	var long *childproc.LineTooLongError
	return !errors.As(err, &rpc) && !errors.As(err, &proto) && !errors.As(err, &long)
}

// greet is the handshake proper.
func (r *run) greet(ctx context.Context, cwd, remote string) error {
	initParams := map[string]any{
		"clientInfo":   map[string]any{"name": "dsh", "title": "dsh", "version": "0"},
		"capabilities": map[string]any{"experimentalApi": false},
	}
	if err := r.conn.call(ctx, "initialize", initParams, nil); err != nil {
		return err
	}
	if err := r.conn.notify("initialized", nil); err != nil {
		return err
	}
	var started struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		Model string `json:"model"`
	}
	method, params := "thread/start", r.threadParams(cwd)
	if remote != "" {
		delete(params, "ephemeral")
		method, params["threadId"] = "thread/resume", remote
	}
	if err := r.conn.call(ctx, method, params, &started); err != nil {
		return err
	}
	if started.Thread.ID == "" {
		return &ProtocolError{Msg: method + " answered without a thread id"}
	}
	r.turn.setThread(started.Thread.ID)
	r.threadID = started.Thread.ID
	r.model = cmp.Or(started.Model, r.cfg.Model, "unknown")
	return nil
}

// threadParams are thread/start's parameters for the configured mode. A
// thread is kept (not ephemeral) only in a configured CodexHome.
func (r *run) threadParams(cwd string) map[string]any {
	p := map[string]any{"cwd": cwd, "ephemeral": r.cfg.CodexHome == ""}
	switch r.cfg.PermissionMode {
	case PermissionApproveForMe:
		p["approvalPolicy"] = "on-request"
		p["approvalsReviewer"] = "auto_review"
		p["sandbox"] = "workspace-write"
	case PermissionBypass:
		p["approvalPolicy"] = "never"
		p["sandbox"] = "danger-full-access"
	case PermissionNever:
		p["approvalPolicy"] = "never"
	default: // PermissionPolicy
		p["approvalPolicy"] = "untrusted"
		p["sandbox"] = "workspace-write"
	}
	if r.cfg.Model != "" {
		p["model"] = r.cfg.Model
	}
	if r.cfg.Config != nil {
		p["config"] = r.cfg.Config
	}
	return p
}

// fail is a start that failed at stage.
func (p *Provider) fail(stage string, err error) error {
	return &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: stage, Err: err}
}
