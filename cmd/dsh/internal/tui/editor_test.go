package tui_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
)

// The editor takes a prompt of several lines (Alt+Enter, Shift+Enter as
// xterm reports it, Ctrl+J, a trailing backslash), Enter sends it whole,
// and Up and Down browse the prompts sent, back to the draft.
func TestEditorLinesAndHistory(t *testing.T) {
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "got: " + strings.ReplaceAll(r.LastUser, "\n", "|")}
	}, "", 100, 30)
	s.term.Type("line one" + termtest.AltEnter + "line two" + termtest.ShiftEnter + "line three" + "\n" + `line four\`)
	s.term.WaitText(`line four\`)
	s.term.Type(termtest.Enter + "line five")
	s.term.WaitText("line five")
	s.term.Type(termtest.Enter)
	s.term.WaitText("got: line one|line two|line three|line four|line five")

	s.send("short one")
	s.term.WaitText("got: short one")
	s.term.Type("my draft" + termtest.Up)
	s.term.WaitFor("the last prompt recalled", func(screen string) bool { return editor(screen) == "short one" })
	s.term.Type(termtest.Up)
	s.term.WaitFor("the prompt before, whole", func(screen string) bool { return strings.HasPrefix(editor(screen), "line one") })
	s.term.Type(termtest.Down + termtest.Down + termtest.Down + termtest.Down + termtest.Down)
	s.term.WaitFor("the draft back", func(screen string) bool { return editor(screen) == "my draft" })
}

// editor returns the first line of the editor box's text.
func editor(screen string) string {
	rows := lines(screen)
	for i, row := range rows {
		if strings.HasPrefix(row, "╭") && i+1 < len(rows) {
			return strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(rows[i+1], "│"), "›"), "│"))
		}
	}
	return ""
}

// The slash commands, Tab completing them; a prompt that starts with two
// slashes is sent with one.
func TestSlashCommands(t *testing.T) {
	s := start(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "model saw " + r.LastUser} }, "", 100, 40)
	s.term.Type("/he" + termtest.Tab)
	s.term.WaitFor("/help completed", func(screen string) bool { return editor(screen) == "/help" })
	s.term.Type(termtest.Enter)
	s.term.WaitText("Commands (a menu shows them as you type /; Tab completes):")
	s.term.WaitText("/kill ID")
	for cmd, want := range map[string]string{
		"/model":       "Model: deepseek/deepseek-flash",
		"/model nope":  "no route nope; the configured routes:",
		"/cost":        "Nothing spent yet.",
		"/tasks":       "No background tasks.",
		"/output nope": "unknown task nope",
		"/kill":        "/kill needs id: /kill ID",
		"/resume abc":  "/resume is not available here",
		"/sessions":    "/sessions is not available here",
		"/bogus":       "unknown command /bogus",
	} {
		s.send(cmd)
		s.term.WaitText(want)
	}
	s.term.Type("/s" + termtest.Tab)
	s.term.WaitText("sessions") // one candidate: filled in
	s.term.Type(termtest.CtrlC) // clears the editor (and arms the exit)
	s.term.Type("/" + termtest.Tab)
	s.term.WaitText("tasks output kill agents clear new") // several: listed
	s.term.Type(termtest.CtrlC + "x")
	s.term.WaitFor("an empty editor", func(screen string) bool { return editor(screen) == "x" })
	s.term.Type("\x7f")
	s.send("//slash prompt")
	s.term.WaitText("model saw /slash prompt")
	s.send("/cost")
	s.term.WaitText("tokens in 3 (0 cached) out 2, children included")
}

// Ctrl+D on an empty editor leaves, as /exit does.
func TestCtrlDAndExitLeave(t *testing.T) {
	for _, keys := range []string{termtest.CtrlD, "/exit" + termtest.Enter} {
		s := start(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hi"} }, "", 80, 24)
		s.term.Type(keys)
		if err := <-s.done; err != nil {
			t.Fatalf("%q: Run: %v", keys, err)
		}
		s.ended = true
	}
}

// An ask answered "allow for this session" lets later calls of the same
// tool run without asking again.
func TestAskAllowedForTheSession(t *testing.T) {
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		switch len(r.ToolResults) {
		case 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"touch first"}`}}
		case 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"touch second"}`}}
		}
		return llmtest.Reply{Text: "Both ran."}
	}, "permissions:\n  tools:\n    bash: ask\n", 100, 30)
	s.send("touch twice")
	s.term.WaitText("the main agent wants to run bash")
	s.term.Type("a")
	s.term.WaitText("Both ran.")
	screen := s.term.Screen()
	if strings.Count(screen, "allowed bash for this session, in the whole tree") != 1 || strings.Contains(screen, "wants to run") {
		t.Fatalf("the second call asked again, or the answer is not shown:\n%s", screen)
	}
	for _, f := range []string{"first", "second"} {
		if _, err := os.Stat(filepath.Join(s.cwd, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A background child stays on the panel after it completed, until its
// output is read (/output), which shows it.
func TestBackgroundChildStaysUntilRead(t *testing.T) {
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			return llmtest.Reply{Text: "the background result"}
		case r.LastUser == "start it" && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"bgjob","prompt":"work","run_in_background":true}`}}
		}
		return llmtest.Reply{Text: "Noted."}
	}, oneShotSpawn, 100, 30)
	s.send("start it")
	row := "↳ spawn · bgjob · subagent-1 · completed in"
	s.term.WaitFor("the completed child on the panel and in the transcript", func(screen string) bool {
		return strings.Count(screen, row) == 2
	})
	s.send("/tasks")
	s.term.WaitText("subagent-1 · bgjob · completed")
	s.send("/output subagent-1")
	screen := s.term.WaitText("the background result")
	if !strings.Contains(screen, "subagent-1 completed") {
		t.Fatalf("/output does not say how the task ended:\n%s", screen)
	}
	s.term.WaitFor("the row off the panel", func(screen string) bool { return strings.Count(screen, row) == 1 })
}
