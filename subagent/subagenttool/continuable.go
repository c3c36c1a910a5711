package subagenttool

import (
	"context"
	"fmt"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// Continuable instances.
//
// An instance whose children are continuable (Config.Continuable, by
// default when its provider can continue them and sessions outlive the
// process) starts each untyped child that has no worktree of its own
// with Service.StartContinuable (a typed or isolated child is one-shot) and
// names the
// child's id in its result, so that the model can send it more work
// (send_message), interrupt it or list it. A foreground call waits for the
// child's first settlement and returns its answer; a background call
// returns the id at once, and the child's settlement notice wakes the
// parent later. Unlike the reference, run_in_background still defaults to
// false: the default call form stays the one every other instance has, and
// the model opts into background work explicitly.

const (
	continuableWording = " The subagent keeps its conversation: the result names its id, and send_message gives it " +
		"more work later (it remembers everything it did)."
	continuableBackgroundWording = " Set run_in_background to true to start it and keep working: the call returns the " +
		"subagent's id at once, and you are told when it finishes (default false)."
)

// executeContinuable starts the continuable child of delegation d (an
// untyped one in the parent's working directory).
func (t *instance) executeContinuable(ctx context.Context, d *delegation) (tool.Result, error) {
	opts := subagent.ContinuableOptions{Foreground: !d.background}
	if d.background { // the foreground call ends it below, once it settles
		opts.Settled = func(res subagent.Result) { d.end(context.WithoutCancel(ctx), res) }
	}
	acc, err := t.deps.Subagents.StartContinuable(ctx, d.provider, d.req, opts)
	if err != nil {
		return tool.Result{}, err
	}
	if d.background {
		return tool.TextResult(fmt.Sprintf("started subagent %s in the background; you will be told when it finishes. "+
			"send_message gives it more work, interrupt_agent stops its current turn.", acc.ChildID)), nil
	}
	// The call's cancellation interrupts the child's turn; the child then
	// settles aborted, and the wait returns.
	stop := context.AfterFunc(ctx, func() { t.deps.Subagents.Interrupt(d.req.Parent, acc.ChildID) })
	defer stop()
	res, err := acc.Wait(context.WithoutCancel(ctx))
	if err != nil {
		return tool.Result{}, err
	}
	note := d.end(ctx, res)
	meta := runMeta(acc.ChildID, d.provider)
	res.Output = t.capOutput(res.Output, fmt.Sprintf("the whole answer is in the child's session %s: read it with `dsh sessions show %s`",
		acc.ChildID, acc.ChildID))
	id := "[subagent " + acc.ChildID + "; send_message continues it]\n"
	if res.StopReason != subagent.Completed {
		r := tool.ErrorResult(string(res.StopReason), id+Failure(res)+note)
		r.Meta = meta
		return r, nil
	}
	return tool.Result{Content: []content.Block{content.Text(id + outputText(res) + note)}, Meta: meta}, nil
}

// continuable resolves whether an instance on provider p starts
// continuable children.
func (m *mount) continuable(p subagent.Provider) (bool, error) {
	switch {
	case m.cfg.Continuable == nil:
		return m.deps.Subagents.CanContinue(p.Name()), nil
	case !*m.cfg.Continuable:
		return false, nil
	case !subagent.Continues(p):
		return false, fmt.Errorf("subagent tool %s: provider %q cannot start continuable children (an out-of-process product "+
			"needs the directory where it keeps conversations: codexHome, configDir); set continuable: false", m.cfg.ToolName, p.Name())
	}
	return true, nil
}
