package tui_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
	"github.com/dsh-go/dsh/session"
)

// The answer streams onto the screen while the turn runs, its reasoning
// folded into a thinking block that Ctrl+T unfolds; Esc interrupts the
// turn, and the next prompt continues the same session.
func TestStreamsInterruptsAndContinues(t *testing.T) {
	var requests atomic.Int32
	var second atomic.Value
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		requests.Add(1)
		if r.LastUser == "and now?" {
			second.Store(string(r.Body))
			return llmtest.Reply{Text: "The second answer."}
		}
		return llmtest.Reply{Reasoning: "weighing the options carefully", Text: "The first answer is streaming", Hang: true}
	}, "", 100, 30)

	s.send("first question")
	screen := s.term.WaitText("The first answer is streaming")
	if !strings.Contains(screen, "working") || !strings.Contains(screen, "▸ thinking") || strings.Contains(screen, "weighing the options") {
		t.Fatalf("while the answer streams, the turn should be working with its thinking folded:\n%s", screen)
	}
	s.term.Type(termtest.CtrlT)
	s.term.WaitText("weighing the options carefully")
	s.term.Type(termtest.CtrlT)
	s.term.WaitFor("the thinking folded again", func(s string) bool { return !strings.Contains(s, "weighing the options") })

	s.term.Type(termtest.Esc)
	s.term.WaitText("interrupted")
	s.term.WaitFor("the turn over", func(s string) bool { return strings.Contains(s, "ready") })

	s.send("and now?")
	s.term.WaitText("The second answer.")
	body, _ := second.Load().(string)
	if !strings.Contains(body, "first question") || !strings.Contains(body, "The first answer is streaming") {
		t.Errorf("the second request does not continue the conversation:\n%s", body)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}
	var ends []string
	for _, e := range s.agent.Session().Events() {
		if end, ok := e.Data.(session.TurnEnd); ok {
			ends = append(ends, end.Reason.Kind)
		}
	}
	if strings.Join(ends, ",") != "aborted,completed" {
		t.Errorf("the session's turns ended %v, want aborted then completed", ends)
	}
}

// A child's row appears in the live panel, its elapsed time advances while
// it works, and it ends with the reason it ended.
func TestChildRowTicksAndEndsWithItsReason(t *testing.T) {
	release := make(chan struct{})
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			<-release
			return llmtest.Reply{Status: 400, Body: `{"error":{"message":"the child's request is malformed","type":"invalid_request_error"}}`}
		case len(r.ToolResults) > 0:
			return llmtest.Reply{Text: "The child could not finish."}
		}
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"look around","prompt":"inspect the tree"}`}}
	}, "", 100, 30)
	defer close(release)

	s.send("delegate")
	running := regexp.MustCompile(`↳ spawn · look around · [0-9a-f]{8} · running (\d+)s`)
	first := running.FindStringSubmatch(s.term.WaitFor("the child's row", running.MatchString))
	s.term.WaitFor("the child's elapsed time advancing", func(screen string) bool {
		m := running.FindStringSubmatch(screen)
		return m != nil && atoi(m[1]) > atoi(first[1])
	})
	release <- struct{}{}
	screen := s.term.WaitText("The child could not finish.")
	ended := regexp.MustCompile(`↳ spawn · look around · [0-9a-f]{8} · error in \d+s: INVALID_REQUEST: deepseek: HTTP 400`)
	if !ended.MatchString(screen) {
		t.Fatalf("the child's end does not say why:\n%s", screen)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// oneShotSpawn makes the subagent tool's children one-shot: a background
// one runs as a task (subagent-1, …), read with /output.
const oneShotSpawn = `subagents:
  providers: [{name: spawn}]
  tools:
    - provider: spawn
      continuable: false
`

// A background child stays listed while it runs; /kill (Tab-completed)
// stops it, and its process group with it: a one-shot child's task by its
// id, a continuable child's turn by the child's short id.
func TestKillStopsABackgroundChild(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{{"task", oneShotSpawn}, {"continuable", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, func(r llmtest.Request) llmtest.Reply {
				switch {
				case r.Child && len(r.ToolResults) == 0:
					return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo $$ > sleeper.pid; exec sleep 1000"}`}}
				case r.Child:
					return llmtest.Reply{Text: "slept"}
				case r.LastUser == "start the sleeper" && len(r.ToolResults) == 0:
					return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
						Arguments: `{"description":"sleeper","prompt":"sleep","run_in_background":true}`}}
				}
				return llmtest.Reply{Text: "Noted."}
			}, tc.yaml, 100, 30)

			s.send("start the sleeper")
			pid := waitPID(t, filepath.Join(s.cwd, "sleeper.pid"))
			pgid, err := syscall.Getpgid(pid)
			if err != nil {
				t.Fatal(err)
			}
			running := regexp.MustCompile(`↳ spawn · sleeper · (subagent-1|[0-9a-f]{8}) · running`)
			handle := running.FindStringSubmatch(s.term.WaitFor("the sleeper's row", running.MatchString))[1]
			if (tc.name == "task") != (handle == "subagent-1") {
				t.Fatalf("a %s child is listed as %s", tc.name, handle)
			}

			s.term.Type("/ki" + termtest.Tab)
			s.term.WaitText("/kill ")
			s.term.Type(termtest.Tab)
			s.term.WaitText("/kill " + handle)
			s.term.Type(termtest.Enter)
			s.term.WaitText("Stopping " + handle + ".")
			deadline := time.Now().Add(termtest.Timeout)
			for syscall.Kill(-pgid, 0) != syscall.ESRCH {
				if time.Now().After(deadline) {
					t.Fatalf("the sleeper's process group %d outlived /kill", pgid)
				}
				time.Sleep(10 * time.Millisecond) // a real process: poll its group
			}
			s.term.WaitFor("the child ended and off the panel", func(screen string) bool {
				return strings.Contains(screen, "↳ spawn · sleeper · "+handle+" · aborted in") &&
					!strings.Contains(screen, "sleeper · "+handle+" · running") && !strings.Contains(screen, "stopping")
			})
		})
	}
}

// waitPID waits (bounded) for a file holding a process id.
func waitPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(termtest.Timeout)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s holds %q", path, b)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tool the policy asks about prompts inline, naming the agent that asks
// (a child by its label); denied, the tool does not run and the model is
// told.
func TestAskDeniedDoesNotRun(t *testing.T) {
	var told atomic.Value
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		switch n := len(r.ToolResults); {
		case r.Child && n == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"touch child-marker"}`}}
		case r.Child:
			return llmtest.Reply{Text: "child: " + r.ToolResults[0]}
		case n == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"helper","prompt":"touch it"}`}}
		case n == 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"touch root-marker"}`}}
		}
		told.Store(strings.Join(r.ToolResults, "\n"))
		return llmtest.Reply{Text: "All done."}
	}, "permissions:\n  tools:\n    bash: ask\n", 100, 30)

	s.send("touch the markers")
	screen := s.term.WaitText("wants to run bash")
	if !strings.Contains(screen, "helper wants to run bash") || !strings.Contains(screen, "touch child-marker") ||
		!strings.Contains(screen, "y allow once · a allow bash: this tool, this tree, this session · n deny") {
		t.Fatalf("the child's request does not name the child, its call and the choices:\n%s", screen)
	}
	s.term.Type("n")
	s.term.WaitText("the main agent wants to run bash")
	s.term.Type("n")
	s.term.WaitText("All done.")
	for _, f := range []string{"child-marker", "root-marker"} {
		if _, err := os.Stat(filepath.Join(s.cwd, f)); !os.IsNotExist(err) {
			t.Errorf("%s exists: a denied call ran", f)
		}
	}
	results, _ := told.Load().(string)
	if strings.Count(results, "the user rejected this call of bash") != 2 {
		t.Errorf("the model was not told of both refusals:\n%s", results)
	}
}

// Resizing redraws the whole screen at the new size: one status line at
// the bottom, one editor box as wide as the window, and the answer whole,
// re-wrapped, with nothing of the old layout left.
func TestResizeKeepsTheScreenWhole(t *testing.T) {
	var words []string
	for i := range 60 {
		words = append(words, fmt.Sprintf("word%02d", i))
	}
	answer := strings.Join(words, " ")
	s := start(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: answer} }, "", 100, 30)
	s.send("say many words")
	s.term.WaitText("word59")
	whole(t, s.term, 100, 30, words)
	for _, size := range [][2]int{{50, 20}, {120, 40}, {30, 12}, {100, 30}} {
		s.resize(size[0], size[1])
		whole(t, s.term, size[0], size[1], words)
	}
}

// whole waits for the screen to be laid out at width × height, with its
// parts once each and the words of the answer in order. It waits for the
// whole layout, not only the editor box: a screen read while a frame is
// still being written may hold the new box over the old transcript.
func whole(t *testing.T, term *termtest.Term, width, height int, words []string) {
	t.Helper()
	term.WaitFor(fmt.Sprintf("the layout at %d×%d whole (box, status line, the answer's end)", width, height), func(screen string) bool {
		return layoutProblem(screen, width, height, words) == ""
	})
}

// layoutProblem says what is wrong with screen as the layout at width ×
// height holding the end of the answer words, or "" when nothing is.
func layoutProblem(screen string, width, height int, words []string) string {
	rows := lines(screen)
	top := -1
	for i, row := range rows {
		if strings.HasPrefix(row, "╭") {
			top = i
			break
		}
	}
	if top < 0 || ansi.StringWidth(rows[top]) != width {
		return "the editor box is not laid out at this width"
	}
	if len(rows) != height || strings.Count(screen, "╭") != 1 || strings.Count(screen, "╰") != 1 ||
		top+2 >= len(rows) || !strings.HasPrefix(rows[top+2], "╰") || ansi.StringWidth(rows[top+2]) != width {
		return "the editor box is not whole and alone"
	}
	status := 0
	for _, row := range rows {
		if strings.HasPrefix(row, " deepseek/deepseek-flash ·") {
			status++
		}
	}
	if !strings.HasPrefix(rows[height-1], " deepseek/deepseek-flash ·") || status != 1 {
		return "the status line is not the last row, once"
	}
	// The transcript shows its end: the answer's last words, in order,
	// as many as fit.
	var seen []string
	for _, w := range strings.Fields(strings.Join(rows[:top], " ")) {
		if len(w) == 6 && strings.HasPrefix(w, "word") && w != "words" {
			seen = append(seen, w)
		}
	}
	if len(seen) == 0 || len(seen) > len(words) || !slices.Equal(seen, words[len(words)-len(seen):]) {
		return fmt.Sprintf("the answer is not whole (%v)", seen)
	}
	return ""
}
