package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
)

// tuiSession is dsh running interactively on a pseudo-terminal against a
// loopback model.
type tuiSession struct {
	t    *testing.T
	cmd  *exec.Cmd
	term *termtest.Term
	home string // $DSH_HOME (and $HOME)
	dir  string // the working directory
	url  string // the model's base URL
}

// tuiEnv is the environment of a dsh on a terminal.
func (s *tuiSession) env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.home, "DSH_HOME=" + s.home, "TERM=xterm-256color",
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + s.url}
}

// startTUI starts dsh with args in a new directory (files written there
// first) on a width × height terminal, and waits for its status line.
func startTUI(t *testing.T, reply func(llmtest.Request) llmtest.Reply, files map[string]string, width, height int, args ...string) *tuiSession {
	t.Helper()
	srv := llmtest.NewServer(t, reply)
	s := &tuiSession{t: t, home: t.TempDir(), dir: t.TempDir(), url: srv.URL}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.run(width, height, args...)
	return s
}

// run starts dsh with args on a new terminal, in s's directory and home.
func (s *tuiSession) run(width, height int, args ...string) {
	s.t.Helper()
	s.term = termtest.New(s.t, width, height)
	s.cmd = exec.Command(dshBinary, args...)
	s.cmd.Dir, s.cmd.Env = s.dir, s.env()
	if err := s.term.Start(s.cmd); err != nil {
		s.t.Fatal(err)
	}
	cmd := s.cmd
	s.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s.term.WaitText("ctrl+c twice exits")
}

// send types a prompt and Enter.
func (s *tuiSession) send(prompt string) {
	s.term.Type(prompt)
	s.term.WaitText(prompt)
	s.term.Type(termtest.Enter)
}

// exit leaves with Ctrl-C twice and returns the screen after, with the
// session's id.
func (s *tuiSession) exit() (screen, id string) {
	s.t.Helper()
	s.term.Type(termtest.CtrlC)
	s.term.WaitText("Press Ctrl-C again")
	s.term.Type(termtest.CtrlC)
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("dsh exited with %v:\n%s", err, s.term.Screen())
	}
	screen = s.term.WaitText("Continue it with: dsh -r ")
	m := regexp.MustCompile(`Continue it with: dsh -r ([0-9a-f-]{36})`).FindStringSubmatch(screen)
	if m == nil {
		s.t.Fatalf("no session id on the exit line:\n%s", screen)
	}
	return screen, m[1]
}

// A transcript to read: bash's command and output, an edit's diff (in the
// ask box, asked by default, and after the call), Markdown rendered; and
// after the exit the conversation stays on the main screen, with the
// command that continues it.
func TestTUIViewToolsDiffMarkdownAndScrollback(t *testing.T) {
	s := startTUI(t, func(r llmtest.Request) llmtest.Reply {
		switch len(r.ToolResults) {
		case 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"printf 'out%d\\n' 1 2 3 4 5 6 7 8 9"}`}}
		case 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "edit_file", Arguments: `{"path":"notes.txt","old_string":"beta\n","new_string":"gamma\n"}`}}
		}
		return llmtest.Reply{Text: "# Summary Heading\n\nThe edit is **done**:\n\n```go\nfunc main() {}\n```\n"}
	}, map[string]string{"notes.txt": "alpha\nbeta\ndelta\n"}, 100, 40)
	s.send("edit the notes")

	// bash asks by default; the box shows the command, not JSON.
	screen := s.term.WaitText("the main agent wants to run bash")
	if !strings.Contains(screen, "$ printf 'out%d\\n' 1 2 3 4 5 6 7 8 9") || strings.Contains(screen, `{"command"`) ||
		!strings.Contains(screen, "a allow bash: this tool, this tree, this session") {
		t.Fatalf("the ask box does not show the command and what a means:\n%s", screen)
	}
	s.term.Type("y")
	// The output's tail, folded, with the key that expands it.
	screen = s.term.WaitText("the main agent wants to run edit_file")
	if !strings.Contains(screen, "out9") || strings.Contains(screen, "out2") || !strings.Contains(screen, "more lines (ctrl+o expands)") {
		t.Fatalf("bash's output tail is not shown folded:\n%s", screen)
	}
	if !regexp.MustCompile(`(?m)^\s*-beta\s*(│)?$`).MatchString(screen) || !regexp.MustCompile(`(?m)^\s*\+gamma`).MatchString(screen) ||
		strings.Contains(screen, "old_string") {
		t.Fatalf("the ask box does not show the edit as a diff:\n%s", screen)
	}
	s.term.Type("y")
	screen = s.term.WaitFor("the answer", func(s string) bool {
		return strings.Contains(s, "Summary Heading") && strings.Contains(s, "func main() {}") && strings.Contains(s, "· ready ")
	})
	if strings.Contains(screen, "# Summary") || strings.Contains(screen, "**done**") || strings.Contains(screen, "```") ||
		!strings.Contains(screen, "func main() {}") {
		t.Fatalf("the answer's Markdown is not rendered:\n%s", screen)
	}
	if !regexp.MustCompile(`(?m)^\s+\+gamma`).MatchString(screen) || !strings.Contains(screen, "● edit_file notes.txt") {
		t.Fatalf("the transcript does not keep the edit's diff:\n%s", screen)
	}
	s.term.Type("\x0f") // ctrl+o: the whole output
	s.term.WaitFor("the output expanded", func(s string) bool { return strings.Contains(s, "out2") })

	screen, _ = s.exit()
	if s.term.AltScreen() || !strings.Contains(screen, "Summary Heading") || !strings.Contains(screen, "› edit the notes") {
		t.Fatalf("the conversation is not left on the main screen:\n%s", screen)
	}
	if got, _ := os.ReadFile(filepath.Join(s.dir, "notes.txt")); string(got) != "alpha\ngamma\ndelta\n" {
		t.Fatalf("notes.txt holds %q", got)
	}
}

// One resume: bare dsh takes chat's flags and a first prompt; dsh -r ID,
// dsh -c and dsh chat --resume ID open the stored conversation with its
// transcript and tokens.
func TestTUIViewResumeShowsTheConversation(t *testing.T) {
	var models sync.Map
	s := startTUI(t, func(r llmtest.Request) llmtest.Reply {
		models.Store(r.Model, true)
		return llmtest.Reply{Text: "Hello back, " + r.LastUser + "."}
	}, nil, 100, 30, "-m", "deepseek-v4-pro", "say hello")
	s.term.WaitText("Hello back, say hello.")
	if _, ok := models.Load("deepseek-v4-pro"); !ok || !strings.Contains(s.term.Screen(), "deepseek/deepseek-v4-pro") {
		t.Fatalf("dsh -m did not choose the model:\n%s", s.term.Screen())
	}
	_, id := s.exit()
	for _, args := range [][]string{{"-r", id[:8]}, {"-c"}, {"chat", "--resume", id}, {"chat", "--continue"}} {
		s.run(100, 30, args...)
		screen := s.term.WaitText("Hello back, say hello.")
		if !strings.Contains(screen, "› say hello") || strings.Contains(screen, " 0 tokens") || !strings.Contains(screen, "session "+id) {
			t.Fatalf("dsh %v does not show the stored conversation and its tokens:\n%s", args, screen)
		}
		s.exit()
	}
}

// A lone word after bare dsh is taken for a mistyped command, not sent to
// the model.
func TestBareDshRefusesAMistypedCommand(t *testing.T) {
	_, _, err := runCLI(t, nil, "sesions")
	if err == nil || !strings.Contains(err.Error(), `unknown command "sesions"`) || !strings.Contains(err.Error(), `did you mean "sessions"`) {
		t.Fatalf("dsh sesions: %v", err)
	}
}

// Children you can open: Tab selects a child's row, Enter opens its
// transcript (its tool call and answer, not the conversation's), Esc
// returns; /agents lists the children and /agents N opens one.
func TestTUIViewOpensAChildTranscript(t *testing.T) {
	s := startTUI(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}
		case r.Child:
			return llmtest.Reply{Text: "Child found: alpha."}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"helper","prompt":"read the notes"}`}}
		}
		return llmtest.Reply{Text: "Parent done."}
	}, map[string]string{"notes.txt": "alpha\n"}, 100, 30)
	s.send("delegate it")
	s.term.WaitFor("the turn's end", func(s string) bool { return strings.Contains(s, "Parent done.") && strings.Contains(s, "· ready ") })
	s.term.Type(termtest.Tab)
	s.term.WaitText("Enter opens spawn · helper's transcript")
	s.term.Type(termtest.Enter)
	screen := s.term.WaitText("a child's transcript · esc returns")
	if !strings.Contains(screen, "Child found: alpha.") || !strings.Contains(screen, "read_file notes.txt") ||
		!strings.Contains(screen, "read the notes") || strings.Contains(screen, "Parent done.") {
		t.Fatalf("the child's transcript is not shown alone:\n%s", screen)
	}
	s.term.Type(termtest.Esc)
	s.term.WaitFor("the conversation back", func(s string) bool {
		return strings.Contains(s, "Parent done.") && !strings.Contains(s, "a child's transcript")
	})
	s.send("/agents")
	s.term.WaitText("1 ")
	screen = s.term.WaitText("helper · inactive")
	if !regexp.MustCompile(`(?m)^\s*1 [0-9a-f]{8} · \w+ · helper`).MatchString(screen) {
		t.Fatalf("/agents does not list the child:\n%s", screen)
	}
	s.send("/agents 1")
	screen = s.term.WaitText("a child's transcript · esc returns")
	if !strings.Contains(screen, "Child found: alpha.") {
		t.Fatalf("/agents 1 does not open the child:\n%s", screen)
	}
	s.term.Type(termtest.Esc)
	s.term.WaitFor("the conversation back", func(s string) bool { return !strings.Contains(s, "a child's transcript") })

	// Resumed, the conversation lists its stored children, and one opens.
	_, id := s.exit()
	s.run(100, 30, "-r", id)
	screen = s.term.WaitText("Children of this session:")
	if !regexp.MustCompile(`(?m)^\s+[0-9a-f]{8} · \w+ · helper · inactive`).MatchString(screen) || !strings.Contains(screen, "Parent done.") {
		t.Fatalf("the resumed conversation does not list its child:\n%s", screen)
	}
	short := regexp.MustCompile(`(?m)^\s+([0-9a-f]{8}) · \w+ · helper`).FindStringSubmatch(screen)[1]
	s.send("/output " + short)
	screen = s.term.WaitText("(/agents opens its whole transcript)")
	if !strings.Contains(screen, "helper · inactive\nChild found: alpha.\n(/agents opens") {
		t.Fatalf("/output does not read the stored child's last answer:\n%s", screen)
	}
	s.send("/agents 1")
	screen = s.term.WaitText("a child's transcript · esc returns")
	if !strings.Contains(screen, "Child found: alpha.") {
		t.Fatalf("the stored child does not open:\n%s", screen)
	}
}

// A background continuable child is listed by /tasks and read by /output;
// /kill stops it without a call to the model; a child's notice that opens
// a turn is marked.
func TestTUIViewBackgroundChildren(t *testing.T) {
	var parentCalls atomic.Int32
	s := startTUI(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && strings.Contains(r.LastUser, "hang"):
			return llmtest.Reply{Text: "child partial", Hang: true}
		case r.Child:
			return llmtest.Reply{Text: "quick result", Delay: 300 * time.Millisecond}
		}
		n := parentCalls.Add(1)
		switch {
		case strings.Contains(r.LastUser, "start the slow one") && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"slowbg","prompt":"hang please","run_in_background":true}`}}
		case strings.Contains(r.LastUser, "start the quick one") && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"quickbg","prompt":"say done","run_in_background":true}`}}
		}
		return llmtest.Reply{Text: fmt.Sprintf("Parent answer %d.", n)}
	}, nil, 120, 36)
	s.send("start the slow one")
	screen := s.term.WaitFor("the child running", func(s string) bool {
		return regexp.MustCompile(`slowbg · [0-9a-f]{8} · running`).MatchString(s) && strings.Contains(s, "· ready ")
	})
	short := regexp.MustCompile(`slowbg · ([0-9a-f]{8}) · running`).FindStringSubmatch(screen)[1]
	s.send("/tasks")
	screen = s.term.WaitText("Continuable children")
	if !strings.Contains(screen, "slowbg · "+short) || strings.Contains(screen, "No background tasks") {
		t.Fatalf("/tasks does not list the background child:\n%s", screen)
	}
	s.send("/output " + short)
	s.term.WaitText("(no answer yet)")
	// Its live transcript opens while it runs.
	s.term.Type(termtest.Tab)
	s.term.WaitText("Enter opens spawn · slowbg's transcript")
	s.term.Type(termtest.Enter)
	screen = s.term.WaitText("a child's transcript · esc returns")
	if !strings.Contains(screen, "hang please") || !strings.Contains(screen, "child partial") {
		t.Fatalf("the running child's transcript:\n%s", screen)
	}
	s.term.Type(termtest.Esc)
	s.term.WaitFor("the conversation back", func(s string) bool { return !strings.Contains(s, "a child's transcript") })
	before := parentCalls.Load()
	s.send("/kill " + short)
	s.term.WaitText("Stopping " + short)
	s.term.WaitFor("the child stopped", func(s string) bool { return strings.Contains(s, "slowbg · "+short+" · aborted") })
	time.Sleep(time.Second)
	if n := parentCalls.Load(); n != before {
		t.Fatalf("/kill on a child called the model %d more times:\n%s", n-before, s.term.Screen())
	}

	s.send("/clear")
	s.send("start the quick one")
	screen = s.term.WaitText("◆ a notice opened this turn")
	_ = screen
}

// The editor and the commands: every line of a multi-line prompt shows; a
// slash menu with descriptions appears on /; /model ROUTE switches the
// next turn's model and refuses an unknown route with the list; the
// context gauge; /permissions, /mcp, /clear; the history outlives the
// session (a file of mode 0600) and Ctrl+R searches it.
func TestTUIViewEditorAndCommands(t *testing.T) {
	var models sync.Map
	s := startTUI(t, func(r llmtest.Request) llmtest.Reply {
		models.Store(r.Model, true)
		return llmtest.Reply{Text: "ok"}
	}, nil, 100, 36)
	s.term.Type("first" + termtest.AltEnter + "second" + termtest.AltEnter + "third")
	s.term.WaitFor("three lines in the editor", func(screen string) bool {
		return regexp.MustCompile(`│› first\s+│\n│  second\s+│\n│  third\s+│`).MatchString(screen)
	})
	s.term.Type(termtest.Enter)
	s.term.WaitFor("the answer and the gauge", func(s string) bool { return strings.Contains(s, "context ") && strings.Contains(s, "· ready ") })

	s.term.Type("/")
	screen := s.term.WaitText("start a new conversation")
	if !strings.Contains(screen, "/model [ROUTE]") || !strings.Contains(screen, "/agents [N]") {
		t.Fatalf("the slash menu does not list the commands with what they do:\n%s", screen)
	}
	s.term.Type("mo")
	s.term.WaitFor("the menu narrowed", func(s string) bool {
		return strings.Contains(s, "/model [ROUTE]") && !strings.Contains(s, "start a new conversation")
	})
	s.term.Type("del nope" + termtest.Enter)
	s.term.WaitText("✗ /model: no route nope; the configured routes: ")
	s.send("/model deepseek/deepseek-v4-pro")
	s.term.WaitText("Model: deepseek/deepseek-v4-pro (the next turn runs on it)")
	s.send("next")
	s.term.WaitFor("the answer on the new model", func(screen string) bool {
		_, ok := models.Load("deepseek-v4-pro")
		return ok && strings.Contains(screen, " deepseek/deepseek-v4-pro · ") && strings.Contains(screen, "· ready ")
	})
	s.send("/permissions")
	s.term.WaitText("bash: ask (the interactive default)")
	s.send("/mcp")
	s.term.WaitText("No MCP servers configured")
	s.send("/clear")
	screen = s.term.WaitText("New conversation · session ")
	if strings.Contains(screen, "› next") {
		t.Fatalf("/clear kept the old transcript:\n%s", screen)
	}
	s.exit()

	fi, err := os.Stat(filepath.Join(s.home, "history"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the history file: %v %v", fi, err)
	}
	s.run(100, 36)
	s.term.Type(termtest.Up)
	s.term.WaitFor("the last prompt recalled", func(screen string) bool { return strings.Contains(screen, "│› /clear") })
	s.term.Type("\x15\x0b") // clear the line
	s.term.Type("\x12fir")  // ctrl+r
	s.term.WaitText(`(reverse search) "fir": first ⏎ second ⏎ third`)
	s.term.Type(termtest.Enter)
	s.term.WaitFor("the match in the editor", func(screen string) bool {
		return regexp.MustCompile(`│› first\s+│\n│  second\s+│\n│  third\s+│`).MatchString(screen)
	})
}

// Retries of a model call update one line instead of adding one each.
func TestTUIViewOneRetryLine(t *testing.T) {
	var calls atomic.Int32
	s := startTUI(t, func(r llmtest.Request) llmtest.Reply {
		if calls.Add(1) <= 2 {
			return llmtest.Reply{Status: 500, Body: `{"error":{"message":"overloaded","type":"server_error"}}`}
		}
		return llmtest.Reply{Text: "Recovered."}
	}, nil, 100, 30)
	s.send("hello")
	screen := s.term.WaitFor("the answer", func(s string) bool { return strings.Contains(s, "Recovered.") && strings.Contains(s, "· ready ") })
	if n := strings.Count(screen, "retrying in "); n != 1 || !strings.Contains(screen, "(2/") {
		t.Fatalf("%d retry lines, want one updated to the second retry:\n%s", n, screen)
	}
}

// Keys typed at once reach the prompt on a terminal that answers no query
// (no background colour, no cursor position).
func TestTUIViewTypedInputSurvivesASilentTerminal(t *testing.T) {
	got := make(chan string, 4)
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		got <- r.LastUser
		return llmtest.Reply{Text: "ok"}
	})
	home := t.TempDir()
	cmd := exec.Command(dshBinary)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "TERM=xterm-256color",
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); tty.Close() })
	var out bytes.Buffer
	var outMu sync.Mutex
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			outMu.Lock()
			out.Write(buf[:n])
			outMu.Unlock()
			if err != nil {
				return
			}
		}
	}() // a terminal that shows, and never answers
	tty.Write([]byte("typed at once"))
	time.Sleep(2 * time.Second)
	tty.Write([]byte("\r"))
	select {
	case prompt := <-got:
		if prompt != "typed at once" {
			t.Fatalf("the model got %q", prompt)
		}
	case <-time.After(30 * time.Second):
		outMu.Lock()
		defer outMu.Unlock()
		t.Fatalf("the prompt typed at once never reached the model; the terminal got:\n%q", out.String())
	}
}

// Without a terminal, bare dsh's prompt is the first turn, before stdin's.
func TestBareDshPromptWithoutATerminal(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "Answer to " + r.LastUser + "."} })
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLIWithStdin(t, env, "then this\n", "-m", "deepseek-v4-pro", "first this")
	if err != nil || !strings.Contains(out, "Answer to first this.") || !strings.Contains(out, "Answer to then this.") ||
		strings.Index(out, "first this") > strings.Index(out, "then this") {
		t.Fatalf("dsh \"first this\": %v\n%s\n%s", err, out, errOut)
	}
}
