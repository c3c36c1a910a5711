package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// claudeSetup is a user's Claude Code setup with one bad agent file in
// ~/.claude/agents and one in a trusted project's .claude/agents (each
// next to a good one): it returns the home (HOME and DSH_HOME), the
// project and the environment of a dsh against srv.
func claudeSetup(t *testing.T, srv string) (home, project string, env []string) {
	t.Helper()
	home, project = t.TempDir(), t.TempDir()
	files := map[string]string{
		filepath.Join(home, ".claude", "agents", "broken.md"):        "---\nname: broken\ndescription: d\nmaxTurns: lots\n---\n",
		filepath.Join(home, ".claude", "agents", "helper.md"):        "---\nname: helper\ndescription: Use for X. Triggers on: a, b\nmodel: fable\n---\nHelp.\n",
		filepath.Join(project, ".claude", "agents", "worse.md"):      "---\nname: [unclosed\n---\n",
		filepath.Join(project, ".claude", "agents", "sub", "rev.md"): "---\nname: reviewer\ndescription: Reviews.\ntools: Read, TaskCreate\n---\nReview.\n",
	}
	for path, text := range files {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	trustFolder(t, home, project)
	env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv}
	return home, project, env
}

// answerFirstLine starts cmd, writes request to its stdin and returns the
// first line it answers on stdout.
func answerFirstLine(t *testing.T, cmd *exec.Cmd, request string) string {
	t.Helper()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	fmt.Fprintln(stdin, request)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Errorf("%v: no answer (%v); stderr:\n%s", cmd.Args, err, stderr.String())
	}
	return line
}

// One bad agent file, in ~/.claude/agents or in the project's
// .claude/agents, disables nothing: dsh run, chat, acp (which answers
// initialize), mcp and demo start, log what is wrong with each file, and
// offer the good files' types; dsh doctor shows each problem as a WARN line.
func TestBadAgentFilesDisableNothing(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if !strings.Contains(string(r.Body), "- reviewer: Reviews.") || !strings.Contains(string(r.Body), "- helper: Use for X. Triggers on: a, b") {
			return llmtest.Reply{Text: "the subagent tool lacks the good types"}
		}
		return llmtest.Reply{Text: "fine."}
	})
	home, project, env := claudeSetup(t, srv.URL)
	broken := filepath.Join(home, ".claude", "agents", "broken.md")
	worse := filepath.Join(project, ".claude", "agents", "worse.md")

	for _, args := range [][]string{{"run", "--cwd", project, "hello"}, {"chat", "--cwd", project}} {
		cmd := exec.Command(dshBinary, args...)
		cmd.Env, cmd.Dir, cmd.Stdin = env, project, strings.NewReader("hello\n")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "fine.") {
			t.Errorf("dsh %s: %v\n%s\n%s", args[0], err, out, stderr.String())
		}
	}
	log, _ := os.ReadFile(filepath.Join(home, "logs", "dsh.log")) // where run and chat write their warnings
	for _, want := range []string{broken + `:4: maxTurns: want an integer, got lots; the file is left out`, worse + ":2: ",
		`model \"fable\" (1 file): not a configured model route`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}

	acp := exec.Command(dshBinary, "acp")
	acp.Env, acp.Dir = env, project
	if line := answerFirstLine(t, acp, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`); !strings.Contains(line, `"agentInfo"`) {
		t.Errorf("dsh acp answered initialize with %q", line)
	}
	mcp := exec.Command(dshBinary, "mcp", "--cwd", project)
	mcp.Env, mcp.Dir = env, project
	if line := answerFirstLine(t, mcp, initialize); !strings.Contains(line, `"serverInfo"`) {
		t.Errorf("dsh mcp answered initialize with %q", line)
	}
	demo := exec.Command(dshBinary, "demo")
	demo.Env, demo.Dir = env, project
	if out, err := demo.CombinedOutput(); err != nil {
		t.Errorf("dsh demo: %v\n%s", err, out)
	}

	doctor := exec.Command(dshBinary, "doctor")
	doctor.Env, doctor.Dir = env, project
	out, _ := doctor.CombinedOutput()
	for _, want := range []string{"WARN agent definitions: " + broken + ":4: maxTurns", "WARN agent definitions: " + worse + ":2: ",
		"WARN agent definitions: " + filepath.Join(project, ".claude", "agents", "sub", "rev.md") + ":4: tools: TaskCreate is a Claude Code tool dsh does not have"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("dsh doctor lacks %q:\n%s", want, out)
		}
	}
}
