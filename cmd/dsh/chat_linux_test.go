package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
)

// Two signals in a row exit at once, and even then the terminal is given
// back: cooked mode, the main screen.
func TestSecondSignalGivesTheTerminalBack(t *testing.T) {
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
	// Two different signals: the kernel does not merge them, as it would
	// two of one kind still pending.
	dsh.Process.Signal(syscall.SIGTERM)
	dsh.Process.Signal(syscall.SIGINT)
	var exit *exec.ExitError
	if err := dsh.Wait(); !errors.As(err, &exit) || (exit.ExitCode() != exitTerm && exit.ExitCode() != exitInterrupt) {
		t.Fatalf("dsh exited with %v, want status %d or %d", err, exitTerm, exitInterrupt)
	}
	tio, err := unix.IoctlGetTermios(int(term.TTY().Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&(unix.ICANON|unix.ECHO) != unix.ICANON|unix.ECHO {
		t.Errorf("the terminal is left raw (lflag %#x)", tio.Lflag)
	}
	term.WaitFor("the main screen back", func(string) bool { return !term.AltScreen() })
}
