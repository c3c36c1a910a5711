package main

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Two signals in a row exit at once, and even then the terminal is given
// back: cooked mode, the main screen.
func TestSecondSignalGivesTheTerminalBack(t *testing.T) {
	dsh, term := chatMidAnswer(t)
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
