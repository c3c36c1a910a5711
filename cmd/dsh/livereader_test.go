package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
)

// `dsh sessions show` in a loop on a session a running `dsh run` writes:
// every show succeeds and shows the turn running (never interrupted), the
// writer is never disturbed, and afterwards the file loads with no gap.
// The model answers each request only after a show, so shows and writes
// interleave at every step.
func TestSessionsShowWhileRunning(t *testing.T) {
	const steps = 6
	gate := make(chan struct{})
	srv := chatServer(t, func(r chatRequest) chatReply {
		select {
		case <-gate:
		case <-time.After(time.Minute):
		}
		if n := len(r.ToolResults); n < steps {
			return chatReply{Deltas: []string{"step ", fmt.Sprint(n), " of many "}, Tool: "bash", Args: fmt.Sprintf(`{"command":"echo %d"}`, n)}
		}
		return chatReply{Deltas: []string{"all ", "done"}}
	}, nil)
	home := t.TempDir()
	cmd := dshCommand(t, srv, home, "", "run", "--cwd", t.TempDir(), "work in steps")
	stderr := new(lines)
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()

	backend := jsonl.New(filepath.Join(home, "sessions"))
	env := map[string]string{"DSH_HOME": home}
	var id string
	shows, running := 0, 0
	for done := false; !done; {
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("dsh run: %v\n%s", err, stderr.String())
			}
			done = true
		default:
		}
		if id == "" {
			hs, _ := backend.List()
			if len(hs) == 0 {
				time.Sleep(time.Millisecond) // the file appears with the first request
				continue
			}
			id = hs[0].ID
		}
		out, _, err := runCLI(t, env, "sessions", "show", id)
		if err != nil {
			t.Fatalf("show %d: %v", shows, err)
		}
		shows++
		if strings.Contains(out, "interrupted") {
			t.Fatalf("show %d calls the running turn interrupted:\n%s", shows, out)
		}
		if strings.Contains(out, "── running") {
			running++
		}
		select {
		case gate <- struct{}{}:
		default:
		}
	}
	if running < steps+1 { // one before each model request at least
		t.Errorf("%d of %d shows saw the turn running, want at least %d", running, shows, steps+1)
	}
	out, _, err := runCLI(t, env, "sessions", "show", id)
	if err != nil || !strings.Contains(out, "── end: completed") {
		t.Fatalf("show after the run: %v\n%s", err, out)
	}
	s, detach, err := session.NewStore(backend, nil).Load(context.Background(), id) // seqs contiguous, or refused
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if err := session.CheckBalanced(s.Events()); err != nil {
		t.Errorf("the written log: %v", err)
	}
	t.Logf("%d shows, %d while the turn ran", shows, running)
}
