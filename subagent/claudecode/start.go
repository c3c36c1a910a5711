package claudecode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/telemetry"
)

// Start spawns Claude Code in the configured (else the parent's) working
// directory, sends the task as its one user message, and returns the run
// once the CLI's system/init message has arrived. Cancelled or failed
// before that, it returns an error after the process has been reaped.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	fail := func(stage string, err error) error {
		return &StartError{Provider: p.cfg.Name, Stage: stage, Err: err}
	}
	if req.Parent == nil {
		return nil, &subagent.Error{Code: subagent.CodeInvalidRequest, Provider: p.cfg.Name, Msg: "start: the request has no parent agent"}
	}
	if err := ctx.Err(); err != nil {
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	texts := promptTexts(req.Prompt)
	if len(texts) == 0 {
		return nil, &subagent.Error{Code: subagent.CodeInvalidRequest, Provider: p.cfg.Name, Msg: "start: the prompt has no text"}
	}
	cwd := cmp.Or(p.cfg.Cwd, req.Parent.Cwd())
	if err := checkDir(cwd); err != nil {
		return nil, fail("cwd", err)
	}
	configDir, tmpDir := p.cfg.ConfigDir, ""
	if configDir == "" {
		dir, err := os.MkdirTemp("", "dsh-claude-")
		if err != nil {
			return nil, fail("config dir", err)
		}
		configDir, tmpDir = dir, dir
	}
	child, err := proc.Start(proc.Spec{Path: p.cfg.Command, Args: p.cfg.args(), Dir: cwd,
		PassEnv: p.cfg.PassEnv, Env: append(p.cfg.env(configDir), telemetry.Env(ctx)...)}) // TRACEPARENT, for when Claude Code reads it
	if err != nil {
		removeTemp(tmpDir)
		return nil, fail("spawn", err)
	}
	r := newRun(p.cfg, child, tmpDir, req)
	go r.read(p.maxLine)
	r.w.send(userPrompt(texts))

	if err := r.awaitReady(ctx); err != nil {
		diag := r.abandon()
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, &StartError{Provider: p.cfg.Name, Stage: "ready", Err: err, Diagnostic: diag}
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
		return &ReadyTimeoutError{After: r.cfg.ReadyTimeout}
	case <-r.streamEnd:
		select {
		case <-r.ready: // init was the last line before the end
			return ctx.Err()
		default:
		}
		if err := r.readErr; err != nil {
			return err
		}
		r.awaitExit(time.Second)
		return &ExitError{During: "startup", Diagnostic: r.proc.Diagnostic()}
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

// promptTexts is the text of every non-empty text block of prompt.
func promptTexts(prompt []content.Block) []string {
	var texts []string
	for _, b := range prompt {
		if b.Type == content.TypeText && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return texts
}

// env is the explicit environment of a run, in a stable order.
func (c Config) env(configDir string) []string {
	env := make([]string, 0, len(c.Env)+1)
	for k, v := range c.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return append(env, "CLAUDE_CONFIG_DIR="+configDir)
}

// checkDir requires dir to be an absolute path to an existing directory.
func checkDir(dir string) error {
	if dir == "" {
		return errors.New("no working directory: neither cwd nor the parent's")
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("working directory %q is not absolute", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("working directory %q is not a directory", dir)
	}
	return nil
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
