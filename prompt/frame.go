package prompt

import "strings"

// The frame of a child's instructions. A delegating harness opens a child's
// first user message with the instructions meant for the child alone
// between these two lines, and puts the task after them; a reader of the
// message (a session listing, a test model) splits it with SplitChildTask.
const (
	ChildInstructionsOpen  = "<subagent-instructions>\n"
	ChildInstructionsClose = "\n</subagent-instructions>\n\n"
)

// FrameChildInstructions returns instructions in the frame of a child's
// instructions, ready to open its first user message.
func FrameChildInstructions(instructions string) string {
	return ChildInstructionsOpen + instructions + ChildInstructionsClose
}

// SplitChildTask splits the text of a user message (its blocks joined, as a
// model receives it) into a child's instructions and its task; ok is false,
// and task is the whole text, when the text does not open with framed
// instructions.
func SplitChildTask(text string) (instructions, task string, ok bool) {
	rest, found := strings.CutPrefix(text, ChildInstructionsOpen)
	if !found {
		return "", text, false
	}
	instructions, task, found = strings.Cut(rest, ChildInstructionsClose)
	if !found {
		return "", text, false
	}
	return instructions, task, true
}
