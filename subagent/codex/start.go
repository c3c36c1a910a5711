package codex

import (
	"cmp"
	"context"
	"errors"
	"os"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
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
	fail := func(stage string, err error) error { return &StartError{Provider: p.cfg.Name, Stage: stage, Err: err} }
	if req.Parent == nil {
		return nil, fail("request", errors.New("the request has no parent agent"))
	}
	if ctx.Err() != nil {
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	var input []inputItem
	for _, b := range req.Prompt {
		if b.Type == content.TypeText && b.Text != "" {
			input = append(input, inputItem{Type: "text", Text: b.Text, TextElements: []any{}})
		}
	}
	if len(input) == 0 {
		return nil, fail("request", errors.New("the prompt has no text"))
	}
	cwd := cmp.Or(p.cfg.Cwd, req.Parent.Cwd())
	if err := checkDir(cwd); err != nil {
		return nil, fail("cwd", err)
	}
	home, tempHome := p.cfg.CodexHome, false
	if home == "" {
		dir, err := os.MkdirTemp("", "dsh-codex-home-")
		if err != nil {
			return nil, fail("codex home", err)
		}
		home, tempHome = dir, true
	} else if err := checkDir(home); err != nil {
		return nil, fail("codex home", err)
	}
	removeHome := func() {
		if tempHome {
			os.RemoveAll(home)
		}
	}

	env := make([]string, 0, len(p.cfg.Env)+1)
	for k, v := range p.cfg.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	env = append(env, "CODEX_HOME="+home)
	env = append(env, telemetry.Env(ctx)...) // Codex continues a TRACEPARENT it is given
	child, err := proc.Start(proc.Spec{Path: p.cfg.Command, Args: p.cfg.Args, Dir: cwd, PassEnv: p.cfg.PassEnv, Env: env})
	if err != nil {
		removeHome()
		return nil, fail("spawn", err)
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

	if err := r.handshake(ctx, cwd); err != nil {
		r.teardown(0)
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, &StartError{Provider: p.cfg.Name, Stage: "handshake", Err: err, Diagnostic: child.Diagnostic()}
	}
	if ctx.Err() != nil { // aborted between the handshake and publication
		r.teardown(0)
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	r.start(ctx, input)
	return r, nil
}

// handshake performs initialize, initialized and thread/start within
// ReadyTimeout.
func (r *run) handshake(ctx context.Context, cwd string) error {
	hctx, cancel := context.WithTimeoutCause(ctx, r.cfg.ReadyTimeout, &ReadyTimeoutError{After: r.cfg.ReadyTimeout})
	defer cancel()
	errc := make(chan error, 1)
	r.writers.Go(func() { errc <- r.greet(hctx, cwd) })
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
	if err != nil && hctx.Err() == nil && lostConnection(err) && r.exited() {
		return &ExitError{During: "the handshake", Diagnostic: r.proc.Diagnostic()}
	}
	return err
}

// lostConnection reports whether err means the stream to or from Codex
// broke, rather than Codex answering or writing something wrong.
func lostConnection(err error) bool {
	var rpc *RPCError
	var proto *ProtocolError
	var long *LineTooLongError
	return !errors.As(err, &rpc) && !errors.As(err, &proto) && !errors.As(err, &long)
}

// greet is the handshake proper.
func (r *run) greet(ctx context.Context, cwd string) error {
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
	if err := r.conn.call(ctx, "thread/start", r.threadParams(cwd), &started); err != nil {
		return err
	}
	if started.Thread.ID == "" {
		return &ProtocolError{Msg: "thread/start answered without a thread id"}
	}
	r.turn.setThread(started.Thread.ID)
	r.threadID = started.Thread.ID
	r.model = cmp.Or(started.Model, r.cfg.Model, "unknown")
	return nil
}

// threadParams are thread/start's parameters for the configured mode.
func (r *run) threadParams(cwd string) map[string]any {
	p := map[string]any{"cwd": cwd, "ephemeral": true}
	switch r.cfg.PermissionMode {
	case PermissionApproveForMe:
		p["approvalPolicy"] = "on-request"
		p["approvalsReviewer"] = "auto_review"
		p["sandbox"] = "workspace-write"
	case PermissionBypass:
		p["approvalPolicy"] = "never"
		p["sandbox"] = "danger-full-access"
	default:
		p["approvalPolicy"] = "never"
	}
	if r.cfg.Model != "" {
		p["model"] = r.cfg.Model
	}
	if r.cfg.Config != nil {
		p["config"] = r.cfg.Config
	}
	return p
}

// exited reports whether Codex has exited, giving a lost connection up to
// a second to be explained by the exit (so the diagnostic names it).
func (r *run) exited() bool {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-r.proc.Done():
		return true
	case <-t.C:
		return false
	}
}
