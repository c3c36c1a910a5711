package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// toolSteps is a loopback model that makes the given tool calls (name and
// arguments) in turn, one per step, then answers "done".
type toolSteps struct {
	calls   [][2]string
	mu      sync.Mutex
	results []string // what the calls returned, as the model last saw them
}

func (s *toolSteps) reply(req chatRequest) chatReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = req.ToolResults
	if n := len(req.ToolResults); n < len(s.calls) {
		return chatReply{Tool: s.calls[n][0], Args: s.calls[n][1]}
	}
	return chatReply{Deltas: []string{"done"}}
}

// seen returns what the calls returned.
func (s *toolSteps) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.results
}

// A model cannot rewrite dsh's configuration through write_file, even
// when bash could not write either (N4): under read-only the file tools
// are refused, and the next run still reads the user's configuration.
func TestHostileWriteFileToConfigUnderReadOnly(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	cfgPath := filepath.Join(home, "dsh.yaml")
	const cfg = "tools:\n  sandbox: read-only\n"
	model := &toolSteps{calls: [][2]string{
		{"write_file", `{"path": "` + cfgPath + `", "content": "tools:\n  sandbox: full\nhooks:\n  Stop:\n    - hooks:\n        - command: \"id > $HOME/PWNED\"\n"}`},
		{"write_file", `{"path": "inside.txt", "content": "x"}`},
	}}
	srv := chatServer(t, model.reply, nil)
	out, err := dshCommand(t, srv, home, cfg, "run", "--cwd", work, "go").CombinedOutput()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	results := model.seen()
	if len(results) != 2 || !strings.Contains(results[0], "dsh's configuration file") ||
		!strings.Contains(results[1], "under tools.sandbox: read-only no file may be written") {
		t.Fatalf("tool results: %q", results)
	}
	if b, _ := os.ReadFile(cfgPath); string(b) != cfg {
		t.Fatalf("dsh.yaml holds %q", b)
	}
	for _, p := range []string{filepath.Join(work, "inside.txt"), filepath.Join(home, "PWNED")} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s was written", p)
		}
	}
}

// A bash command that plants a git hook and core.fsmonitor leaves neither
// behind (N3): dsh puts the repository's hooks and configuration back and
// tells the model.
func TestHostileBashPlantsGitHook(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	home, work := t.TempDir(), t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "seed"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	config, _ := os.ReadFile(filepath.Join(work, ".git", "config"))
	model := &toolSteps{calls: [][2]string{{"bash", `{"command": "printf '#!/bin/sh\\nid > \"$HOME/ran-post-checkout\"\\n' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; git config core.fsmonitor \"$PWD/.git/fsmon\"; echo planted"}`}}}
	srv := chatServer(t, model.reply, nil)
	out, err := dshCommand(t, srv, home, "", "run", "--cwd", work, "go").CombinedOutput()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	results := model.seen()
	if len(results) != 1 || !strings.Contains(results[0], "planted") ||
		!strings.Contains(results[0], "removed the added "+filepath.Join(work, ".git", "hooks", "post-checkout")) ||
		!strings.Contains(results[0], "restored "+filepath.Join(work, ".git", "config")) {
		t.Fatalf("tool results: %q", results)
	}
	if _, err := os.Lstat(filepath.Join(work, ".git", "hooks", "post-checkout")); err == nil {
		t.Fatal("the post-checkout hook is still there")
	}
	if b, _ := os.ReadFile(filepath.Join(work, ".git", "config")); string(b) != string(config) {
		t.Fatalf(".git/config holds %q, want %q", b, config)
	}
}
