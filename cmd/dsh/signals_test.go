package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/session"
)

// Every way `dsh run` can be stopped from outside ends the running turn,
// logs its end (aborted, naming the cause) and exits with the documented
// status: SIGINT, SIGTERM, SIGHUP, and stdout closing under it.
func TestSignalsEndTheTurnOnDisk(t *testing.T) {
	for _, tc := range []struct {
		what string
		sig  os.Signal // nil: close the stdout pipe
		code int
	}{
		{"SIGINT", os.Interrupt, 130},
		{"SIGTERM", syscall.SIGTERM, 143},
		{"SIGHUP", syscall.SIGHUP, 129},
		{"stdout closed", nil, 141},
	} {
		t.Run(tc.what, func(t *testing.T) {
			srv := chatServer(t, func(chatRequest) chatReply { return chatReply{Deltas: []string{"Thinking"}, Drip: true} }, nil)
			home := t.TempDir()
			cmd := dshCommand(t, srv, home, "", "run", "--cwd", t.TempDir(), "think forever")
			stderr := new(lines)
			cmd.Stderr = stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len("Thinking"))
			if _, err := io.ReadFull(stdout, buf); err != nil { // the turn is streaming
				t.Fatalf("reading stdout: %v (stderr %q)", err, stderr.String())
			}
			if tc.sig != nil {
				cmd.Process.Signal(tc.sig)
				go io.Copy(io.Discard, stdout)
			} else {
				stdout.Close()
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit: %v, want status %d; stderr %q", err, tc.code, stderr.String())
			}
			stored := storedSessions(t, home)
			if len(stored) != 1 {
				t.Fatalf("%d sessions stored, want 1", len(stored))
			}
			for _, s := range stored {
				end, ok := lastTurnEnd(s.raw)
				if s.live || !ok || end.Reason.Kind != session.EndAborted || end.Reason.Cause == nil || end.Reason.Cause.Reason != tc.what {
					t.Errorf("stored turn end %+v (live %v), want aborted by %s", end.Reason, s.live, tc.what)
				}
				if err := session.CheckBalanced(s.raw); err != nil {
					t.Errorf("stored log needs repair: %v", err)
				}
			}
		})
	}
}

// signalHelperEnv names the marker file signalHelper writes at its
// best-effort flush; the test binary runs signalHelper when it is set.
const signalHelperEnv = "DSH_TEST_SIGNAL_HELPER"

// signalHelper is a command whose turn never ends once cancelled: only a
// second signal can end it.
func signalHelper(marker string) {
	ctx, cancel := context.WithCancelCause(context.Background())
	last := new(lastWords)
	stop := watchSignals(cancel, last, os.Stderr)
	defer stop()
	defer atExit(withLastWords(ctx, last), func() { os.WriteFile(marker, []byte("flushed"), 0o600) })()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))
	time.Sleep(time.Hour) // a turn that does not end
}

// A second signal exits at once, with the first one's status, after the
// best-effort flush, even when the cancelled work never ends.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "flushed")
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), signalHelperEnv+"="+marker)
	out := new(lines)
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out.waitFor(t, "ready")
	cmd.Process.Signal(os.Interrupt)
	out.waitFor(t, "interrupted: SIGINT")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the first signal ran the last-words flush")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want status 130 (the first signal's)", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("no best-effort flush before the exit: %v", err)
	}
}
