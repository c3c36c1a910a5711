package codex

import (
	"cmp"
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/internal/warm"
	"github.com/dsh-go/dsh/telemetry"
)

// inputItem is a turn/start UserInput of type text.
type inputItem struct {
	Type         string `json:"type"`
	Text         string `json:"text"`
	TextElements []any  `json:"text_elements"`
}

// Start spawns Codex (or takes a warm process from the pool), performs
// initialize, initialized and thread/start within ReadyTimeout, and only
// then returns the run; the prompt's text blocks are sent as one turn once
// it is ready.
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
	lease, err := p.process(ctx, cwd, telemetry.Env(ctx)) // Codex continues a TRACEPARENT it is given
	if err != nil {
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, err
	}
	c := lease.Process
	cancelled := make(chan struct{})
	label := subagent.ChildLabel(p.cfg.Name, req.Label)
	state := newTurnState(p.cfg.PermissionMode, req.Progress, func(ask permission.Request) bool {
		return subagent.AuthorizeChild(req.Parent, label, cancelled, ask) == nil
	})
	r := &run{cfg: p.cfg, id: "codex-" + uuid.NewString(), codex: c, lease: lease, proc: c.proc, conn: c.conn, turn: state,
		cancelled: cancelled}
	if err := r.handshake(ctx, cwd, remote); err != nil {
		// Codex's refusal leaves a shared process in service; no answer
		// in time or a broken connection stops it.
		end := kill
		if rpc := (*RPCError)(nil); errors.As(err, &rpc) && c.healthy() {
			end = keep
		}
		r.release(end, 0)
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "handshake", Err: err, Diagnostic: c.proc.Diagnostic()}
	}
	if ctx.Err() != nil { // aborted between the handshake and publication
		r.release(keep, 0)
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	r.start(ctx, input)
	return r, nil
}

// process returns the Codex process a child runs on: a warm one of the
// same launch identity (the working directory and the variables given at
// spawn, a trace context among them) from the pool, else a new one.
func (p *Provider) process(ctx context.Context, cwd string, extra []string) (*warm.Lease[*codexProc], error) {
	if p.pool == nil {
		c, err := p.startProcess(ctx, cwd, extra, false)
		if err != nil {
			return nil, err
		}
		return &warm.Lease[*codexProc]{Process: c}, nil
	}
	key := strings.Join(append([]string{cwd}, extra...), "\x00")
	lease, err := p.pool.Acquire(ctx, key, func(ctx context.Context) (*codexProc, error) {
		return p.startProcess(ctx, cwd, extra, true)
	})
	if errors.Is(err, warm.ErrClosed) {
		return nil, p.fail("spawn", err)
	}
	return lease, err
}

// handshake starts the run's thread (thread/start, or thread/resume of
// remote) within ReadyTimeout.
func (r *run) handshake(ctx context.Context, cwd, remote string) error {
	hctx, cancel := context.WithTimeoutCause(ctx, r.cfg.ReadyTimeout, &childproc.ReadyTimeoutError{After: r.cfg.ReadyTimeout, Waiting: "answer to the handshake"})
	defer cancel()
	errc := make(chan error, 1)
	r.writers.Go(func() { errc <- r.open(hctx, cwd, remote) })
	select {
	case err := <-errc:
		return r.codex.exitError(hctx, err, "the handshake")
	case <-hctx.Done(): // open may be stuck writing; stopping the process ends it
		return context.Cause(hctx)
	}
}

// lostConnection reports whether err means the stream to or from Codex
// broke, rather than Codex answering or writing something wrong.
func lostConnection(err error) bool {
	var rpc *RPCError
	var proto *ProtocolError
	var long *childproc.LineTooLongError
	return !errors.As(err, &rpc) && !errors.As(err, &proto) && !errors.As(err, &long)
}

// open starts or resumes the run's thread and routes its messages to the
// run's turn.
func (r *run) open(ctx context.Context, cwd, remote string) error {
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
	r.codex.attach(started.Thread.ID, r.turn)
	r.mu.Lock()
	r.threadID = started.Thread.ID
	r.mu.Unlock()
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
