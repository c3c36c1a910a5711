package prompt_test

import (
	"testing"

	"github.com/dsh-go/dsh/prompt"
)

// A framed message splits back into its instructions and its task; a text
// that does not open with a whole frame is all task.
func TestSplitChildTask(t *testing.T) {
	framed := prompt.FrameChildInstructions("You are a subagent.\nBe brief.") + "count the files"
	instr, task, ok := prompt.SplitChildTask(framed)
	if !ok || instr != "You are a subagent.\nBe brief." || task != "count the files" {
		t.Fatalf("SplitChildTask(%q) = %q, %q, %v", framed, instr, task, ok)
	}
	if instr, task, ok := prompt.SplitChildTask(prompt.FrameChildInstructions("x")); !ok || instr != "x" || task != "" {
		t.Fatalf("an empty task: %q, %q, %v", instr, task, ok)
	}
	for _, text := range []string{
		"",
		"count the files",
		"  " + framed, // the frame must open the message
		prompt.ChildInstructionsOpen + "never closed",
		"before " + prompt.FrameChildInstructions("x") + "after",
	} {
		if instr, task, ok := prompt.SplitChildTask(text); ok || instr != "" || task != text {
			t.Errorf("SplitChildTask(%q) = %q, %q, %v; want the whole text as task", text, instr, task, ok)
		}
	}
}
