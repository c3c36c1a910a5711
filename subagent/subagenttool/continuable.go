package subagenttool

import (
	"fmt"

	"github.com/dsh-go/dsh/subagent"
)

// Continuable instances.
//
// An instance whose children are continuable (Config.Continuable, by
// default when its provider can continue them and sessions outlive the
// process) delegates each untyped child that has no worktree of its own
// as a continuable one (a typed or isolated child is one-shot) and names
// the child's id in its result, so that the model can send it more work
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
