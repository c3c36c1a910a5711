package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/worktree"
)

// readmeBlock returns the first ```lang block of README.md after the text
// after.
func readmeBlock(t *testing.T, lang, after string) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), after)
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(rest)
	if !ok || m == nil {
		t.Fatalf("README.md has no %s block after %q", lang, after)
	}
	return m[1]
}

// gitProject makes a git repository with one commit.
func gitProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	for _, args := range [][]string{{"init", "--quiet"}, {"add", "."}, {"commit", "--quiet", "-m", "init"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// The model calls subagent with subagent_type explore: the child's request
// carries explore's instructions and only its tools.
func TestExploreTypeEndToEnd(t *testing.T) {
	var mu sync.Mutex
	var childBody []byte
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case strings.Contains(r.LastUser, "where is main defined?"):
			mu.Lock()
			childBody = r.Body
			mu.Unlock()
			return llmtest.Reply{Text: "in main.go, line 3"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"find main","prompt":"where is main defined?","subagent_type":"explore"}`}}
		}
		return llmtest.Reply{Text: "explorer says: " + r.ToolResults[0]}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "find the entry point")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if strings.TrimSpace(out) != "explorer says: in main.go, line 3" {
		t.Fatalf("stdout %q\n%s", out, errOut)
	}
	if !strings.Contains(string(childBody), "You explore a codebase to answer a question, and change nothing.") {
		t.Errorf("the child's request lacks explore's instructions:\n%s", childBody)
	}
	if got := toolNames(childBody); !slices.Equal(got, []string{"glob", "grep", "read_file"}) {
		t.Errorf("the child's tools are %v", got)
	}
}

// The README's definition and hooks, as written: the model delegates to the
// reviewer type (a worktree of its own, structured result), then tries a
// git push that the PreToolUse hook blocks, then writes a file that the
// PostToolUse hook logs.
func TestREADMEDefinitionAndHooks(t *testing.T) {
	project := gitProject(t)
	os.MkdirAll(filepath.Join(project, ".dsh", "agents"), 0o755)
	os.WriteFile(filepath.Join(project, ".dsh", "agents", "reviewer.md"), []byte(readmeBlock(t, "markdown", "### Agent definitions")), 0o644)
	home := t.TempDir()
	trustFolder(t, home, project)
	cfgPath := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfgPath, []byte(readmeBlock(t, "yaml", "### Hooks")), 0o644)

	var mu sync.Mutex
	var childBody []byte
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.LastUser, "review the change") {
			mu.Lock()
			childBody = r.Body
			mu.Unlock()
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "structured_output", Arguments: `{"verdict":"approve","notes":"small and safe"}`}}
		}
		switch len(r.ToolResults) {
		case 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"review","prompt":"review the change","subagent_type":"reviewer"}`}}
		case 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"git push --force origin main"}`}}
		case 2:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "write_file", Arguments: `{"path":"NOTES.md","content":"reviewed\n"}`}}
		}
		return llmtest.Reply{Text: strings.Join(r.ToolResults, "\n---\n")}
	})
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL, "PATH": os.Getenv("PATH")}
	out, errOut, err := runCLI(t, env, "--config", cfgPath, "run", "--cwd", project, "review, push, note")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	parts := strings.Split(strings.TrimSpace(out), "\n---\n")
	if len(parts) != 3 {
		t.Fatalf("stdout %q\n%s", out, errOut)
	}
	if parts[0] != `{"notes":"small and safe","verdict":"approve"}` {
		t.Errorf("the reviewer returned %q", parts[0])
	}
	if !strings.Contains(parts[1], "blocked by a PreToolUse hook") || !strings.Contains(parts[1], "push from your own shell, not from an agent") {
		t.Errorf("the push was not blocked with the hook's reason: %q", parts[1])
	}
	body := string(childBody)
	if !strings.Contains(body, "You review the uncommitted change of this repository") || !strings.Contains(body, filepath.Join(home, "worktrees")) {
		t.Errorf("the reviewer's request lacks its instructions or its worktree:\n%s", body)
	}
	if got := toolNames(childBody); !slices.Equal(got, []string{"bash", "glob", "grep", "read_file", "structured_output"}) {
		t.Errorf("the reviewer's tools are %v", got)
	}
	if infos, err := worktree.List(t.Context(), project); err != nil || len(infos) != 0 {
		t.Errorf("the reviewer changed nothing, yet worktrees remain: %+v %v", infos, err)
	}
	log, err := os.ReadFile(filepath.Join(project, ".dsh-edits.jsonl"))
	if err != nil || !strings.Contains(string(log), `"tool_name":"Write"`) || !strings.Contains(string(log), `"file_path":"`+filepath.Join(project, "NOTES.md")+`"`) {
		t.Errorf("the PostToolUse hook logged %q (%v)", log, err)
	}
	listed, _, err := runCLI(t, env, "--config", cfgPath, "agents", "list", "--cwd", project)
	if err != nil || !regexp.MustCompile(`(?m)^reviewer\s+\(the tool's\)\s+project `+regexp.QuoteMeta(filepath.Join(project, ".dsh", "agents", "reviewer.md"))).MatchString(listed) {
		t.Errorf("agents list: %v\n%s", err, listed)
	}
}

// Hooks of dsh.yaml: a PreToolUse hook blocks bash (nothing runs), also
// inside a child; a slow hook is killed at its timeout and its call
// refused.
func TestHooksInRunAndInAChild(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	cfgPath := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfgPath, []byte(`hooks:
  PreToolUse:
    - matcher: Bash
      hooks: [{command: "echo 'no shell commands, please' >&2; exit 2"}]
    - matcher: read_file
      hooks: [{command: "sleep 30", timeout: 0.5}]
`), 0o600)
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.LastUser, "child: touch it") {
			if len(r.ToolResults) == 0 {
				return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"touch child-ran"}`}}
			}
			return llmtest.Reply{Text: "child saw: " + r.ToolResults[0]}
		}
		switch len(r.ToolResults) {
		case 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"touch parent-ran"}`}}
		case 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "read_file", Arguments: `{"path":"x"}`}}
		case 2:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"c","prompt":"child: touch it"}`}}
		}
		return llmtest.Reply{Text: strings.Join(r.ToolResults, "\n---\n")}
	})
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL, "PATH": os.Getenv("PATH")}
	out, errOut, err := runCLI(t, env, "--config", cfgPath, "run", "--cwd", cwd, "go")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	parts := strings.Split(strings.TrimSpace(out), "\n---\n")
	if len(parts) != 3 || !strings.Contains(parts[0], "no shell commands, please") ||
		!strings.Contains(parts[1], "the hook did not finish within its timeout (500ms)") ||
		!strings.Contains(parts[2], "child saw: Error: blocked by a PreToolUse hook") || !strings.Contains(parts[2], "no shell commands, please") {
		t.Fatalf("stdout %q", out)
	}
	for _, f := range []string{"parent-ran", "child-ran"} {
		if _, err := os.Stat(filepath.Join(cwd, f)); err == nil {
			t.Errorf("%s: a blocked command ran", f)
		}
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// dsh killed with SIGKILL while a child works in its worktree: the
// worktree stays, locked by the dead process; `git worktree list` and
// `dsh doctor` agree on it, and doctor says how to clean it up.
func TestWorktreeLeftByAKilledDsh(t *testing.T) {
	project := gitProject(t)
	home := t.TempDir()
	working := make(chan struct{})
	var once sync.Once
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(r.LastUser, "edit in isolation") {
			if len(r.ToolResults) == 0 {
				return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "write_file", Arguments: `{"path":"wip.txt","content":"half done"}`}}
			}
			once.Do(func() { close(working) })
			return llmtest.Reply{Hang: true}
		}
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"edit","prompt":"edit in isolation","isolation":"worktree"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test",
		"DEEPSEEK_BASE_URL=" + srv.URL, "NO_PROXY=127.0.0.1"}
	cmd := exec.Command(dshBinary, "run", "--cwd", project, "delegate")
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-working
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	pid := cmd.Process.Pid

	infos, err := worktree.List(t.Context(), project)
	if err != nil || len(infos) != 1 {
		t.Fatalf("worktrees %+v %v", infos, err)
	}
	in := infos[0]
	if in.Owner != pid || !in.Stale || !in.Changed || in.Missing {
		t.Fatalf("worktree %+v (dsh was pid %d)", in, pid)
	}
	if b, _ := os.ReadFile(filepath.Join(in.Path, "wip.txt")); string(b) != "half done" {
		t.Errorf("the child's work is not in its worktree: %q", b)
	}
	git := exec.Command("git", "worktree", "list", "--porcelain")
	git.Dir = project
	listed, _ := git.Output()
	if !strings.Contains(string(listed), "worktree "+in.Path+"\n") || !strings.Contains(string(listed), fmt.Sprintf("locked dsh pid %d", pid)) {
		t.Errorf("git worktree list:\n%s", listed)
	}
	doctor := exec.Command(dshBinary, "doctor")
	doctor.Dir, doctor.Env = project, env
	report, err := doctor.Output()
	want := fmt.Sprintf("FAIL worktree %s: left behind by dsh pid %d, which is gone; it has changes: review them, merge branch %s, then git worktree unlock %s && git worktree remove %s",
		in.Path, pid, in.Branch, in.Path, in.Path)
	if err == nil || !strings.Contains(string(report), want) {
		t.Errorf("doctor (%v):\n%s\nwant a line\n%s", err, report, want)
	}
	if n := len(regexp.MustCompile(`(?m)^(ok  |FAIL) worktree `).FindAll(report, -1)); n != 1 {
		t.Errorf("doctor reports %d worktrees, git has 1 of dsh's:\n%s", n, report)
	}
}

// A definition bound to claude-code runs through the real pinned Claude
// Code, in a worktree of its own: it is told the definition's instructions
// and works in the worktree.
func TestClaudeCodeType(t *testing.T) {
	bin := testpeers.Path(t, "node_modules/.bin")
	project := gitProject(t)
	os.MkdirAll(filepath.Join(project, ".dsh", "agents"), 0o755)
	os.WriteFile(filepath.Join(project, ".dsh", "agents", "claude.md"), []byte(`---
name: claude
description: Claude Code, in a worktree of its own.
provider: claude-code
isolation: worktree
---
Always start by printing the working directory.
`), 0o644)
	home := t.TempDir()
	trustFolder(t, home, project)
	cfgPath := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfgPath, []byte(`subagents:
  providers:
    - name: spawn
    - name: claude-code
      claudeCode: {passEnv: [ANTHROPIC_API_KEY]}
  tools:
    - provider: spawn
    - provider: claude-code
      toolName: subagent_claude
`), 0o600)
	claude := llmtest.NewAnthropic(t, func(r llmtest.AnthropicRequest) llmtest.AnthropicReply {
		if len(r.ToolResults) == 0 {
			return llmtest.AnthropicReply{ToolUse: &llmtest.AnthropicToolUse{ID: "toolu_01", Name: "Bash",
				Input: map[string]any{"command": "pwd", "description": "print the working directory"}}}
		}
		return llmtest.AnthropicReply{Text: "cwd=" + strings.TrimSpace(r.ToolResults[0])}
	})
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"where","prompt":"where are you?","subagent_type":"claude"}`}}
		}
		return llmtest.Reply{Text: "claude said " + r.ToolResults[0]}
	})
	cmd := exec.Command(dshBinary, "--config", cfgPath, "run", "--cwd", project, "ask claude")
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test",
		"DEEPSEEK_BASE_URL=" + srv.URL, "NO_PROXY=127.0.0.1", "ANTHROPIC_API_KEY=fake", "ANTHROPIC_BASE_URL=" + claude.URL,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_MAX_RETRIES=0"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s\n%s", err, out, stderr.String())
	}
	m := regexp.MustCompile(`claude said cwd=(\S+)`).FindStringSubmatch(string(out))
	if m == nil || !strings.HasPrefix(m[1], filepath.Join(home, "worktrees")+"/") {
		t.Fatalf("stdout %q: Claude Code did not work in a worktree\n%s", out, stderr.String())
	}
	seen := claude.Seen()
	if len(seen) == 0 || !strings.Contains(seen[0].LastUser, "Always start by printing the working directory.") ||
		!strings.Contains(seen[0].LastUser, "where are you?") {
		t.Errorf("Claude Code was asked %+v", seen)
	}
	if infos, _ := worktree.List(t.Context(), project); len(infos) != 0 {
		t.Errorf("Claude Code changed nothing, yet worktrees remain: %+v", infos)
	}
}

// dsh agents list: the catalog, where each definition came from and what
// it overrides; Claude Code's fields dsh ignores are warnings; bad files
// are warnings too, each naming its file and line, and the rest is listed.
func TestAgentsList(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	claudeDir := filepath.Join(project, ".claude", "agents")
	os.MkdirAll(claudeDir, 0o755)
	runner, err := os.ReadFile("../../agentdef/testdata/claude-project/.claude/agents/test-runner.md")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(claudeDir, "test-runner.md"), runner, 0o644)
	os.MkdirAll(filepath.Join(home, "agents"), 0o755)
	os.WriteFile(filepath.Join(home, "agents", "explore.md"), []byte("---\nname: explore\ndescription: My own explorer.\n---\nLook.\n"), 0o644)
	env := map[string]string{"DSH_HOME": home}
	trustFolder(t, home, project)
	out, errOut, err := runCLI(t, env, "agents", "list", "--cwd", project)
	if err != nil {
		t.Fatalf("agents list: %v\n%s", err, errOut)
	}
	for _, want := range []string{
		`(?m)^NAME\s+PROVIDER\s+FROM\s+DESCRIPTION$`,
		`(?m)^explore\s+\(the tool's\)\s+user ` + regexp.QuoteMeta(filepath.Join(home, "agents", "explore.md")) + `\s+My own explorer\.$`,
		`(?m)^\s+overrides built-in\s*$`,
		`(?m)^general\s+\(the tool's\)\s+built-in\s+General-purpose agent`,
		`(?m)^test-runner\s+\(the tool's\)\s+project \(Claude Code\) ` + regexp.QuoteMeta(filepath.Join(claudeDir, "test-runner.md")),
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("stdout lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(errOut, "dsh: warning: agent definition "); n != 6 || !strings.Contains(errOut, "color: a Claude Code field dsh does not use; ignored") ||
		!strings.Contains(errOut, `dsh: warning: agent definitions: model "sonnet" (1 file): not a configured model route`) {
		t.Errorf("%d warnings:\n%s", n, errOut)
	}
	os.WriteFile(filepath.Join(home, "agents", "bad.md"), []byte("---\nname: bad\ndescription: d\nmaxSteps: many\n---\n"), 0o644)
	os.WriteFile(filepath.Join(home, "agents", "worse.md"), []byte("---\nname: [worse\n---\n"), 0o644)
	out, errOut, err = runCLI(t, env, "agents", "list", "--cwd", project)
	if err != nil || !strings.Contains(out, "test-runner") || strings.Contains(out, "bad") {
		t.Errorf("with bad files: %v\n%s", err, out)
	}
	for _, want := range []string{
		"dsh: warning: agent definition " + filepath.Join(home, "agents", "bad.md") + ":4: maxSteps: want an integer, got many; the file is left out",
		"dsh: warning: agent definition " + filepath.Join(home, "agents", "worse.md") + ":2: ",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %s:\n%s", want, errOut)
		}
	}
}
