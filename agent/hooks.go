package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// Hooks returns the agent's hooks: those it inherited (its owner's, or the
// registry's for a top-level agent) followed by its own.
func (a *Agent) Hooks() *hook.Set { return a.hooks }

// HookInput returns the part of a hook's input that describes the agent:
// its session, cwd and path in the delegation tree.
func (a *Agent) HookInput(ev hook.Event) hook.Input {
	return hook.Input{Event: ev, SessionID: a.id, Cwd: a.Cwd(), Agent: a.path}
}

// preToolHooks runs the PreToolUse hooks of a call; an error refuses it.
func (a *Agent) preToolHooks(ctx context.Context, call tool.Call) error {
	if !a.hooks.Has(hook.PreToolUse) {
		return nil
	}
	in := a.HookInput(hook.PreToolUse)
	in.ToolName, in.ToolUseID, in.ToolInput = call.Name, call.ID, json.RawMessage(call.Arguments)
	return a.hooks.Run(ctx, in)
}

// afterTool runs the PostToolUse hooks of a call that ran; a hook that
// blocks adds its reason to the result the model reads.
func (a *Agent) afterTool(ctx context.Context, call tool.Call, res tool.Result) tool.Result {
	in := a.HookInput(hook.PostToolUse)
	in.ToolName, in.ToolUseID, in.ToolInput = call.Name, call.ID, json.RawMessage(call.Arguments)
	in.ToolResponse = &hook.ToolResponse{Content: content.JoinText(res.Content), IsError: res.IsError, Code: res.Code}
	var b *hook.Blocked
	if errors.As(a.hooks.Run(context.WithoutCancel(ctx), in), &b) {
		res.Content = append(append([]content.Block(nil), res.Content...), content.Text("\nPostToolUse hook: "+strings.TrimSpace(b.Reason)))
	}
	return res
}

// stopHooks runs the Stop hooks of a top-level agent's turn end. A child's
// end is its parent's SubagentStop.
func (a *Agent) stopHooks(end session.TurnEnd) {
	if a.owner != nil || !a.hooks.Has(hook.Stop) {
		return
	}
	in := a.HookInput(hook.Stop)
	in.StopReason = end.Reason.Kind
	a.hooks.Run(context.Background(), in)
}
