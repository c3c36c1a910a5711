package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool/toolname"
)

// BlockExitCode is the exit status with which a hook blocks what its event
// announces (Claude Code's convention).
const BlockExitCode = 2

// DefaultTimeout is a hook's timeout when its configuration sets none.
const DefaultTimeout = 60 * time.Second

// CodeBlocked is the error code of a call a hook blocked.
const CodeBlocked = "HOOK_BLOCKED"

const (
	maxReason = 4096     // bytes of a hook's stderr kept as its reason
	maxStdout = 64 << 10 // bytes of a hook's stdout kept for the log
	termGrace = 100 * time.Millisecond
)

// Input is the event a hook reads on stdin, as JSON. The field names are
// Claude Code's where it has the field.
type Input struct {
	Event     Event  `json:"hook_event_name"`
	SessionID string `json:"session_id"`
	Cwd       string `json:"cwd"`
	// Agent is the agent's path in its delegation tree, empty for a
	// top-level agent.
	Agent []string `json:"agent,omitempty"`
	// Tool events.
	ToolName     string          `json:"tool_name,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	ToolInput    json.RawMessage `json:"tool_input,omitempty"`
	ToolResponse *ToolResponse   `json:"tool_response,omitempty"`
	// Subagent events: the type (empty when untyped), the provider, the
	// label and the task; SubagentStop adds the stop reason and output.
	AgentType   string `json:"agent_type,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Description string `json:"description,omitempty"`
	Prompt      string `json:"prompt,omitempty"`
	// StopReason is why the turn (Stop) or the child (SubagentStop) ended.
	StopReason string `json:"stop_reason,omitempty"`
	// Output is the child's final text (SubagentStop).
	Output string `json:"output,omitempty"`
	// PreCompact: what started the compaction (auto or manual) and the
	// focus given to /compact.
	Trigger            string `json:"trigger,omitempty"`
	CustomInstructions string `json:"custom_instructions,omitempty"`
}

// ToolResponse is what a tool call produced (PostToolUse).
type ToolResponse struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
	Code    string `json:"code,omitempty"`
}

// Blocked says that a hook blocked what its event announced. It is the
// error a blocked tool call reports, with code CodeBlocked.
type Blocked struct {
	Event   Event
	Command string // the hook's command line
	Reason  string // the hook's stderr, or why it was taken as a block
}

func (b *Blocked) Error() string {
	reason := strings.TrimSpace(b.Reason)
	if reason == "" {
		reason = "(the hook gave no reason)"
	}
	return fmt.Sprintf("blocked by a %s hook (%s): %s", b.Event, clip(b.Command, 80), reason)
}

// ErrorCode returns CodeBlocked.
func (b *Blocked) ErrorCode() string { return CodeBlocked }

// Set is an immutable list of compiled hooks. A nil *Set has no hooks.
type Set struct {
	hooks []compiled
	log   *slog.Logger
	// sandbox and network are what hooks run under (see WithSandbox).
	sandbox sandbox.Mode
	network sandbox.Network
}

type compiled struct {
	event   Event
	match   *regexp.Regexp // nil: everything
	command string
	timeout time.Duration
	origin  string // where the hook was declared
}

// New compiles cfg. origin names where it was declared (a file) for logs;
// log receives what hooks report besides blocks (nil: slog.Default()).
func New(cfg Config, origin string, log *slog.Logger) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Set{log: log}
	for _, ev := range sortedEvents(cfg) {
		for _, g := range cfg[ev] {
			re, _ := compileMatcher(g.Matcher) // validated
			for _, h := range g.Hooks {
				timeout := DefaultTimeout
				if h.Timeout > 0 {
					timeout = time.Duration(h.Timeout * float64(time.Second))
				}
				s.hooks = append(s.hooks, compiled{event: ev, match: re, command: h.Command, timeout: timeout, origin: origin})
			}
		}
	}
	return s, nil
}

// WithSandbox returns s with its hooks run under the sandbox mode m
// (unset: sandbox.Default), narrowed by the mode of the context a hook
// runs for (sandbox.WithMode), as bash commands are, and network n. A
// hook may write its working directory and the temporary directories
// (under workspace-write).
func (s *Set) WithSandbox(m sandbox.Mode, n sandbox.Network) *Set {
	out := &Set{log: slog.Default(), sandbox: m, network: n}
	if s != nil {
		out.hooks, out.log = s.hooks, s.log
	}
	return out
}

// With returns the hooks of s followed by those of t, run under s's
// sandbox (t's when s is nil). Either may be nil.
func (s *Set) With(t *Set) *Set {
	switch {
	case t.Empty():
		return s
	case s == nil:
		return t
	case len(s.hooks) == 0:
		return &Set{hooks: t.hooks, log: t.log, sandbox: s.sandbox, network: s.network}
	}
	return &Set{hooks: slices.Concat(s.hooks, t.hooks), log: s.log, sandbox: s.sandbox, network: s.network}
}

// Empty reports whether s has no hooks.
func (s *Set) Empty() bool { return s == nil || len(s.hooks) == 0 }

// Has reports whether s has a hook for ev.
func (s *Set) Has(ev Event) bool {
	return s != nil && slices.ContainsFunc(s.hooks, func(h compiled) bool { return h.event == ev })
}

// Run runs, in order, the hooks of in.Event whose matcher matches in, and
// returns a *Blocked for the first that blocks: one that exits with
// BlockExitCode, or, for PreToolUse and SubagentStart, one that does not
// finish within its timeout (the guard could not decide). Hooks after a
// block do not run. Other failures are logged and ignored. A ctx that ends
// kills the running hook and returns its cause.
func (s *Set) Run(ctx context.Context, in Input) error {
	if s == nil {
		return nil
	}
	var stdin []byte
	for _, h := range s.hooks {
		if h.event != in.Event || !h.matches(in) {
			continue
		}
		if stdin == nil {
			var err error
			if stdin, err = json.Marshal(in); err != nil {
				return err
			}
		}
		if err := s.runOne(ctx, h, in, stdin); err != nil {
			return err
		}
	}
	return nil
}

func (h compiled) matches(in Input) bool {
	if h.match == nil {
		return true
	}
	switch in.Event {
	case PreToolUse, PostToolUse:
		if h.match.MatchString(in.ToolName) {
			return true
		}
		alias := toolname.Claude(in.ToolName)
		return alias != "" && h.match.MatchString(alias)
	case SubagentStart, SubagentStop:
		return h.match.MatchString(in.AgentType)
	}
	return true
}

// runOne runs one hook and interprets its exit.
func (s *Set) runOne(ctx context.Context, h compiled, in Input, stdin []byte) error {
	log := s.log.With("hook", clip(h.command, 80), "event", h.event, "origin", h.origin)
	res, err := execute(ctx, h, in.Cwd, stdin, s.sandbox, s.network)
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case err != nil:
		log.Warn("hook failed to run", "err", err)
		return nil
	case res.timedOut && h.event.blocking():
		return &Blocked{Event: h.event, Command: h.command, Reason: fmt.Sprintf("the hook did not finish within its timeout (%v), so the call was not allowed", h.timeout)}
	case res.timedOut:
		log.Warn("hook timed out", "timeout", h.timeout)
		return nil
	case res.exit == BlockExitCode:
		log.Info("hook blocked", "reason", res.stderr)
		return &Blocked{Event: h.event, Command: h.command, Reason: res.stderr}
	case res.exit != 0:
		log.Warn("hook failed", "exit", res.exit, "stderr", res.stderr)
		return nil
	}
	if res.stdout != "" {
		log.Debug("hook output", "stdout", res.stdout)
	}
	return nil
}

type result struct {
	exit           int
	timedOut       bool
	stdout, stderr string
}

// execute runs one hook to its end, its timeout or ctx's end, under the
// sandbox mode (narrowed by ctx's) and network, and reaps its process
// group.
func execute(ctx context.Context, h compiled, cwd string, stdin []byte, mode sandbox.Mode, network sandbox.Network) (result, error) {
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return result{}, err
		}
		cwd = wd
	}
	mode = mode.Or(sandbox.Default)
	if m, ok := sandbox.FromContext(ctx); ok {
		mode = sandbox.Narrow(mode, m)
	}
	policy := sandbox.For(mode, cwd).WithNetwork(network)
	p, err := proc.Start(proc.Spec{Path: "/bin/sh", Args: []string{"-c", h.command}, Dir: cwd, StderrTail: maxReason,
		Env: []string{"CLAUDE_PROJECT_DIR=" + cwd, "DSH_HOOK_EVENT=" + string(h.event)}, Sandbox: policy})
	if err != nil {
		return result{}, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		p.Stdin().Write(stdin) // a hook that does not read its input gets EPIPE here, or Stop's close
		p.Stdin().Close()
	})
	var out strings.Builder
	wg.Go(func() {
		io.Copy(&out, io.LimitReader(p.Stdout(), maxStdout))
		io.Copy(io.Discard, p.Stdout())
	})
	timer := time.NewTimer(h.timeout)
	defer timer.Stop()
	var res result
	select {
	case <-p.Done():
	case <-timer.C:
		res.timedOut = true
	case <-ctx.Done():
	}
	p.Stop(0, termGrace)
	wg.Wait()
	res.stdout, res.stderr, res.exit = out.String(), p.StderrTail(), exitStatus(p.Err())
	return res, nil
}

// exitStatus reads an exit status from the error of a process that ended:
// 0 for none, -1 when it did not exit by itself. An error without an
// ExitCode method is read from its "exit status N" text, which exec's and
// proc's exit errors share.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	var n int
	if _, serr := fmt.Sscanf(err.Error(), "exit status %d", &n); serr == nil {
		return n
	}
	return -1
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
