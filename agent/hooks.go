package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// MaxStopContinuations bounds how many times in one turn Stop hooks (a
// child's SubagentStop hooks) may continue it (a hook that blocks): the
// next end of the turn then stands. The re-runs get stop_hook_active.
const MaxStopContinuations = 8

// Subagent describes a child to its hooks, as its delegation started it
// (CreateOptions.Subagent). A child runs its SubagentStop hooks itself, at
// the end of each of its turns, where a top-level agent runs its Stop
// hooks: one that blocks continues the child's turn. StopHooksRan tells
// the delegation so, that it does not run them again after the child
// settled. A Subagent belongs to one child; it is not to be copied.
type Subagent struct {
	// Type is the child's subagent_type ("" when untyped): agent_type on
	// every event its hooks get, and what SubagentStop matchers match.
	Type string
	// Provider, Description and Prompt are the delegation's: provider,
	// description and prompt on SubagentStop, as on SubagentStart.
	Provider, Description, Prompt string

	stopRan atomic.Bool
}

// StopHooksRan reports whether the child ran its SubagentStop hooks at
// the end of a turn (false for a nil s).
func (s *Subagent) StopHooksRan() bool { return s != nil && s.stopRan.Load() }

// hookPlugin names hooks as the source of the messages they add.
const hookPlugin = "hook"

// toolHookState carries what a call's PreToolUse hooks and its
// authorization leave for its PostToolUse hooks; an agent without tool
// hooks has none.
type toolHookState struct {
	callStarts  sync.Map // call id → when it was allowed, for PostToolUse's duration_ms
	callContext sync.Map // call id → the additional context of its PreToolUse hooks
}

// hookState is the root's part of the hooks' life: whether its session
// started, the file of $CLAUDE_ENV_FILE and the transcript (a child's
// holds only its own transcript).
type hookState struct {
	mu            sync.Mutex
	envFile       string
	envErr        error
	transcript    *hook.Transcript
	transcriptErr error
	started       bool // SessionStart ran
}

// Hooks returns the agent's hooks: those it inherited (its owner's, or the
// registry's for a top-level agent) followed by its own.
func (a *Agent) Hooks() *hook.Set { return a.hooks }

// root returns the top-level agent of a's delegation tree.
func (a *Agent) root() *Agent {
	r := a
	for r.owner != nil {
		r = r.owner
	}
	return r
}

// HookInput returns the part of a hook's input that describes the agent,
// as Claude Code gives it: the session of the tree's root (and its log as
// the transcript), with a child's own session as agent_id; cwd, the
// permission mode and the agent's path in the delegation tree.
func (a *Agent) HookInput(ev hook.Event) hook.Input {
	root := a.root()
	in := hook.Input{Event: ev, SessionID: root.id, Cwd: a.Cwd(), Agent: a.path, ProjectDir: root.Cwd(),
		TranscriptPath: root.hookTranscript(root.hookState), PermissionMode: "default"}
	if ev == hook.SessionStart { // as in Claude Code, only SessionStart hooks get $CLAUDE_ENV_FILE
		in.EnvFile = root.hookEnvFile()
	}
	if root != a {
		in.AgentID = a.id
		if a.subagent != nil {
			in.AgentType = a.subagent.Type
		}
	}
	if a.policy.Unrestricted() {
		in.PermissionMode = "bypassPermissions"
	}
	return in
}

// hookEnvFile returns the root's $CLAUDE_ENV_FILE, made on first use in the
// temporary directory (which hooks may write); "" when it cannot be made.
func (a *Agent) hookEnvFile() string {
	h := a.hookState
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.envFile == "" && h.envErr == nil {
		f, err := os.CreateTemp("", "dsh-hook-env-*")
		if err != nil {
			h.envErr = err
			a.reg.deps.Log.Warn("no CLAUDE_ENV_FILE for hooks", "err", err)
			return ""
		}
		f.Close()
		h.envFile = f.Name()
	}
	return h.envFile
}

// hookTranscript brings the Claude Code-shaped transcript of a's
// conversation that h holds (a root's or a child's hookState) up to
// it, made on first use, and returns its file; "" when it cannot be made.
func (a *Agent) hookTranscript(h *hookState) string {
	h.mu.Lock()
	if h.transcript == nil && h.transcriptErr == nil {
		if h.transcript, h.transcriptErr = hook.NewTranscript(a.id, a.Cwd()); h.transcriptErr != nil {
			a.reg.deps.Log.Warn("no transcript for hooks", "err", h.transcriptErr)
		}
	}
	t := h.transcript
	h.mu.Unlock()
	if t == nil {
		return ""
	}
	if err := t.Sync(a.session.Messages()); err != nil {
		a.reg.deps.Log.Warn("the transcript for hooks could not be written", "err", err)
	}
	return t.Path()
}

// guardCall is the check every call in the agent's scope passes: its
// PreToolUse hooks, whose decision may change the arguments, allow the
// call without asking, or make dsh ask; then the permission policy.
func (a *Agent) guardCall(ctx context.Context, call tool.Call) (tool.Call, error) {
	if !a.tools.Has(call.Name) {
		return call, nil // the scope reports the unknown tool itself
	}
	var d hook.Decision
	if a.hooks.Has(hook.PreToolUse) {
		in := a.HookInput(hook.PreToolUse)
		in.ToolName, in.ToolUseID, in.ToolInput = call.Name, call.ID, json.RawMessage(call.Arguments)
		var err error
		d, err = a.hooks.Decide(ctx, in)
		if d.Stop {
			a.stopByHook(d.StopReason)
		}
		if err != nil {
			return call, err
		}
		if d.Stop {
			return call, &hook.Blocked{Event: hook.PreToolUse, Reason: "the agent was stopped by a hook: " + d.StopReason}
		}
		if d.UpdatedInput != nil {
			call.Arguments = d.UpdatedInput
		}
		if len(d.Context) > 0 && call.ID != "" {
			a.toolHooks.callContext.Store(call.ID, d.Context)
		}
	}
	err := a.authorize(ctx, permission.Request{Tool: call.Name, CallID: call.ID, Arguments: call.Arguments}, d.Permission)
	if err == nil && call.ID != "" && a.hooks.Has(hook.PostToolUse) {
		a.toolHooks.callStarts.Store(call.ID, time.Now())
	}
	return call, err
}

// afterTool runs the PostToolUse hooks of a call that ran: a hook that
// blocks adds its reason to the result the model reads, as does the
// additional context they and the call's PreToolUse hooks give; one that
// prints continue: false ends the turn after this step.
func (a *Agent) afterTool(ctx context.Context, call tool.Call, res tool.Result) tool.Result {
	var add []string
	if pre, ok := a.toolHooks.callContext.LoadAndDelete(call.ID); ok {
		for _, c := range pre.([]string) {
			add = append(add, "PreToolUse hook additional context: "+strings.TrimSpace(c))
		}
	}
	var d hook.Decision
	var err error
	if a.hooks.Has(hook.PostToolUse) {
		in := a.HookInput(hook.PostToolUse)
		in.ToolName, in.ToolUseID, in.ToolInput = call.Name, call.ID, json.RawMessage(call.Arguments)
		in.ToolResponse = &hook.ToolResponse{Content: content.JoinText(res.Content), IsError: res.IsError, Code: res.Code}
		if start, ok := a.toolHooks.callStarts.LoadAndDelete(call.ID); ok {
			in.Duration = time.Since(start.(time.Time))
		}
		d, err = a.hooks.Decide(context.WithoutCancel(ctx), in)
	}
	if b, ok := errors.AsType[*hook.Blocked](err); ok {
		add = append(add, "PostToolUse hook: "+strings.TrimSpace(b.Reason))
	}
	for _, c := range d.Context {
		add = append(add, "PostToolUse hook additional context: "+strings.TrimSpace(c))
	}
	if d.Stop {
		a.stopByHook(d.StopReason)
	}
	if len(add) > 0 {
		res.Content = append(append([]content.Block(nil), res.Content...), content.Text("\n"+strings.Join(add, "\n")))
	}
	return res
}

// stopByHook asks the running turn to end after its step (a hook printed
// continue: false).
func (a *Agent) stopByHook(reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hookStop == nil {
		a.hookStop = &session.Cause{Kind: "hook", Reason: reason}
	}
}

// takeHookStop returns and clears the stop a hook asked for.
func (a *Agent) takeHookStop() *session.Cause {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.hookStop
	a.hookStop = nil
	return c
}

// hookMessage is a message hooks add for the model to read.
func hookMessage(text string) content.Message {
	return content.Message{ID: content.NewID(), Role: content.RoleUser, Content: []content.Block{content.Text(text)},
		Source: content.Source{Kind: content.SourcePlugin, Plugin: hookPlugin, Form: "hook"}}
}

// promptHooks runs, before step 1 of a root's turn, its SessionStart hooks
// (first turn in this process) and the UserPromptSubmit hooks of each
// person's prompt in claimed. The context they add is appended to the
// prompt's text. A prompt a hook refuses ends the turn before the model
// sees it (the returned reason).
func (a *Agent) promptHooks(ctx context.Context, n int, claimed []item) (*session.EndReason, error) {
	if a.owner != nil || a.host || a.hooks.Empty() {
		return nil, nil
	}
	var extra []string
	a.hookState.mu.Lock()
	first := !a.hookState.started
	a.hookState.started = true
	a.hookState.mu.Unlock()
	if first && a.hooks.Has(hook.SessionStart) {
		in := a.HookInput(hook.SessionStart)
		in.Source = "startup"
		if n > 1 {
			in.Source = "resume"
		}
		d, err := a.hooks.Decide(ctx, in)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if err != nil { // Claude Code shows a SessionStart block to the user only
			a.reg.deps.Log.Warn("a SessionStart hook failed", "err", err)
		}
		extra = append(extra, labelled("SessionStart", d.Context)...)
	}
	for i, it := range claimed {
		if it.msg.Source.Kind != content.SourceUser || !a.hooks.Has(hook.UserPromptSubmit) {
			continue
		}
		in := a.HookInput(hook.UserPromptSubmit)
		in.Prompt = content.JoinText(it.msg.Content)
		d, err := a.hooks.Decide(ctx, in)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if b, ok := errors.AsType[*hook.Blocked](err); ok || d.Stop {
			reason := d.StopReason
			if ok {
				reason = strings.TrimSpace(b.Reason)
			}
			a.reg.deps.Log.Warn("a UserPromptSubmit hook refused the prompt", "agent", a.id, "reason", reason)
			return &session.EndReason{Kind: session.EndBlocked, Cause: &session.Cause{Kind: "hook", Reason: reason}}, nil
		}
		if err != nil {
			return nil, err
		}
		if ctxs := append(extra, labelled("UserPromptSubmit", d.Context)...); len(ctxs) > 0 {
			msg := *it.msg
			msg.Content = append(append([]content.Block(nil), msg.Content...), content.Text("\n"+strings.Join(ctxs, "\n")))
			claimed[i].msg, extra = &msg, nil
		}
	}
	if len(extra) > 0 && len(claimed) > 0 { // no prompt took the session's context: the first message does
		msg := *claimed[0].msg
		msg.Content = append(append([]content.Block(nil), msg.Content...), content.Text("\n"+strings.Join(extra, "\n")))
		claimed[0].msg = &msg
	}
	return nil, nil
}

func labelled(ev string, ctxs []string) []string {
	var out []string
	for _, c := range ctxs {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, ev+" hook additional context: "+c)
		}
	}
	return out
}

// stopHooks runs the Stop hooks of a top-level agent's turn that is about
// to complete, and a child's SubagentStop hooks (see Subagent). A hook
// that blocks (exit 2, decision block) continues the turn: it returns the
// message with the hook's reason for the model, at most
// MaxStopContinuations times a turn.
func (a *Agent) stopHooks(ctx context.Context, continued int) (content.Message, bool) {
	in, ok := a.turnEndInput(session.EndCompleted)
	if !ok {
		return content.Message{}, false
	}
	in.StopHookActive = continued > 0
	d, err := a.hooks.Decide(ctx, in)
	b, ok := errors.AsType[*hook.Blocked](err)
	switch {
	case !ok || d.Stop || ctx.Err() != nil:
		return content.Message{}, false
	case continued >= MaxStopContinuations:
		a.reg.deps.Log.Warn("a "+string(in.Event)+" hook would continue the turn again; the turn ends", "agent", a.id,
			"continuations", continued, "reason", strings.TrimSpace(b.Reason))
		return content.Message{}, false
	}
	return hookMessage(string(in.Event) + " hook feedback:\n" + strings.TrimSpace(b.Reason)), true
}

// endHooks runs the Stop hooks (a child's SubagentStop hooks), observe
// only, of a turn that ended otherwise than completed.
func (a *Agent) endHooks(end session.TurnEnd) {
	if end.Reason.Kind == session.EndCompleted {
		return
	}
	if in, ok := a.turnEndInput(end.Reason.Kind); ok {
		a.hooks.Run(context.Background(), in)
	}
}

// turnEndInput is the input of the hooks that run at the end of a turn
// that ends with reason: Stop for a top-level agent, SubagentStop for a
// child, which marks its Subagent (see StopHooksRan). ok is false when no
// hook of the event would run.
func (a *Agent) turnEndInput(reason string) (in hook.Input, ok bool) {
	if a.owner == nil {
		if a.host || !a.hooks.Has(hook.Stop) {
			return in, false
		}
		in = a.HookInput(hook.Stop)
		in.StopReason, in.LastAssistantMessage = reason, a.lastAnswer()
		return in, true
	}
	if s := a.subagent; s != nil {
		s.stopRan.Store(true)
	}
	if !a.hooks.Has(hook.SubagentStop) {
		return in, false
	}
	in = a.HookInput(hook.SubagentStop)
	if s := a.subagent; s != nil {
		in.Provider, in.Description, in.Prompt = s.Provider, s.Description, s.Prompt
	}
	in.StopReason = reason
	in.SetOutput(a.lastAnswer())
	in.AgentTranscriptPath = a.hookTranscript(a.hookState)
	return in, true
}

// sessionEndHooks runs the SessionEnd hooks of a top-level agent whose
// session started, as it is disposed, and removes its $CLAUDE_ENV_FILE and
// transcript; a child's own transcript is removed too.
func (a *Agent) sessionEndHooks() {
	if a.hookState == nil { // a child without SubagentStop hooks
		return
	}
	a.hookState.mu.Lock()
	started, env, transcript := a.hookState.started, a.hookState.envFile, a.hookState.transcript
	a.hookState.mu.Unlock()
	if transcript != nil {
		defer transcript.Remove()
	}
	if a.owner == nil && started && a.hooks.Has(hook.SessionEnd) {
		in := a.HookInput(hook.SessionEnd)
		in.Reason = "other"
		a.hooks.Run(context.Background(), in)
	}
	if env != "" {
		os.Remove(env)
	}
}

// notifyHooks runs the Notification hooks before a person is asked to
// approve a call.
func (a *Agent) notifyHooks(ctx context.Context, req permission.Request) {
	if !a.hooks.Has(hook.Notification) {
		return
	}
	in := a.HookInput(hook.Notification)
	in.NotificationType, in.Message = "permission_prompt", "dsh needs your permission to use "+hook.ClaudeName(req.Tool)
	a.hooks.Run(context.WithoutCancel(ctx), in)
}

// lastAnswer returns the text of the agent's last assistant message.
func (a *Agent) lastAnswer() string {
	msgs := a.session.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == content.RoleAssistant {
			return content.JoinText(msgs[i].Content)
		}
	}
	return ""
}
