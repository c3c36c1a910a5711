package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/sandboxtest"
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
// tells the model, so the worktree isolation that follows (dsh's own git
// worktree add and git status) runs neither.
func TestHostileBashPlantsGitHook(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	home, work := t.TempDir(), gitProject(t)
	config, _ := os.ReadFile(filepath.Join(work, ".git", "config"))
	const plant = `printf '#!/bin/sh\nid > "$HOME/ran-post-checkout"\n' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; ` +
		`printf '#!/bin/sh\nid > "$HOME/ran-fsmonitor"\nexit 1\n' > .git/fsmon; chmod +x .git/fsmon; ` +
		`git config core.fsmonitor "$PWD/.git/fsmon"; echo planted`
	var mu sync.Mutex
	var planted string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			return llmtest.Reply{Text: "child done"}
		case len(r.ToolResults) == 0:
			args, _ := json.Marshal(map[string]string{"command": plant})
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: string(args)}}
		case len(r.ToolResults) == 1:
			mu.Lock()
			planted = r.ToolResults[0]
			mu.Unlock()
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"iso","prompt":"look around","isolation":"worktree"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	cmd := exec.Command(dshBinary, "run", "--cwd", work, "go")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test",
		"DEEPSEEK_BASE_URL=" + srv.URL, "NO_PROXY=127.0.0.1"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(planted, "planted") ||
		!strings.Contains(planted, "removed the added "+filepath.Join(work, ".git", "hooks", "post-checkout")) ||
		!strings.Contains(planted, "restored "+filepath.Join(work, ".git", "config")) {
		t.Fatalf("bash result: %q", planted)
	}
	if _, err := os.Lstat(filepath.Join(work, ".git", "hooks", "post-checkout")); err == nil {
		t.Error("the post-checkout hook is still there")
	}
	if b, _ := os.ReadFile(filepath.Join(work, ".git", "config")); string(b) != string(config) {
		t.Errorf(".git/config holds %q, want %q", b, config)
	}
	for _, ran := range []string{"ran-post-checkout", "ran-fsmonitor"} {
		if _, err := os.Stat(filepath.Join(home, ran)); err == nil {
			t.Errorf("the planted %s ran", ran)
		}
	}
}

// A worktree child writes only its worktree (N4): neither its parent's
// tree by absolute path nor $DSH_HOME with ../../../.
func TestHostileWorktreeChildWritesOnlyItsTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	project := sandboxtest.OutsideDir(t) // the temporary directories are writable
	os.WriteFile(filepath.Join(project, "seed.txt"), []byte("seed\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "seed"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = project
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	seed := filepath.Join(project, "seed.txt")
	childCalls := []llmtest.ToolCall{
		{Name: "edit_file", Arguments: `{"path": "` + seed + `", "old_string": "seed", "new_string": "pwned"}`},
		{Name: "write_file", Arguments: `{"path": "../../../x", "content": "pwned"}`},
		{Name: "write_file", Arguments: `{"path": "in.txt", "content": "mine"}`},
	}
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.LastUser, "edit in isolation") || r.Child {
			if n := len(r.ToolResults); n < len(childCalls) {
				return llmtest.Reply{ToolCall: &childCalls[n]}
			}
			return llmtest.Reply{Text: strings.Join(r.ToolResults, "\n---\n")}
		}
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"edit","prompt":"edit in isolation","isolation":"worktree"}`}}
		}
		return llmtest.Reply{Text: r.ToolResults[0]}
	})
	home := t.TempDir()
	cmd := exec.Command(dshBinary, "run", "--cwd", project, "delegate")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test",
		"DEEPSEEK_BASE_URL=" + srv.URL, "NO_PROXY=127.0.0.1"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	for _, want := range []string{"edit_file: refused: " + seed + " is outside the sandbox", "write_file: refused: ",
		"which holds dsh's own files", "wrote 4 bytes to " + filepath.Join(home, "worktrees")} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the child's results lack %q:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(seed); string(b) != "seed\n" {
		t.Errorf("the parent's seed.txt holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(home, "x")); err == nil {
		t.Error("the child wrote $DSH_HOME/x")
	}
}
