package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
)

// Bare dsh on a terminal is the interactive mode; leaving it (Ctrl-C
// twice) gives the terminal back and prints the session id, and the
// session is stored.
func TestBareDshOnATerminalIsInteractive(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "Hello back, " + r.LastUser + "."} })
	home := t.TempDir()
	term := termtest.New(t, 100, 30)
	dsh := exec.Command(dshBinary)
	dsh.Dir = t.TempDir()
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "TERM=xterm-256color",
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	if err := term.Start(dsh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dsh.Process.Kill(); dsh.Wait() })
	term.WaitText("ctrl+c twice exits")
	term.Type("hi there")
	term.WaitText("hi there")
	term.Type(termtest.Enter)
	term.WaitText("Hello back, hi there.")
	term.Type("/sessions" + termtest.Enter)
	term.WaitFor("this session listed", func(s string) bool {
		return regexp.MustCompile(`(?m)^[0-9a-f]{8}\s+just now\s+completed\s+in 3 \(0 cached\) out 2\s+hi there$`).MatchString(s)
	})
	term.Type(termtest.CtrlC)
	term.WaitText("Press Ctrl-C again to exit")
	term.Type(termtest.CtrlC)
	if err := dsh.Wait(); err != nil {
		t.Fatalf("dsh exited with %v:\n%s", err, term.Screen())
	}
	screen := term.WaitText("[session ")
	id := regexp.MustCompile(`\[session ([0-9a-f-]{36}) · tokens in \d+`).FindStringSubmatch(screen)
	if id == nil || strings.Contains(screen, "ctrl+c twice exits") {
		t.Fatalf("after the interactive mode the terminal should show the session line alone:\n%s", screen)
	}
	out, _, err := runCLI(t, map[string]string{"DSH_HOME": home}, "sessions", "show", id[1])
	if err != nil || !strings.Contains(out, "user: hi there") || !strings.Contains(out, "assistant: Hello back, hi there.") {
		t.Fatalf("sessions show %s: %v\n%s", id[1], err, out)
	}
}

// A signal ends the interactive mode as it ends dsh run: the terminal is
// given back, the session line printed, and the exit status says which.
func TestInteractiveModeEndsOnSIGTERM(t *testing.T) {
	dsh, term := chatMidAnswer(t)
	dsh.Process.Signal(syscall.SIGTERM)
	var exit *exec.ExitError
	if err := dsh.Wait(); !errors.As(err, &exit) || exit.ExitCode() != exitTerm {
		t.Fatalf("dsh exited with %v, want status %d", err, exitTerm)
	}
	screen := term.WaitText("[session ")
	if strings.Contains(screen, "ctrl+c twice exits") {
		t.Fatalf("the interactive screen is still up:\n%s", screen)
	}
}

// Without a terminal, dsh chat (and bare dsh) reads one prompt per line of
// stdin, a trailing backslash continuing a prompt, all in one session.
func TestChatReadsPromptsFromStdin(t *testing.T) {
	var mu sync.Mutex
	var prompts []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		prompts = append(prompts, r.LastUser)
		return llmtest.Reply{Text: fmt.Sprintf("answer %d.", len(prompts))}
	})
	for _, args := range [][]string{{"chat"}, {}} {
		mu.Lock()
		prompts = nil
		mu.Unlock()
		var out, errOut bytes.Buffer
		env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
		root := newRoot(strings.NewReader("first question\n\nsecond \\\nand more\n"), &out, &errOut, func(k string) string { return env[k] })
		root.SetArgs(append(args, "--cwd", t.TempDir()))
		if len(args) == 0 {
			root.SetArgs(nil) // bare dsh takes no flags of chat's
		}
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("dsh %v: %v\n%s", args, err, errOut.String())
		}
		mu.Lock()
		got := strings.Join(prompts, "|")
		mu.Unlock()
		if got != "first question|second \nand more" {
			t.Errorf("dsh %v sent the prompts %q", args, got)
		}
		if out.String() != "answer 1.\nanswer 2.\n" {
			t.Errorf("dsh %v stdout = %q", args, out.String())
		}
		if !strings.Contains(errOut.String(), "> first question\n") || strings.Count(errOut.String(), "[session ") != 1 {
			t.Errorf("dsh %v stderr:\n%s", args, errOut.String())
		}
	}
}

// chatMidAnswer starts dsh chat on a terminal and sends a prompt whose
// answer never ends; it returns once the answer's first text is on screen.
func chatMidAnswer(t *testing.T) (*exec.Cmd, *termtest.Term) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "still thinking", Hang: true} })
	home := t.TempDir()
	term := termtest.New(t, 80, 24)
	dsh := exec.Command(dshBinary, "chat")
	dsh.Dir = t.TempDir()
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	if err := term.Start(dsh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dsh.Process.Kill(); dsh.Wait() })
	term.WaitText("ctrl+c twice exits")
	term.Type("go on" + termtest.Enter)
	term.WaitText("still thinking")
	return dsh, term
}

// The README's dsh chat pipeline runs as written.
func TestREADMEChatPipeline(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^printf .*\| dsh chat$`).Find(data)
	if m == nil {
		t.Fatal("the README has no `printf … | dsh chat` line")
	}
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case strings.HasPrefix(r.LastUser, "Write a haiku") && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "write_file",
				Arguments: `{"path":"haiku.txt","content":"gophers in the sun\n"}`}}
		case strings.HasPrefix(r.LastUser, "Write a haiku"):
			return llmtest.Reply{Text: "Written."}
		}
		return llmtest.Reply{Text: "Five syllables."}
	})
	bin, home, cwd := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(dshBinary, bin+"/dsh"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", string(m))
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "Written.\nFive syllables.\n" {
		t.Fatalf("%s: %v\nstdout: %q\nstderr: %s", m, err, out, stderr.String())
	}
	if b, err := os.ReadFile(cwd + "/haiku.txt"); err != nil || string(b) != "gophers in the sun\n" {
		t.Fatalf("haiku.txt: %q, %v", b, err)
	}
}

// A conversation continues: dsh chat --continue takes up the latest
// session of the directory, and /resume ID in the interactive mode makes a
// stored session the live conversation; the model sees the earlier turns
// each time.
func TestChatContinuesStoredSessions(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: fmt.Sprintf("%s with %d messages.", r.LastUser, r.Messages)}
	})
	home, cwd := t.TempDir(), t.TempDir()
	first := exec.Command(dshBinary, "chat", "--cwd", cwd)
	first.Stdin = strings.NewReader("one\n")
	first.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var errOut strings.Builder
	first.Stderr = &errOut
	if out, err := first.Output(); err != nil || !strings.Contains(string(out), "one with 2 messages.") {
		t.Fatalf("first chat: %v\n%s\n%s", err, out, errOut.String())
	}
	id := regexp.MustCompile(`\[session ([0-9a-f-]{36})`).FindStringSubmatch(errOut.String())[1]
	cont := exec.Command(dshBinary, "chat", "--cwd", cwd, "--continue")
	cont.Stdin = strings.NewReader("two\n")
	cont.Env = first.Env
	if out, err := cont.Output(); err != nil || !strings.Contains(string(out), "two with 4 messages.") {
		t.Fatalf("chat --continue: %v\n%s", err, out)
	}

	term := termtest.New(t, 100, 30)
	dsh := exec.Command(dshBinary, "chat")
	dsh.Dir = t.TempDir()
	dsh.Env = append(first.Env, "TERM=xterm-256color")
	if err := term.Start(dsh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dsh.Process.Kill(); dsh.Wait() })
	term.WaitText("ctrl+c twice exits")
	term.Type("/resume " + id[:8] + termtest.Enter)
	term.WaitText("Resumed session " + id)
	term.Type("three" + termtest.Enter)
	term.WaitText("three with 6 messages.")
	term.Type(termtest.CtrlC)
	term.WaitText("Press Ctrl-C again to exit")
	term.Type(termtest.CtrlC)
	if err := dsh.Wait(); err != nil {
		t.Fatalf("dsh exited with %v:\n%s", err, term.Screen())
	}
	if screen := term.WaitText("[session "); !strings.Contains(screen, "[session "+id) {
		t.Fatalf("the last line should name the resumed session:\n%s", screen)
	}
}
