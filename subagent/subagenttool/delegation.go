package subagenttool

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/worktree"
)

// delegation is one call's child: where it runs, what it is asked, and
// what surrounds its run (hooks, a worktree).
type delegation struct {
	follow
	provider   string
	req        subagent.StartRequest
	typ        string // the subagent_type, "" when untyped
	background bool
	isolation  string
}

// follow is what a delegation needs once its child started, to end it: a
// background child's settlement keeps a copy (32 B), not the delegation
// (240 B) with the request in it.
type follow struct {
	sub    *agent.Subagent // the child's type, provider, description and prompt
	parent *agent.Agent
	hooks  *hook.Set // the parent's, plus the type's: SubagentStart and SubagentStop
	wt     *worktree.Worktree
}

// following returns a copy of d's follow, for what outlives the call.
func (d *delegation) following() *follow {
	f := d.follow
	return &f
}

// delegation builds a call's child from the tool's settings, overlaid by
// the type's: a type on another provider than the tool's drops the tool's
// persona and options, which were written for its own provider, but keeps
// its tool filter, which no definition can lift.
func (t *instance) delegation(parent *agent.Agent, a args) (*delegation, error) {
	d := &delegation{follow: follow{parent: parent, hooks: parent.Hooks()}, provider: t.cfg.Provider, typ: a.SubagentType,
		isolation: a.Isolation, req: request(t.cfg, t.caps, parent, a.Description, a.Prompt)}
	if a.SubagentType != "" {
		def, ok := t.deps.Types.Get(a.SubagentType)
		if !ok {
			return nil, tool.Errorf(tool.CodeInvalidArgs, "unknown subagent_type %q; the types are: %s", a.SubagentType,
				strings.Join(t.deps.Types.Names(), ", "))
		}
		if err := d.apply(t, def); err != nil {
			return nil, err
		}
	}
	switch {
	case a.RunInBackground != nil:
		d.background = *a.RunInBackground
		if d.background && !*t.cfg.EnableRunInBackground {
			return nil, tool.Errorf(tool.CodeInvalidArgs, disabledMessage)
		}
	case d.background && !*t.cfg.EnableRunInBackground:
		d.background = false // the type's default gives way to the tool's
	}
	d.sub = &agent.Subagent{Type: d.typ, Provider: d.provider, Description: d.req.Label, Prompt: content.JoinText(d.req.Prompt)}
	d.req.Subagent = d.sub
	if d.isolation != "" && d.isolation != agentdef.IsolationWorktree {
		return nil, tool.Errorf(tool.CodeInvalidArgs, "isolation: want %q, got %q", agentdef.IsolationWorktree, d.isolation)
	}
	if d.background && !t.continuableFor(d) && !parent.Tools().Has(task.ToolOutput) {
		return nil, tool.Errorf(tool.CodeInvalidArgs, "run_in_background: this agent has no %s tool, so it could never read "+
			"a background subagent's result; no subagent was started. Call it again with run_in_background false, and it "+
			"returns the result itself", task.ToolOutput)
	}
	return d, nil
}

// continuableFor reports whether d runs as a continuable child, whose
// settlement reaches its parent as a notice (it needs no task_output). A
// tool host's children are one-shot: its client has no way to continue
// them, and no notice reaches it.
func (t *instance) continuableFor(d *delegation) bool {
	return t.continuable && d.typ == "" && d.isolation != agentdef.IsolationWorktree && !d.req.Parent.ToolHost()
}

// apply lays a definition over the request.
func (d *delegation) apply(t *instance, def *agentdef.Definition) error {
	req := &d.req
	moved := def.Provider != "" && def.Provider != d.provider
	if moved {
		d.provider = def.Provider
		req.AgentOptions, req.Persona = nil, nil
	}
	p, ok := t.deps.Subagents.Provider(d.provider)
	if !ok {
		return &subagent.Error{Code: subagent.CodeNoProvider, Provider: d.provider,
			Msg: fmt.Sprintf("provider %q of subagent_type %s is not registered", d.provider, def.Name)}
	}
	caps := p.Capabilities()
	if moved {
		req.MaxDepth = t.cfg.depthCap(caps)
		if req.ToolFilter != nil && !caps.ToolFilter {
			return &subagent.Error{Code: subagent.CodeUnsupportedCapability, Provider: d.provider,
				Msg: fmt.Sprintf("subagent_type %s runs on provider %q, which cannot restrict a child's tools, and tool %s has a toolFilter "+
					"that its children must keep: use another type, or give the definition a provider that filters tools", def.Name, d.provider, t.cfg.ToolName)}
		}
	}
	if def.Instructions != "" {
		if caps.Persona {
			req.Persona = &def.Instructions
		} else { // a provider without personas gets the instructions ahead of the task
			req.Prompt = slices.Concat([]content.Block{content.Text(def.Instructions + "\n\n")}, req.Prompt)
		}
	}
	if def.Tools != nil || len(def.DisallowedTools) > 0 {
		req.ToolFilter = narrowFilter(req.ToolFilter, tool.Restriction{Allow: def.Tools, Deny: def.DisallowedTools})
	}
	if def.Model != "" || def.MaxSteps != 0 {
		var o agent.Options
		if req.AgentOptions != nil {
			o = *req.AgentOptions
		}
		if def.Model != "" {
			o.Provider, o.Model = def.Model, ""
		}
		if def.MaxSteps != 0 {
			o.MaxSteps = def.MaxSteps
		}
		req.AgentOptions = &o
	}
	if def.OutputSchema != nil {
		req.OutputSchema = def.OutputSchema
	}
	req.Policy, req.Hooks = def.Policy, def.Hooks
	d.hooks = d.hooks.With(def.Hooks)
	d.background, d.isolation = def.Background, cmp.Or(d.isolation, def.Isolation)
	return nil
}

// narrowFilter returns a filter that hides what either hides: the allow
// lists intersect, the deny lists add up.
func narrowFilter(base *tool.Restriction, r tool.Restriction) *tool.Restriction {
	if base == nil {
		return &r
	}
	out := tool.Restriction{Allow: r.Allow, Deny: slices.Concat(base.Deny, r.Deny)}
	switch {
	case base.Allow == nil:
	case r.Allow == nil:
		out.Allow = base.Allow
	default:
		out.Allow = slices.DeleteFunc(slices.Clone(r.Allow), func(n string) bool { return !slices.Contains(base.Allow, n) })
	}
	return &out
}

// isolate gives the child a worktree of its own when it asks for one.
func (d *delegation) isolate(ctx context.Context, m *worktree.Manager) error {
	if d.isolation != agentdef.IsolationWorktree {
		return nil
	}
	if m == nil {
		return tool.Errorf(tool.CodeInvalidArgs, "worktree isolation is not available here")
	}
	parent := d.req.Parent
	if parent.Cwd() == "" {
		return tool.Errorf(tool.CodeInvalidArgs, "worktree isolation needs a working directory, and this agent has none")
	}
	wt, err := m.Create(ctx, parent.Cwd(), d.req.Label)
	if err != nil {
		return err
	}
	d.wt, d.req.Cwd = wt, wt.Dir
	return nil
}

// release ends a delegation whose child never started: its worktree is
// removed or kept. It returns a note for the model.
func (d *follow) release(ctx context.Context) string {
	if d.wt == nil {
		return ""
	}
	out, err := d.wt.Finish(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Sprintf("\n[worktree] %s on branch %s could not be cleaned up: %v", d.wt.Path, d.wt.Branch, err)
	}
	if !out.Kept {
		return ""
	}
	return "\n[worktree] " + out.String()
}

// end follows a settled child: its worktree is removed or kept, and the
// SubagentStop hooks run, observe only, unless the child ran them itself
// at the end of its turn (an in-process child, where they may continue
// it: see agent.Subagent). It returns a note for the model.
func (d *follow) end(ctx context.Context, res subagent.Result) string {
	note := d.release(ctx)
	if d.hooks.Has(hook.SubagentStop) && !d.sub.StopHooksRan() {
		in := d.hookInput(hook.SubagentStop)
		in.StopReason = string(res.StopReason)
		in.SetOutput(content.JoinText(res.Output))
		d.hooks.Run(context.WithoutCancel(ctx), in)
	}
	return note
}

// hookInput describes the child for the parent's subagent hooks.
func (d *follow) hookInput(ev hook.Event) hook.Input {
	in := d.parent.HookInput(ev)
	in.AgentID = "" // Claude Code's agent_id here is the child's, not yet known
	in.AgentType, in.Provider, in.Description, in.Prompt = d.sub.Type, d.sub.Provider, d.sub.Description, d.sub.Prompt
	return in
}
