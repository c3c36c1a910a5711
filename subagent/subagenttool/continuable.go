package subagenttool

import (
	"context"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// Continuable instances.
//
// An instance whose children are continuable (Config.Continuable, by
// default when its provider can continue them and sessions outlive the
// process) starts each child with Service.StartContinuable and names the
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

// executeContinuable starts a continuable child for call.
func (t *instance) executeContinuable(ctx context.Context, parent *agent.Agent, req subagent.StartRequest, background bool) (tool.Result, error) {
	acc, err := t.deps.Subagents.StartContinuable(ctx, t.cfg.Provider, req, subagent.ContinuableOptions{Foreground: !background})
	if err != nil {
		return tool.Result{}, err
	}
	if background {
		return tool.TextResult(fmt.Sprintf("started subagent %s in the background; you will be told when it finishes. "+
			"send_message gives it more work, interrupt_agent stops its current turn.", acc.ChildID)), nil
	}
	// The call's cancellation interrupts the child's turn; the child then
	// settles aborted, and the wait returns.
	stop := context.AfterFunc(ctx, func() { t.deps.Subagents.Interrupt(parent, acc.ChildID) })
	defer stop()
	res, err := acc.Wait(context.WithoutCancel(ctx))
	if err != nil {
		return tool.Result{}, err
	}
	id := "[subagent " + acc.ChildID + "; send_message continues it]\n"
	if res.StopReason != subagent.Completed {
		return tool.ErrorResult(string(res.StopReason), id+Failure(res)), nil
	}
	text := content.JoinText(res.Output)
	if strings.TrimSpace(text) == "" {
		text = "(the subagent returned no text)"
	}
	return tool.TextResult(id + text), nil
}

// continuable resolves whether an instance on provider p starts
// continuable children.
func (m *mount) continuable(p subagent.Provider) (bool, error) {
	_, local := p.(subagent.Continuer)
	_, remote := p.(subagent.RemoteContinuer)
	can := local || remote
	switch {
	case m.cfg.Continuable == nil:
		return can && m.deps.Subagents.CanContinue(p.Name()), nil
	case !*m.cfg.Continuable:
		return false, nil
	case !can:
		return false, fmt.Errorf("subagent tool %s: provider %q cannot start continuable children; set continuable: false", m.cfg.ToolName, p.Name())
	}
	return true, nil
}
