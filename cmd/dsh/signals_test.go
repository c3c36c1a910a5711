package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"

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
