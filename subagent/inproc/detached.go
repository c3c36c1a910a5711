package inproc

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// Detached describes a child whose parent runs in another process (the
// child of a Temporal worker). The child is a root agent of this process:
// its delegation tree, permission policy (the request's) and token budget
// start at it, and its session records the remote parent's lineage.
type Detached struct {
	// SessionID is the child's session id, minted by its parent.
	SessionID string
	// ParentSession is the remote parent's session id.
	ParentSession string
	// Cwd is the child's working directory on this host.
	Cwd string
	// Options are this host's default model route and limits for the
	// child; the request's AgentOptions override them, and its depth is
	// the request's.
	Options agent.Options
	// TokenBudget bounds the tokens of the child's tree (0: unbounded).
	TokenBudget int64
	// Seed is the child's own log so far, when it continues what another
	// host began; nil for a new child. Its open turn is closed as crash
	// repair closes one, and the child is told to continue.
	Seed []session.Event
}

// ResumeText opens the message that continues a child whose host stopped
// mid-task.
const ResumeText = "The host that was running you stopped in the middle of your task. Your work so far is above: a tool call " +
	"whose outcome is unknown may or may not have run. Continue the task from where it stopped."

// StartDetached starts a child for a parent in another process, with the
// request's prompt, persona, tool filter, output schema, depth and policy
// applied as Start applies them; req.Parent is not used. A seeded child
// gets ResumeText (and the structured-output instruction when structured)
// instead of its task, which is in its log already. A seed whose last turn
// has ended is the caller's to settle (see LogResult).
func (p *Provider) StartDetached(ctx context.Context, req subagent.StartRequest, d Detached) (subagent.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	structured := req.OutputSchema != nil
	msg := FirstMessage(req.Prompt, structured)
	seed, err := session.Repair(d.Seed)
	if err != nil {
		return nil, fmt.Errorf("inproc %s: the seed is not a log: %w", p.cfg.Name, err)
	}
	if len(seed) > 0 {
		text := ResumeText
		if structured {
			text += "\n" + StructuredText
		}
		msg = content.UserMessage(content.Text(instructionsOpen + text + instructionsClose))
	}
	capture := newCapture(req.OutputSchema)
	desc, shaping := req.Descriptor, Shaping{ToolFilter: req.ToolFilter, Persona: req.Persona, OutputSchema: req.OutputSchema} // not req: see Start
	child, err := p.cfg.Agents.Create(ctx, agent.CreateOptions{
		SessionID:       d.SessionID,
		Cwd:             d.Cwd,
		ParentSession:   d.ParentSession,
		Origin:          session.OriginSubagent,
		DelegationDepth: req.Depth,
		Seed:            seed,
		Options:         childOptions(d.Options, req.AgentOptions, req.Depth),
		Policy:          req.Policy,
		Hooks:           req.Hooks,
		TokenBudget:     d.TokenBudget,
		Setup:           func(a *agent.Agent) error { return compose(a, desc, shaping, capture) },
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, fmt.Errorf("inproc %s: create child: %w", p.cfg.Name, err)
	}
	h := &handle{agent: child}
	r := newRun(h, capture, structured)
	h.owner = r
	r.start(ctx, msg, false, req.Progress)
	return r, nil
}

// LogResult is the result a child's log shows once its last turn has ended,
// as the run that drove the turn settled it: output, usage, stop reason and
// the structured value its structured_output call recorded (required when
// structured). ok is false while the last turn is open.
func LogResult(events []session.Event, structured bool) (res subagent.Result, ok bool) {
	var end *session.TurnEnd
	for i := len(events) - 1; i >= 0 && end == nil; i-- {
		switch d := events[i].Data.(type) {
		case session.TurnEnd:
			end = &d
		case session.TurnStart:
			return subagent.Result{}, false
		}
	}
	if end == nil {
		return subagent.Result{}, false
	}
	res = subagent.LogOutcome(events)
	res.StopReason, res.Diagnostic = subagent.StopOf(*end)
	if v, ok := structuredValue(events); ok {
		res.Structured = v
	} else if structured && res.StopReason == subagent.Completed {
		res.StopReason, res.Diagnostic = subagent.Failed, "the child finished without calling structured_output"
	}
	return res, true
}

// structuredValue returns the arguments of the log's last structured_output
// call that succeeded.
func structuredValue(events []session.Event) (v any, ok bool) {
	args := map[string]string{} // call id → arguments, within a step
	for _, e := range events {
		switch d := e.Data.(type) {
		case session.ToolCall:
			if d.Name == StructuredTool {
				args[d.CallID] = d.Arguments
			}
		case session.ToolResult:
			a, found := args[d.Message.Source.CallID]
			if !found || d.Error != nil {
				continue
			}
			var val any
			if json.Unmarshal([]byte(a), &val) == nil {
				v, ok = val, true
			}
		case session.Step:
			clear(args)
		}
	}
	return v, ok
}
