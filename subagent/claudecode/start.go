package claudecode

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/telemetry"
)

// Start spawns Claude Code in the configured (else the parent's) working
// directory, sends the task as its one user message, and returns the run
// once the CLI's system/init message has arrived. Cancelled or failed
// before that, it returns an error after the process has been reaped.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	return p.start(ctx, req, "")
}

// ResumeRun implements subagent.RemoteContinuer: a new Claude Code process
// continues the session remote (--resume) with req.Prompt. Only sessions
// kept in a configured ConfigDir can continue.
func (p *Provider) ResumeRun(ctx context.Context, req subagent.StartRequest, remote string) (subagent.Run, error) {
	if p.cfg.ConfigDir == "" {
		return nil, subagent.NotResumable(p.cfg.Name, "without claudeCode.configDir Claude Code keeps no session to resume (set it to let children continue)")
	}
	return p.start(ctx, req, remote)
}

// CanResume implements subagent.ResumeChecker: Claude Code continues only
// the sessions it keeps in a configured ConfigDir.
func (p *Provider) CanResume() bool { return p.cfg.ConfigDir != "" }

// start starts a run in a new session, or continuing session remote.
func (p *Provider) start(ctx context.Context, req subagent.StartRequest, remote string) (subagent.Run, error) {
	cwd, err := p.cfg.Begin(ctx, providerKind, req)
	if err != nil {
		return nil, err
	}
	configDir, tmpDir := p.cfg.ConfigDir, ""
	if configDir == "" {
		dir, err := os.MkdirTemp("", "dsh-claude-")
		if err != nil {
			return nil, p.fail("config dir", err)
		}
		configDir, tmpDir = dir, dir
	}
	child, err := p.cfg.Spawn(cwd, p.cfg.args(remote), append([]string{"CLAUDE_CONFIG_DIR=" + configDir}, telemetry.Env(ctx)...)...) // TRACEPARENT, for when Claude Code reads it
	if err != nil {
		removeTemp(tmpDir)
		return nil, p.fail("spawn", err)
	}
	r := newRun(p.cfg, child, tmpDir, req)
	go r.read(p.maxLine)
	r.w.send(userPrompt(childproc.Texts(req.Prompt)))

	if err := r.awaitReady(ctx); err != nil {
		diag := r.abandon()
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "ready", Err: err, Diagnostic: diag}
	}
	r.begin(ctx)
	return r, nil
}

// awaitReady waits for system/init, a dead child, ctx, or ReadyTimeout.
func (r *run) awaitReady(ctx context.Context) error {
	timer := time.NewTimer(r.cfg.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-r.ready:
		// Cancelled in the same instant: the caller gets no run.
		return ctx.Err()
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
		return &childproc.ReadyTimeoutError{After: r.cfg.ReadyTimeout, Waiting: "system/init message"}
	case <-r.streamEnd:
		select {
		case <-r.ready: // init was the last line before the end
			return ctx.Err()
		default:
		}
		if err := r.readErr; err != nil {
			return err
		}
		r.proc.Exited(childproc.ExitGrace)
		return &childproc.ExitError{Program: "claude", During: "startup", Diagnostic: r.proc.Diagnostic()}
	}
}

// abandon tears down a run that never became ready and returns the
// child's diagnostic.
func (r *run) abandon() string {
	err := r.proc.Stop(0, r.cfg.TermGrace)
	<-r.streamEnd
	r.w.stop()
	removeTemp(r.tmpDir)
	diag := r.proc.Diagnostic()
	if err != nil {
		diag += "; " + err.Error()
	}
	return subagent.Diagnostic(diag)
}

// removeTemp removes a per-run config directory ("" is none).
func removeTemp(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("claude-code: remove the run's config dir: %w", err)
	}
	return nil
}

func newRunID() string { return "claude-" + uuid.NewString() }

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), sep)
}

// fail is a start that failed at stage.
func (p *Provider) fail(stage string, err error) error {
	return &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: stage, Err: err}
}
