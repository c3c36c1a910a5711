package main

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/worktree"
)

// sandboxRun runs `dsh run go` in project with home as HOME and DSH_HOME,
// and returns the tool results the models saw: the parent's, then each
// child's, joined with "\n---\n".
func sandboxRun(t *testing.T, project, home, config string, reply func(llmtest.Request) llmtest.Reply) string {
	t.Helper()
	srv := llmtest.NewServer(t, reply)
	os.Remove(filepath.Join(home, "dsh.yaml"))
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(dshBinary, "run", "--cwd", project, "go")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL, "NO_PROXY=127.0.0.1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	return string(out)
}

// bashThen answers a top-level agent with one bash call per command, then
// with its tool results; children (their task holds "CHILD") answer with
// theirs.
func bashThen(parent []llmtest.ToolCall, child []llmtest.ToolCall) func(llmtest.Request) llmtest.Reply {
	return func(r llmtest.Request) llmtest.Reply {
		calls := parent
		if strings.Contains(r.LastUser, "CHILD") || r.Child {
			calls = child
		}
		if n := len(r.ToolResults); n < len(calls) {
			return llmtest.Reply{ToolCall: &calls[n]}
		}
		return llmtest.Reply{Text: "results:\n" + strings.Join(r.ToolResults, "\n---\n")}
	}
}

func bash(command string) llmtest.ToolCall {
	args, _ := json.Marshal(map[string]string{"command": command})
	return llmtest.ToolCall{Name: "bash", Arguments: string(args)}
}

func isolated(prompt string) llmtest.ToolCall {
	args, _ := json.Marshal(map[string]string{"description": "iso", "prompt": prompt, "isolation": "worktree"})
	return llmtest.ToolCall{Name: "subagent", Arguments: string(args)}
}

// N3, git: sandboxed bash plants a post-checkout hook and a core.fsmonitor
// in the project's .git; dsh's own `git worktree add` and `git status`
// (worktree isolation) never run them.
func TestHostileGitPlantedByBashNeverRuns(t *testing.T) {
	project, home := gitProject(t), t.TempDir()
	plant := `printf '#!/bin/sh\nid > "$HOME/ran-post-checkout"\n' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; ` +
		`printf '#!/bin/sh\nid > "$HOME/ran-fsmonitor"\nexit 1\n' > .git/fsmon; chmod +x .git/fsmon; ` +
		`git config core.fsmonitor "$PWD/.git/fsmon"; echo planted`
	out := sandboxRun(t, project, home, "", bashThen(
		[]llmtest.ToolCall{bash(plant), isolated("CHILD: look")},
		[]llmtest.ToolCall{bash("echo edited > new.txt; echo child-edited")}))
	if !strings.Contains(out, "planted") || !strings.Contains(out, "child-edited") {
		t.Fatalf("the run did not plant and isolate:\n%s", out)
	}
	for _, f := range []string{"ran-post-checkout", "ran-fsmonitor"} {
		if _, err := os.Stat(filepath.Join(home, f)); err == nil {
			t.Errorf("%s: dsh's git ran what bash planted", f)
		}
	}
	if infos, err := worktree.List(t.Context(), project); err != nil || len(infos) != 1 || !infos[0].Changed {
		t.Errorf("the child's worktree: %+v, %v", infos, err)
	}
}

// N16: a child in a worktree commits its work with git, though its
// repository's .git lies outside the child's worktree and the temporary
// directories.
func TestHostileWorktreeChildCommits(t *testing.T) {
	sandboxtest.Require(t)
	project, home := filepath.Join(sandboxtest.OutsideDir(t), "project"), t.TempDir()
	os.CopyFS(project, os.DirFS(gitProject(t)))
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = t\n\temail = t@example.com\n"), 0o644)
	out := sandboxRun(t, project, home, "", bashThen(
		[]llmtest.ToolCall{isolated("CHILD: commit")},
		[]llmtest.ToolCall{bash("echo work > work.txt && git add -A && git commit -qm child-work && echo committed")}))
	if !strings.Contains(out, "committed") {
		t.Fatalf("the child could not commit:\n%s", out)
	}
	infos, err := worktree.List(t.Context(), project)
	if err != nil || len(infos) != 1 {
		t.Fatalf("worktrees %+v, %v", infos, err)
	}
	log := exec.Command("git", "log", "-1", "--format=%s", infos[0].Branch)
	log.Dir = project
	if subject, err := log.Output(); err != nil || strings.TrimSpace(string(subject)) != "child-work" {
		t.Errorf("branch %s's last commit: %q, %v", infos[0].Branch, subject, err)
	}
}

// N11: under the default sandbox a command cannot read ~/.ssh or another
// project's session log, and can read what lies next to them; with
// tools.network: deny it cannot reach a TCP port.
func TestHostileDefaultSandboxReadsAndNetwork(t *testing.T) {
	sandboxtest.Require(t)
	project, home := t.TempDir(), t.TempDir()
	for path, content := range map[string]string{".ssh/id_rsa": "SECRET-KEY", "sessions/other/s1/session.jsonl": "SECRET-SESSION", "notes.txt": "readable-note"} {
		os.MkdirAll(filepath.Dir(filepath.Join(home, path)), 0o755)
		os.WriteFile(filepath.Join(home, path), []byte(content), 0o600)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	calls := []llmtest.ToolCall{
		bash("cat $HOME/.ssh/id_rsa; cat $HOME/sessions/other/s1/session.jsonl; cat $HOME/notes.txt"),
		bash("exec 3<>/dev/tcp/127.0.0.1/" + port + " && printf 'c%snected\\n' on"), // the output is not the command line
	}
	out := sandboxRun(t, project, home, "", bashThen(calls, nil))
	if strings.Contains(out, "SECRET") || !strings.Contains(out, "readable-note") || !strings.Contains(out, "connected") {
		t.Errorf("default sandbox:\n%s", out)
	}
	out = sandboxRun(t, project, home, "tools: {network: deny}\n", bashThen(calls, nil))
	if strings.Contains(out, "connected") && sandbox.CheckNetwork(sandbox.NetworkDeny) == nil {
		t.Errorf("network deny:\n%s", out)
	}
}
