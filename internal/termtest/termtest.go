//go:build unix

// Package termtest runs terminal programs on a real pseudo-terminal and
// reconstructs their screen with a terminal emulator, so that a test can
// type keys and read the screen as a person would. Tests wait for what the
// screen shows (WaitFor), never for a time.
package termtest

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// Keys as a terminal sends them.
const (
	Enter    = "\r"
	AltEnter = "\x1b\r"
	// ShiftEnter is Shift+Enter as xterm sends it with modifyOtherKeys on.
	ShiftEnter = "\x1b[27;2;13~"
	Esc        = "\x1b"
	Tab        = "\t"
	CtrlC      = "\x03"
	CtrlD      = "\x04"
	CtrlT      = "\x14"
	Up         = "\x1b[A"
	Down       = "\x1b[B"
)

// Timeout bounds every wait on the screen.
const Timeout = 60 * time.Second

// Term is a pseudo-terminal with an emulated screen.
type Term struct {
	tb       testing.TB
	pty, tty *os.File

	mu  sync.Mutex
	emu *vt.Emulator

	gateMu sync.Mutex
	gate   chan struct{} // closed unless paused: the screen is read

	wg        sync.WaitGroup
	closeOnce sync.Once
}

// New opens a pseudo-terminal of width × height cells; it is closed when
// the test ends.
func New(tb testing.TB, width, height int) *Term {
	tb.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		tb.Fatalf("termtest: open a pty: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(width), Rows: uint16(height)}); err != nil {
		tb.Fatalf("termtest: size the pty: %v", err)
	}
	t := &Term{tb: tb, pty: ptmx, tty: tty, emu: vt.NewEmulator(width, height), gate: make(chan struct{})}
	close(t.gate)
	t.wg.Go(t.readScreen)
	t.wg.Go(t.answerQueries)
	tb.Cleanup(t.Close)
	return t
}

// readScreen feeds what the program writes to the emulator.
func (t *Term) readScreen() {
	buf := make([]byte, 32<<10)
	for {
		t.gateMu.Lock()
		gate := t.gate
		t.gateMu.Unlock()
		<-gate
		n, err := t.pty.Read(buf)
		if n > 0 {
			t.mu.Lock()
			t.emu.Write(buf[:n])
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// answerQueries passes the emulator's answers to the program's queries
// (cursor position, device attributes) back as input.
func (t *Term) answerQueries() {
	buf := make([]byte, 4096)
	for {
		n, err := t.emu.Read(buf)
		if n > 0 {
			t.pty.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// Pause stops reading the screen, as a stuck terminal would: once the
// kernel's buffers are full, the program's writes to the terminal block.
func (t *Term) Pause() {
	t.gateMu.Lock()
	defer t.gateMu.Unlock()
	select {
	case <-t.gate:
		t.gate = make(chan struct{})
	default: // paused already
	}
}

// Resume reads the screen again.
func (t *Term) Resume() {
	t.gateMu.Lock()
	defer t.gateMu.Unlock()
	select {
	case <-t.gate: // not paused
	default:
		close(t.gate)
	}
}

// TTY is the terminal end a program in this process reads and draws on.
func (t *Term) TTY() *os.File { return t.tty }

// Start runs cmd on the terminal, as its controlling terminal and its
// stdin, stdout and stderr (those cmd does not set already).
func (t *Term) Start(cmd *exec.Cmd) error {
	if cmd.Stdin == nil {
		cmd.Stdin = t.tty
	}
	if cmd.Stdout == nil {
		cmd.Stdout = t.tty
	}
	if cmd.Stderr == nil {
		cmd.Stderr = t.tty
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty = true, true
	return cmd.Start()
}

// Type sends keys, as typed.
func (t *Term) Type(keys string) {
	t.tb.Helper()
	if _, err := io.WriteString(t.pty, keys); err != nil {
		t.tb.Fatalf("termtest: type %q: %v", keys, err)
	}
}

// Resize changes the terminal's size; the kernel tells the terminal's
// foreground process group (SIGWINCH).
func (t *Term) Resize(width, height int) {
	t.tb.Helper()
	t.mu.Lock()
	t.emu.Resize(width, height)
	t.mu.Unlock()
	if err := pty.Setsize(t.pty, &pty.Winsize{Cols: uint16(width), Rows: uint16(height)}); err != nil {
		t.tb.Fatalf("termtest: resize: %v", err)
	}
}

// Screen returns the screen's text, one line per row, trailing spaces
// removed.
func (t *Term) Screen() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, h := t.emu.Width(), t.emu.Height()
	rows := make([]string, h)
	for y := range h {
		var b strings.Builder
		for x := 0; x < w; x++ {
			c := t.emu.CellAt(x, y)
			switch {
			case c == nil:
				b.WriteByte(' ')
			case c.Width == 0: // the tail of a wide character
			case c.Content == "":
				b.WriteByte(' ')
			default:
				b.WriteString(c.Content)
			}
		}
		rows[y] = strings.TrimRight(b.String(), " ")
	}
	return strings.Join(rows, "\n")
}

// AltScreen reports whether the program has the alternate screen on.
func (t *Term) AltScreen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.emu.IsAltScreen()
}

// Size returns the emulated screen's width and height.
func (t *Term) Size() (width, height int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.emu.Width(), t.emu.Height()
}

// WaitFor waits until the screen satisfies ok, and returns that screen.
// It fails the test, showing the screen, after Timeout.
func (t *Term) WaitFor(what string, ok func(screen string) bool) string {
	t.tb.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		s := t.Screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.tb.Fatalf("termtest: the screen never showed %s; it shows:\n%s", what, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitText waits until the screen contains text.
func (t *Term) WaitText(text string) string {
	t.tb.Helper()
	return t.WaitFor(`"`+text+`"`, func(s string) bool { return strings.Contains(s, text) })
}

// Close closes the terminal and waits for its goroutines.
func (t *Term) Close() {
	t.closeOnce.Do(func() {
		t.Resume()
		t.tty.Close()
		t.pty.Close()
		// Closing the emulator's answer pipe ends answerQueries without
		// touching the emulator's state, which its Read checks unlocked.
		if c, ok := t.emu.InputPipe().(io.Closer); ok {
			c.Close()
		}
		t.wg.Wait()
	})
}
