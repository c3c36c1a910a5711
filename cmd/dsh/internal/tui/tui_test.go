package tui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/cmd/dsh/internal/tui"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/termtest"
)

func TestMain(m *testing.M) {
	proc.Main() // bash commands run supervised, as in dsh
	code := m.Run()
	if code == 0 {
		// regexp2, the highlighter's regular expressions, keeps a clock
		// goroutine for its match timeouts until a second after the last.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
		if err := proc.NoChildren(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// chat is the interactive UI running in this process on a real
// pseudo-terminal, against a loopback model.
type chat struct {
	t     *testing.T
	term  *termtest.Term
	rt    *dsh.Runtime
	agent *agent.Agent
	cwd   string
	home  string
	done  chan error
	ended bool
}

// start runs the UI on a width × height terminal; yaml, when set, is the
// dsh.yaml. The session ends (Ctrl-C twice) when the test does, and must
// leave nothing behind.
func start(t *testing.T, reply func(llmtest.Request) llmtest.Reply, yaml string, width, height int) *chat {
	t.Helper()
	return startAt(t, llmtest.NewServer(t, reply).URL, yaml, width, height)
}

// startAt is start against the model server at url.
func startAt(t *testing.T, url, yaml string, width, height int) *chat {
	t.Helper()
	home, cwd := t.TempDir(), t.TempDir()
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": url}
	getenv := func(k string) string { return env[k] }
	if yaml != "" {
		if err := os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load("", getenv)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := cfg.Build(context.Background(), log, nil, getenv)
	if err != nil {
		t.Fatal(err)
	}
	term := termtest.New(t, width, height)
	ui := tui.New(tui.Options{Runtime: rt, In: term.TTY(), Out: term.TTY(), Model: cfg.Agent.Provider + "/" + cfg.Agent.Model})
	policy := cfg.Policy()
	a, err := rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: cfg.Agent, Policy: &policy, Asker: ui.Asker()})
	if err != nil {
		t.Fatal(err)
	}
	s := &chat{t: t, term: term, rt: rt, agent: a, cwd: cwd, home: home, done: make(chan error, 1)}
	go func() {
		last, err := ui.Run(context.Background(), a)
		if err == nil && last != a {
			err = fmt.Errorf("Run returned agent %s, want %s", last.ID(), a.ID())
		}
		s.done <- err
	}()
	t.Cleanup(s.exit)
	term.WaitText("ctrl+c twice exits")
	return s
}

// exit leaves the UI as a person does, Ctrl-C twice, and closes the
// runtime.
func (s *chat) exit() {
	s.t.Helper()
	if !s.ended {
		s.ended = true
		s.term.Type(termtest.CtrlC)
		s.term.WaitText("Press Ctrl-C again to exit")
		s.term.Type(termtest.CtrlC)
		if err := <-s.done; err != nil {
			s.t.Errorf("Run: %v", err)
		}
	}
	if err := s.rt.Close(context.Background()); err != nil {
		s.t.Errorf("closing the runtime: %v", err)
	}
	s.term.Close()
}

// send types a prompt and Enter.
func (s *chat) send(prompt string) {
	s.t.Helper()
	s.term.Type(prompt)
	s.term.WaitText(prompt)
	s.term.Type(termtest.Enter)
}

// resize resizes the terminal and tells the UI, as the kernel tells a
// terminal's foreground process (this process is not one).
func (s *chat) resize(width, height int) {
	s.t.Helper()
	s.term.Resize(width, height)
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
}

// lines returns the screen's rows.
func lines(screen string) []string { return strings.Split(screen, "\n") }
