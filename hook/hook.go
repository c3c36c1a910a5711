package hook

import (
	"cmp"
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

// Input is the event a hook reads on stdin, as JSON in Claude Code's
// shape: its field names, its names for the built-in tools in tool_name
// (Bash, Read, Write, Edit, Glob, Grep, Agent) and its argument names in
// tool_input, with absolute paths (file_path); tool_response in the shape
// of Claude Code's tool's; stop_hook_active on Stop and SubagentStop.
// The fields are set with dsh's names and arguments: MarshalJSON
// translates them.
type Input struct {
	Event     Event  `json:"hook_event_name"`
	SessionID string `json:"session_id"`
	// TranscriptPath is the session's conversation in Claude Code's
	// transcript shape (see Transcript).
	TranscriptPath string `json:"transcript_path,omitempty"`
	Cwd            string `json:"cwd"`
	// PermissionMode is Claude Code's name for how calls are approved:
	// "default", or "bypassPermissions" when nothing is asked.
	PermissionMode string `json:"permission_mode,omitempty"`
	// AgentID is set on a child's events (whose SessionID is its root's)
	// and on the subagent events: the child's session.
	AgentID string `json:"agent_id,omitempty"`
	// Agent is the agent's path in its delegation tree, empty for a
	// top-level agent.
	Agent []string `json:"agent,omitempty"`
	// Tool events: dsh's tool name and arguments.
	ToolName     string          `json:"tool_name,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	ToolInput    json.RawMessage `json:"tool_input,omitempty"`
	ToolResponse *ToolResponse   `json:"-"`
	// Duration is how long the call ran (PostToolUse), sent as
	// duration_ms.
	Duration time.Duration `json:"-"`
	// Subagent events: the type (empty when untyped), the provider, the
	// label and the task; SubagentStop adds the stop reason and output.
	AgentType   string `json:"agent_type,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Description string `json:"description,omitempty"`
	// Prompt is the task of a subagent event, or the person's prompt
	// (UserPromptSubmit).
	Prompt string `json:"prompt,omitempty"`
	// StopReason is why the turn (Stop) or the child (SubagentStop) ended.
	StopReason string `json:"stop_reason,omitempty"`
	// Output is the child's final text (SubagentStop).
	Output string `json:"output,omitempty"`
	// LastAssistantMessage is the text of the agent's last answer (Stop,
	// SubagentStop).
	LastAssistantMessage string `json:"last_assistant_message,omitempty"`
	// AgentTranscriptPath is a child's own conversation in the shape of
	// TranscriptPath (SubagentStop of a child in dsh's process).
	AgentTranscriptPath string `json:"agent_transcript_path,omitempty"`
	// StopHookActive is set on a Stop (SubagentStop) that follows a turn
	// a Stop hook continued.
	StopHookActive bool `json:"-"`
	// Source is why a session starts (SessionStart: startup, resume).
	Source string `json:"source,omitempty"`
	// Reason is why a session ends (SessionEnd).
	Reason string `json:"reason,omitempty"`
	// Message and NotificationType describe a Notification.
	Message          string `json:"message,omitempty"`
	NotificationType string `json:"notification_type,omitempty"`
	// PreCompact: what started the compaction (auto, manual or overflow)
	// and the focus given to /compact.
	Trigger            string `json:"trigger,omitempty"`
	CustomInstructions string `json:"custom_instructions,omitempty"`
	// ProjectDir is $CLAUDE_PROJECT_DIR (default Cwd).
	ProjectDir string `json:"-"`
	// EnvFile is $CLAUDE_ENV_FILE, a file the hook may write (dsh does not
	// read it back); none when empty.
	EnvFile string `json:"-"`
}

// MarshalJSON writes in in Claude Code's shape (see Input).
func (in Input) MarshalJSON() ([]byte, error) {
	type plain Input
	w := struct {
		plain
		ToolResponse   any    `json:"tool_response,omitempty"`
		DurationMS     *int64 `json:"duration_ms,omitempty"`
		StopHookActive *bool  `json:"stop_hook_active,omitempty"`
	}{plain: plain(in)}
	if in.ToolName != "" {
		w.ToolName = ClaudeName(in.ToolName)
		w.ToolInput = claudeInput(in.ToolName, in.Cwd, in.ToolInput)
	}
	if in.ToolResponse != nil {
		w.ToolResponse = claudeResponse(in.ToolName, w.ToolInput, in.ToolResponse)
	}
	if in.Event == PostToolUse {
		ms := in.Duration.Milliseconds()
		w.DurationMS = &ms
	}
	if in.Event == Stop || in.Event == SubagentStop {
		w.StopHookActive = &in.StopHookActive
	}
	return json.Marshal(w)
}

// MaxOutput bounds the bytes of a child's answer that SubagentStop hooks
// get as output and last_assistant_message.
const MaxOutput = 64 << 10

// SetOutput sets in's Output and LastAssistantMessage (Claude Code's name
// for it) to a child's answer, cut at MaxOutput bytes on a rune boundary.
func (in *Input) SetOutput(answer string) {
	if len(answer) > MaxOutput {
		n := MaxOutput
		for n > 0 && !utf8.RuneStart(answer[n]) {
			n--
		}
		answer = answer[:n]
	}
	in.Output, in.LastAssistantMessage = answer, answer
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

// New compiles cfg, whose events must be Events (an agent definition's
// hooks). origin names where it was declared (a file) for logs; log
// receives what hooks report besides blocks (nil: slog.Default()).
func New(cfg Config, origin string, log *slog.Logger) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return compile(cfg, origin, log), nil
}

// NewSettings compiles what of cfg, a user's configuration (dsh.yaml, one
// of Claude Code's settings files), dsh runs, as Config.Usable (not strict)
// says, and returns the warnings for what it left out.
func NewSettings(cfg Config, origin string, log *slog.Logger) (*Set, []string, error) {
	usable, warnings, err := cfg.Usable(false)
	if err != nil {
		return nil, nil, err
	}
	return compile(usable, origin, log), warnings, nil
}

func compile(cfg Config, origin string, log *slog.Logger) *Set {
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
	return s
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

// Run runs the hooks of in.Event as Decide does, and returns the
// *Blocked of a block; a hook's continue: false blocks too. It is for
// callers that honour no other decision.
func (s *Set) Run(ctx context.Context, in Input) error {
	d, err := s.Decide(ctx, in)
	if err == nil && d.Stop {
		return &Blocked{Event: in.Event, Reason: cmpOr(d.StopReason, "a hook stopped the agent")}
	}
	return err
}

// Decide runs, in order, the hooks of in.Event whose matcher matches in,
// and returns what their JSON output decided. It returns a *Blocked for
// the first that blocks: one that exits with BlockExitCode, that prints a
// blocking decision (decision block; for PreToolUse permissionDecision
// deny), or, for PreToolUse and SubagentStart, one that does not finish
// within its timeout (the guard could not decide). Hooks after a block, or
// after one that printed continue: false, do not run. Other failures are
// logged and ignored. A ctx that ends kills the running hook and returns
// its cause.
func (s *Set) Decide(ctx context.Context, in Input) (Decision, error) {
	var d Decision
	if s == nil {
		return d, nil
	}
	var stdin []byte
	for _, h := range s.hooks {
		if h.event != in.Event || !h.matches(in) {
			continue
		}
		if stdin == nil {
			var err error
			if stdin, err = json.Marshal(in); err != nil {
				return d, err
			}
		}
		if err := s.runOne(ctx, h, in, stdin, &d); err != nil {
			return d, err
		}
		if d.Stop {
			break
		}
	}
	return d, nil
}

func (h compiled) matches(in Input) bool {
	if h.match == nil {
		return true
	}
	switch in.Event {
	case PreToolUse, PostToolUse:
		return h.match.MatchString(in.ToolName) || h.match.MatchString(ClaudeName(in.ToolName))
	case SubagentStart, SubagentStop:
		return h.match.MatchString(in.AgentType)
	case SessionStart:
		return h.match.MatchString(in.Source)
	case SessionEnd:
		return h.match.MatchString(in.Reason)
	case Notification:
		return h.match.MatchString(in.NotificationType)
	case PreCompact:
		return h.match.MatchString(in.Trigger)
	}
	return true // Claude Code has no matcher for the other events
}

// runOne runs one hook, interprets its exit and folds its output into d.
func (s *Set) runOne(ctx context.Context, h compiled, in Input, stdin []byte, d *Decision) error {
	log := s.log.With("hook", clip(h.command, 80), "event", h.event, "origin", h.origin)
	res, err := execute(ctx, h, in, stdin, s.sandbox, s.network)
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
	out, isJSON, perr := parseOutput(res.stdout)
	switch {
	case perr != nil && h.event == PreToolUse: // a guard that cannot be read must not let the call through
		return &Blocked{Event: h.event, Command: h.command, Reason: fmt.Sprintf("the hook printed JSON dsh cannot read (%v), so the call was not allowed", perr)}
	case perr != nil:
		log.Warn("hook printed JSON dsh cannot read", "err", perr)
		return nil
	}
	if !isJSON {
		if res.stdout != "" {
			log.Debug("hook output", "stdout", res.stdout)
			if in.Event == SessionStart || in.Event == UserPromptSubmit {
				d.addContext(res.stdout)
			}
		}
		return nil
	}
	if !out.SuppressOutput {
		log.Debug("hook output", "stdout", res.stdout)
	}
	if out.SystemMessage != "" {
		log.Warn("hook message", "message", out.SystemMessage)
	}
	err = d.apply(h, in, out)
	if b, ok := errors.AsType[*Blocked](err); ok {
		log.Info("hook blocked", "reason", b.Reason)
	}
	return err
}

type result struct {
	exit           int
	timedOut       bool
	stdout, stderr string
}

// execute runs one hook to its end, its timeout or ctx's end, under the
// sandbox mode (narrowed by ctx's) and network, and reaps its process
// group.
func execute(ctx context.Context, h compiled, in Input, stdin []byte, mode sandbox.Mode, network sandbox.Network) (result, error) {
	cwd := in.Cwd
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
	env := []string{"CLAUDE_PROJECT_DIR=" + cmp.Or(in.ProjectDir, cwd), "DSH_HOOK_EVENT=" + string(h.event)}
	if in.EnvFile != "" {
		env = append(env, "CLAUDE_ENV_FILE="+in.EnvFile)
	}
	p, err := proc.Start(proc.Spec{Path: "/bin/sh", Args: []string{"-c", h.command}, Dir: cwd, StderrTail: maxReason,
		Env: env, Sandbox: policy})
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
