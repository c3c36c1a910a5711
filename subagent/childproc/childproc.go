// Package childproc is the kit of the subagent providers that run their
// child as a process (an ACP agent, Codex, Claude Code, or a provider of
// one's own): the configuration block they share, the start steps (the
// working directory, a process of its own group with a scrubbed
// environment, readiness within a timeout), a bounded line reader, one
// error vocabulary with stable codes, and the stop ladder. A provider
// built on it keeps only its protocol.
package childproc

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

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/subagent"
)

// Options is the configuration block every child-process provider shares,
// embedded inline in its own (so its YAML keys sit beside the provider's).
type Options struct {
	Name    string            `yaml:"name"`    // registry name (default: the kind's)
	Command string            `yaml:"command"` // the program: a name looked up in PATH, or a path
	Args    []string          `yaml:"args"`
	Cwd     string            `yaml:"cwd"`     // working directory override (default: the parent's)
	Env     map[string]string `yaml:"env"`     // explicit variables, layered on the scrubbed environment
	PassEnv []string          `yaml:"passEnv"` // parent variables kept despite scrubbing (e.g. a model key)
	// ChildTimeouts: ReadyTimeout bounds the start; CancelGrace how long a
	// cancelled child may take to answer; EOFGrace and TermGrace the stop
	// ladder.
	subagent.ChildTimeouts `yaml:",inline"`
}

// Check fills in the defaults (the name and command of kind, the timeouts)
// and validates the shared fields, returning a *subagent.ConfigError that
// names the offending key. reserved maps variables the provider sets itself
// to the key that sets them (e.g. CODEX_HOME → codexHome).
func (o *Options) Check(kind, defaultName, defaultCommand string, reserved map[string]string) error {
	o.Name = cmp.Or(o.Name, defaultName)
	o.Command = cmp.Or(o.Command, defaultCommand)
	o.ChildTimeouts = o.ChildTimeouts.WithDefaults()
	bad := func(field, format string, args ...any) error {
		return &subagent.ConfigError{Kind: kind, Provider: o.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if o.Command == "" {
		return bad("command", "is required")
	}
	if key, d := o.Negative(); key != "" {
		return bad(key, "must be positive, got %s", d)
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range o.Env {
			if !yield(k) {
				return
			}
		}
	}) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("env", "invalid variable name %q", k)
		}
		if key, ok := reserved[k]; ok {
			return bad("env", "set %s instead of %s", key, k)
		}
	}
	if o.Cwd != "" {
		abs, err := filepath.Abs(o.Cwd)
		if err == nil {
			err = CheckDir(abs)
		}
		if err != nil {
			return bad("cwd", "%v", err)
		}
		o.Cwd = abs
	}
	return nil
}

// WorkDir returns a run's working directory: the request's, else the
// configured one, else the parent's; it must exist.
func (o Options) WorkDir(req subagent.StartRequest) (string, error) {
	dir := cmp.Or(req.Cwd, o.Cwd)
	if dir == "" && req.Parent != nil {
		dir = req.Parent.Cwd()
	}
	return dir, CheckDir(dir)
}

// CheckDir requires dir to be an absolute path to an existing directory.
func CheckDir(dir string) error {
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

// Process is a running child: its own process group, stdin and stdout
// pipes, and a bounded tail of its stderr for diagnostics. Always Stop it:
// Stop(eofGrace, termGrace) closes stdin, waits eofGrace, sends SIGTERM to
// the group, waits termGrace, sends SIGKILL, and returns once it is reaped.
type Process struct{ *proc.Process }

// Spawn starts the command with args in dir, in a process group of its
// own, with the parent's environment minus credentials, plus PassEnv's
// variables, Env and extra ("NAME=value"), in a stable order. The process
// dies with dsh, whatever kills it.
func (o Options) Spawn(dir string, args []string, extra ...string) (*Process, error) {
	env := make([]string, 0, len(o.Env)+len(extra))
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	p, err := proc.Start(proc.Spec{Path: o.Command, Args: args, Dir: dir, PassEnv: o.PassEnv, Env: append(env, extra...)})
	if err != nil {
		return nil, err
	}
	return &Process{p}, nil
}

// ExitGrace is how long a child whose output has ended is given to exit
// before it is described as still running: its exit explains the lost
// connection, and on a loaded machine a crashing program can take more than
// a second to be reaped.
const ExitGrace = 5 * time.Second

// Exited reports whether the process is reaped within d, so that a lost
// connection can be explained by the exit it came from.
func (p *Process) Exited(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.Done():
		return true
	case <-t.C:
		return false
	}
}

// Texts returns the text of a prompt's non-empty text blocks.
func Texts(prompt []content.Block) []string {
	var texts []string
	for _, b := range prompt {
		if b.Type == content.TypeText && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return texts
}

// Request checks what every child-process provider needs of a start
// request: its lineage (see subagent.CheckLineage), text in the prompt, and
// a ctx not already done.
func Request(ctx context.Context, provider string, req subagent.StartRequest) error {
	if err := subagent.CheckLineage(provider, req); err != nil {
		return err
	}
	switch {
	case ctx.Err() != nil:
		return subagent.AbortedBeforeReady(provider, context.Cause(ctx))
	case len(Texts(req.Prompt)) == 0:
		return &subagent.Error{Code: subagent.CodeInvalidRequest, Provider: provider, Msg: "start: the prompt has no text"}
	}
	return nil
}

// Begin starts a start: it checks req (see Request) and returns the
// working directory of its run (see WorkDir), a StartError of stage "cwd"
// when there is none.
func (o Options) Begin(ctx context.Context, kind string, req subagent.StartRequest) (cwd string, err error) {
	if err := Request(ctx, o.Name, req); err != nil {
		return "", err
	}
	if cwd, err = o.WorkDir(req); err != nil {
		return "", &StartError{Kind: kind, Provider: o.Name, Stage: "cwd", Err: err}
	}
	return cwd, nil
}

// Settle ends a run's work before its process is stopped: unless done is
// already closed (the run settled), it calls cancel (the protocol's
// cancel, which settles the run within its cancel grace) and waits for
// done.
func Settle(done <-chan struct{}, cancel func()) {
	select {
	case <-done:
	default:
		cancel()
		<-done
	}
}
