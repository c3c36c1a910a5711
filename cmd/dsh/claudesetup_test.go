package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
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

// systemPrompt is the system message of a chat-completions request body.
func systemPrompt(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 || req.Messages[0].Role != "system" {
		t.Fatalf("no system message in %.200s (%v)", body, err)
	}
	return req.Messages[0].Content
}

// The project's instructions reach the model: the user's
// $DSH_HOME/AGENTS.md, the repository root's AGENTS.md and the working
// directory's CLAUDE.md (it has no AGENTS.md), in the system prompt of the
// parent and, identically and at the same place, of a spawn child and a
// fork child, so the prompt-cache prefix they share holds them.
func TestProjectInstructionsReachParentAndChildren(t *testing.T) {
	var mu sync.Mutex
	system := map[string]string{}
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		who := "parent"
		switch {
		case r.Child && strings.Contains(r.LastUser, "fork task"):
			who = "fork"
		case r.Child:
			who = "spawn"
		}
		if _, ok := system[who]; !ok {
			system[who] = string(r.Body)
		}
		switch {
		case r.Child:
			return llmtest.Reply{Text: "child done"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"helper","prompt":"spawn task"}`}}
		case len(r.ToolResults) == 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent_fork", Arguments: `{"description":"fork","prompt":"fork task"}`}}
		}
		return llmtest.Reply{Text: "all done"}
	})
	project, home := gitProject(t), t.TempDir()
	sub := filepath.Join(project, "service")
	os.MkdirAll(sub, 0o755)
	os.WriteFile(filepath.Join(home, "AGENTS.md"), []byte("USER-RULE: answer in English."), 0o644)
	os.WriteFile(filepath.Join(project, "AGENTS.md"), []byte("ROOT-RULE: run go test before you say done. See @docs/style.md"), 0o644)
	os.MkdirAll(filepath.Join(project, "docs"), 0o755)
	os.WriteFile(filepath.Join(project, "docs", "style.md"), []byte("IMPORTED-RULE: {{ tabs }}, not spaces."), 0o644)
	os.WriteFile(filepath.Join(sub, "CLAUDE.md"), []byte("SERVICE-RULE: the service speaks gRPC."), 0o644)
	cmd := exec.Command(dshBinary, "run", "--cwd", sub, "work")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "all done") {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	var parent string
	for _, who := range []string{"parent", "spawn", "fork"} {
		if system[who] == "" {
			t.Fatalf("no request of the %s", who)
		}
		s := systemPrompt(t, []byte(system[who]))
		rules := []string{"USER-RULE", "ROOT-RULE", "IMPORTED-RULE: {{ tabs }}, not spaces.", "SERVICE-RULE"}
		last := -1
		for _, rule := range rules {
			i := strings.Index(s, rule)
			if i <= last {
				t.Errorf("the %s's system prompt lacks %q after the rules before it:\n%s", who, rule, s)
			}
			last = i
		}
		if who == "parent" {
			parent = s
			continue
		}
		end := strings.Index(s, "SERVICE-RULE")
		if end < 0 || len(parent) < end || s[:end] != parent[:end] {
			t.Errorf("the %s's system prompt does not share the parent's up to the instructions:\n%s\n--- parent:\n%s", who, s, parent)
		}
	}
}

// dsh init writes a first AGENTS.md without a model (no key is set) and
// refuses to overwrite it.
func TestInitWritesAgentsMD(t *testing.T) {
	dir := gitProject(t)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/p\n"), 0o644)
	run := func() (string, error) {
		cmd := exec.Command(dshBinary, "init", "--cwd", dir)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "DSH_HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	path := filepath.Join(dir, "AGENTS.md")
	if err != nil || !strings.Contains(out, "wrote "+path) {
		t.Fatalf("dsh init: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), "- Test: `go test ./...`") {
		t.Errorf("AGENTS.md:\n%s", data)
	}
	os.WriteFile(path, []byte("edited"), 0o644)
	if out, err := run(); err == nil || !strings.Contains(out, path+": AGENTS.md exists; not overwritten") {
		t.Errorf("second dsh init: %v\n%s", err, out)
	}
	if data, _ := os.ReadFile(path); string(data) != "edited" {
		t.Errorf("dsh init overwrote AGENTS.md: %q", data)
	}
}

// /init in the interactive mode writes the same first AGENTS.md.
func TestSlashInit(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "unused"} })
	home, dir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte("[package]\nname = \"p\"\n"), 0o644)
	term := termtest.New(t, 160, 30)
	dsh := exec.Command(dshBinary)
	dsh.Dir = dir
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "TERM=xterm-256color",
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	if err := term.Start(dsh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dsh.Process.Kill(); dsh.Wait() })
	term.WaitText("ctrl+c twice exits")
	term.Type("/init" + termtest.Enter)
	term.WaitText("AGENTS.md: a first draft")
	if data, _ := os.ReadFile(filepath.Join(dir, "AGENTS.md")); !strings.Contains(string(data), "- Test: `cargo test`") {
		t.Errorf("AGENTS.md:\n%s", data)
	}
	term.Type("/init" + termtest.Enter)
	term.WaitText("not overwritten")
}

// A Claude Code definition's mcp__server__tool gives the child that MCP
// tool (and no other of the server's) when dsh.yaml configures the server.
func TestDefinitionGivesAChildAnMCPTool(t *testing.T) {
	docs := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	for _, name := range []string{"search", "fetch"} {
		docs.AddTool(&mcp.Tool{Name: name, Description: name + " the docs.", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " result"}}}, nil
			})
	}
	docsURL := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return docs }, nil))
	defer docsURL.Close()
	defer docsURL.CloseClientConnections()
	var mu sync.Mutex
	var childTools []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && len(r.ToolResults) == 0:
			mu.Lock()
			childTools = toolNames(r.Body)
			mu.Unlock()
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "mcp__docs__search", Arguments: `{}`}}
		case r.Child:
			return llmtest.Reply{Text: "child got " + r.ToolResults[0]}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"look","prompt":"look it up","subagent_type":"researcher"}`}}
		}
		return llmtest.Reply{Text: r.ToolResults[0]}
	})
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude", "agents"), 0o755)
	os.WriteFile(filepath.Join(home, ".claude", "agents", "researcher.md"),
		[]byte("---\nname: researcher\ndescription: Looks things up.\ntools: Read, mcp__docs__search\n---\nLook it up.\n"), 0o644)
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte("mcpServers:\n  docs:\n    url: "+docsURL.URL+"\n"), 0o600)
	cmd := exec.Command(dshBinary, "--config", cfg, "run", "--cwd", t.TempDir(), "research")
	cmd.Env = mcpEnv(home, srv.URL)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child got search result") {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(childTools, []string{"mcp__docs__search", "read_file"}) && !slices.Equal(childTools, []string{"read_file", "mcp__docs__search"}) {
		t.Errorf("the child was offered %q, want read_file and mcp__docs__search", childTools)
	}
}
