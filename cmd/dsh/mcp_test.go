package main

import (
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

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/testpeers"
)

// toolNames lists the tools a chat-completions request offers.
func toolNames(body []byte) []string {
	var req struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &req)
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// leftovers lists the processes whose working directory or command line
// names dir: the MCP servers a dsh process started there, if it left any.
func leftovers(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if cwd == dir || strings.Contains(string(cmdline), dir) {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

func hasPrefixed(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// dsh run on a loopback model that calls the tools of the real reference
// servers (server-everything: text, an image, progress; server-filesystem:
// a file, an error) and delegates to a spawn child whose tool filter hides
// server-everything's tools. A third server that cannot start is a warning,
// not a failure. No server process is left.
func TestMCPServersInDshRun(t *testing.T) {
	everything := testpeers.Path(t, "node_modules/.bin/mcp-server-everything")
	filesystem := testpeers.Path(t, "node_modules/.bin/mcp-server-filesystem")
	project := t.TempDir()
	note := filepath.Join(project, "note.txt")
	os.WriteFile(note, []byte("remember the milk"), 0o600)
	var mu sync.Mutex
	var rootTools, childTools []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if r.LastUser == "list the files" {
			mu.Lock()
			childTools = toolNames(r.Body)
			mu.Unlock()
			if len(r.ToolResults) == 0 {
				return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "mcp__files__list_directory", Arguments: fmt.Sprintf(`{"path":%q}`, project)}}
			}
			return llmtest.Reply{Text: "child saw " + r.ToolResults[0]}
		}
		steps := []llmtest.ToolCall{
			{Name: "mcp__everything__echo", Arguments: `{"message":"hi"}`},
			{Name: "mcp__everything__get-tiny-image", Arguments: `{}`},
			{Name: "mcp__everything__trigger-long-running-operation", Arguments: `{"duration":1,"steps":2}`},
			{Name: "mcp__files__read_text_file", Arguments: fmt.Sprintf(`{"path":%q}`, note)},
			{Name: "mcp__files__read_text_file", Arguments: `{"path":"/etc/hostname"}`},
			{Name: "subagent", Arguments: `{"description":"look around","prompt":"list the files"}`},
		}
		n := len(r.ToolResults)
		if n == 0 {
			mu.Lock()
			rootTools = toolNames(r.Body)
			mu.Unlock()
		}
		if n < len(steps) {
			return llmtest.Reply{ToolCall: &steps[n]}
		}
		return llmtest.Reply{Text: strings.Join(r.ToolResults, "\n")}
	})
	cfg := filepath.Join(t.TempDir(), "dsh.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
mcpServers:
  everything: {command: %s, cwd: %s}
  files: {command: %s, args: [%s]}
  broken: {command: sh, args: [-c, "echo cannot start >&2; exit 3"]}
subagents:
  providers: [{name: spawn}]
  tools:
    - provider: spawn
      toolFilter: {deny: ["mcp__everything__*"]}
`, everything, project, filesystem, project)), 0o600)
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "--config", cfg, "run", "--cwd", project, "use the servers")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	for _, want := range []string{"Echo: hi", "[image: image/png,", "Long running operation completed", "remember the milk",
		"Error: Access denied", "child saw [FILE] note.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"· mcp__everything__trigger-long-running-operation 1/2",
		"→ mcp__files__read_text_file", "← error MCP_TOOL_ERROR", "↳ spawn · look around · completed",
		"dsh: warning: MCP server broken is unavailable", "exit status 3", "cannot start"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(rootTools, "mcp__everything__echo") || !slices.Contains(rootTools, "mcp__files__read_text_file") || hasPrefixed(rootTools, "mcp__broken__") {
		t.Errorf("the parent was offered %v", rootTools)
	}
	if hasPrefixed(childTools, "mcp__everything__") || !slices.Contains(childTools, "mcp__files__list_directory") {
		t.Errorf("the filtered child was offered %v", childTools)
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// dsh doctor starts each MCP server, the project's .mcp.json ones
// included, and lists their tools; one that cannot start fails its line.
func TestDoctorListsMCPServers(t *testing.T) {
	everything := testpeers.Path(t, "node_modules/.bin/mcp-server-everything")
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "unused"} })
	project, home := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(project, ".mcp.json"), []byte(fmt.Sprintf(`{"mcpServers": {
  "everything": {"command": %q, "args": []},
  "broken": {"command": "sh", "args": ["-c", "echo no such thing >&2; exit 3"]}
}}`, everything)), 0o600)
	trustFolder(t, home, project)
	cmd := exec.Command(dshBinary, "doctor")
	cmd.Dir = project
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("doctor passed:\n%s", out)
	}
	for _, want := range []string{
		"ok   MCP server everything (stdio: " + everything + ") from " + filepath.Join(project, ".mcp.json") + ": 13 tools: mcp__everything__echo,",
		"FAIL MCP server broken (stdio: sh -c echo no such thing >&2; exit 3) from " + filepath.Join(project, ".mcp.json") +
			": the handshake (initialize) failed: the server closed the connection; exit status 3; stderr: no such thing",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if left := leftovers(project); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// mcpEnv is the environment of a dsh process on the loopback model.
func mcpEnv(home, modelURL string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + modelURL}
}

// childModel answers a delegated prompt "child: <prompt>"; "hang" streams
// and then waits to be cancelled.
func childModel(t *testing.T) string {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if r.LastUser == "hang" {
			return llmtest.Reply{Text: "thinking", Hang: true}
		}
		return llmtest.Reply{Text: "child: " + r.LastUser}
	})
	return srv.URL
}

type progressLog struct {
	mu       sync.Mutex
	messages []string
	started  chan struct{}
}

func (p *progressLog) handle(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.messages = append(p.messages, r.Params.Message)
	if r.Params.Message == "turn 1 started" {
		select {
		case p.started <- struct{}{}:
		default:
		}
	}
}

func delegate(ctx context.Context, cs *mcp.ClientSession, prompt string) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: "subagent", Arguments: map[string]any{"description": "ask", "prompt": prompt}}
	p.SetProgressToken("progress-" + prompt)
	return cs.CallTool(ctx, p)
}

func mcpText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// The go-sdk's client drives `dsh mcp` over stdio: the tools, a delegation
// with progress and its result's stop reason and usage, a cancelled
// delegation (the server goes on), and a clean exit when the client
// leaves.
func TestDshMCPOverStdio(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(dshBinary, "mcp", "--cwd", t.TempDir())
	cmd.Env = mcpEnv(home, childModel(t))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	progress := &progressLog{started: make(chan struct{}, 1)}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress.handle})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"subagent", "subagent_fork", "task_kill", "task_list", "task_output"}) {
		t.Errorf("tools %v", names)
	}

	res, err := delegate(context.Background(), cs, "what is 6*7?")
	if err != nil || res.IsError || mcpText(res) != "child: what is 6*7?" {
		t.Fatalf("delegate: %+v %v\n%s", res, err, stderr.String())
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), `"stopReason":"completed"`) || !strings.Contains(string(raw), `"deepseek/deepseek-flash":{"inputTokens":3,"outputTokens":2}`) {
		t.Errorf("structured content %s", raw)
	}
	// The client handles notifications apart from results: the last may
	// come after the result.
	want := []string{"turn 1 started", "turn 1 ended: completed"}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		progress.mu.Lock()
		got := slices.Clone(progress.messages)
		progress.mu.Unlock()
		if slices.Equal(got, want) {
			break
		}
		if len(got) > len(want) || time.Now().After(deadline) {
			t.Fatalf("progress %q, want %q", got, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := delegate(ctx, cs, "hang")
		errc <- err
	}()
	<-progress.started
	cancel()
	if err := <-errc; err == nil {
		t.Error("the cancelled call returned a result")
	}
	if res, err := delegate(context.Background(), cs, "again"); err != nil || mcpText(res) != "child: again" {
		t.Errorf("after a cancel: %+v %v", res, err)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v\n%s", err, stderr.String())
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// `dsh mcp --listen` serves streamable HTTP on a loopback address only,
// and exits cleanly on SIGTERM.
func TestDshMCPOverHTTP(t *testing.T) {
	if _, _, err := runCLI(t, map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "k"}, "mcp", "--listen", "0.0.0.0:0"); err == nil ||
		!strings.Contains(err.Error(), "loopback addresses only") {
		t.Errorf("a public address: %v", err)
	}
	home := t.TempDir()
	l := startListening(t, home, "127.0.0.1:0")
	token, _ := os.ReadFile(filepath.Join(home, "mcp-token"))
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: l.where,
		HTTPClient: &http.Client{Transport: bearerAuth{strings.TrimSpace(string(token)), http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect to %q: %v", l.where, err)
	}
	if res, err := delegate(context.Background(), cs, "over http"); err != nil || mcpText(res) != "child: over http" {
		t.Errorf("delegate: %+v %v", res, err)
	}
	cs.Close()
	l.stop(t)
}

// Claude Code (pinned, on the Anthropic mock) delegates through `dsh mcp`,
// given with --mcp-config, to a spawn child on the loopback model.
func TestClaudeCodeDelegatesThroughDshMCP(t *testing.T) {
	claude := testpeers.Path(t, "node_modules/@anthropic-ai/claude-code-linux-x64/claude")
	home, cwd := t.TempDir(), t.TempDir()
	mock := llmtest.NewAnthropic(t, func(r llmtest.AnthropicRequest) llmtest.AnthropicReply {
		switch {
		case r.LastUser == "ask dsh what 6*7 is" && len(r.ToolResults) == 0:
			return llmtest.AnthropicReply{Text: "Delegating.", ToolUse: &llmtest.AnthropicToolUse{ID: "toolu_01", Name: "mcp__dsh__subagent",
				Input: map[string]any{"description": "multiply", "prompt": "what is 6*7?"}}}
		case len(r.ToolResults) > 0:
			return llmtest.AnthropicReply{Text: "dsh answered: " + r.ToolResults[0]}
		}
		return llmtest.AnthropicReply{Text: "ok"}
	})
	// The README's --mcp-config, wired to this dsh binary and the loopback
	// model.
	var mcpConfig struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(readmeBlock(t, "json", "## MCP, both ways")), &mcpConfig); err != nil {
		t.Fatal(err)
	}
	server := mcpConfig.MCPServers["dsh"]
	if server["command"] != "dsh" {
		t.Fatalf("the README's mcp config changed: %v", mcpConfig)
	}
	server["command"] = dshBinary
	server["env"] = map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": childModel(t)}
	wired, _ := json.Marshal(mcpConfig)
	cmd := exec.Command(claude, "-p", "ask dsh what 6*7 is", "--model", "mock-model", "--mcp-config", string(wired),
		"--strict-mcp-config", "--allowedTools", "mcp__dsh__subagent", "--output-format", "text")
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ANTHROPIC_BASE_URL=" + mock.URL, "ANTHROPIC_API_KEY=fake",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_MAX_RETRIES=0"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("claude: %v\n%s\n%s", err, out, stderr.String())
	}
	if !strings.Contains(string(out), "dsh answered:") || !strings.Contains(string(out), "child: what is 6*7?") {
		t.Errorf("claude printed %q\n%s", out, stderr.String())
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// acpText is an ACP client that approves asks and records the agent's
// message text.
type acpText struct {
	permClient
	mu   sync.Mutex
	text strings.Builder
}

func (c *acpText) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		c.mu.Lock()
		c.text.WriteString(m.Content.Text.Text)
		c.mu.Unlock()
	}
	return nil
}

// An ACP client passes server-everything in session/new: the session's
// agent and the spawn child it delegates to both call its tools; the
// server is gone when dsh exits.
func TestACPClientPassesAnMCPServer(t *testing.T) {
	everything := testpeers.Path(t, "node_modules/.bin/mcp-server-everything")
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if r.LastUser == "echo too" {
			if len(r.ToolResults) == 0 {
				return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "mcp__everything__echo", Arguments: `{"message":"from the child"}`}}
			}
			return llmtest.Reply{Text: "child got " + r.ToolResults[0]}
		}
		switch len(r.ToolResults) {
		case 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "mcp__everything__echo", Arguments: `{"message":"from acp"}`}}
		case 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"echo","prompt":"echo too"}`}}
		}
		return llmtest.Reply{Text: "done: " + strings.Join(r.ToolResults, " | ")}
	})
	home, cwd := t.TempDir(), t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte("subagents:\n  providers: [{name: spawn}]\n  tools: [{provider: spawn}]\n"), 0o600)
	client := &acpText{permClient: permClient{answer: "allow-once"}}
	conn, stop := startACP(t, client, home, cfg, srv.URL)
	sess, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: cwd, McpServers: []acpsdk.McpServer{
		{Stdio: &acpsdk.McpServerStdio{Name: "everything", Command: everything, Args: []string{}, Env: []acpsdk.EnvVariable{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := conn.Prompt(context.Background(), acpsdk.PromptRequest{SessionId: sess.SessionId,
		Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("echo through the client's server")}})
	if err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", resp, err)
	}
	client.mu.Lock()
	text := client.text.String()
	client.mu.Unlock()
	if !strings.Contains(text, "done: Echo: from acp | ") || !strings.Contains(text, "child got Echo: from the child") {
		t.Errorf("the agent said %q", text)
	}
	stop()
	if left := leftovers(cwd); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// readmeBlock returns the first block of lang after heading in README.md.

// The README's mcpServers example works as written: server-everything and
// server-filesystem through npx (a shim runs the pinned installs: the
// only wiring, with the docs server's URL), a streamable HTTP server with
// a header from the environment, the permission policy asking before a
// write (refused: dsh run asks nobody), and a spawn child whose filter
// hides server-everything's tools.
func TestREADMEMCP(t *testing.T) {
	bin := testpeers.Path(t, "node_modules/.bin")
	yaml := readmeBlock(t, "yaml", "## MCP, both ways")
	shims := t.TempDir()
	os.WriteFile(filepath.Join(shims, "npx"), []byte(`#!/bin/sh
# npx -y @modelcontextprotocol/server-NAME ARGS... runs the pinned mcp-server-NAME
[ "$1" = -y ] && shift
pkg=$1; shift
exec "`+bin+`/mcp-${pkg##*/}" "$@"
`), 0o755)
	docs := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	docs.AddTool(&mcp.Tool{Name: "search", Description: "Searches the docs.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Query string }
			json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "docs for " + a.Query}}}, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return docs }, nil)
	docsURL := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer docsURL.Close()
	defer docsURL.CloseClientConnections()
	wired := strings.Replace(yaml, "http://127.0.0.1:8931/mcp", docsURL.URL, 1)
	if wired == yaml {
		t.Fatal("the README's docs server changed: update this test's wiring")
	}
	home, project := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(project, "note.txt"), []byte("hello"), 0o600)
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte(wired), 0o600)

	var mu sync.Mutex
	var childTools []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if r.LastUser == "what can you use?" {
			mu.Lock()
			childTools = toolNames(r.Body)
			mu.Unlock()
			return llmtest.Reply{Text: "the child answered"}
		}
		steps := []llmtest.ToolCall{
			{Name: "mcp__everything__echo", Arguments: `{"message":"readme"}`},
			{Name: "mcp__files__list_directory", Arguments: fmt.Sprintf(`{"path":%q}`, project)},
			{Name: "mcp__docs__search", Arguments: `{"query":"mcp"}`},
			{Name: "mcp__files__write_file", Arguments: fmt.Sprintf(`{"path":%q,"content":"x"}`, filepath.Join(project, "out.txt"))},
			{Name: "subagent", Arguments: `{"description":"tools","prompt":"what can you use?"}`},
		}
		if n := len(r.ToolResults); n < len(steps) {
			return llmtest.Reply{ToolCall: &steps[n]}
		}
		return llmtest.Reply{Text: strings.Join(r.ToolResults, "\n")}
	})
	cmd := exec.Command(dshBinary, "--config", cfg, "run", "use the servers")
	cmd.Dir = project
	cmd.Env = append(mcpEnv(home, srv.URL), "PATH="+shims+":"+os.Getenv("PATH"), "DOCS_TOKEN=s3cret")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s\n%s", err, out, stderr.String())
	}
	for _, want := range []string{"Echo: readme", "[FILE] note.txt", "docs for mcp",
		"mcp__files__write_file needs approval, and `dsh run` asks nobody", "the child answered"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stdout lacks %q:\n%s\n%s", want, out, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(project, "out.txt")); err == nil {
		t.Error("the refused write happened")
	}
	mu.Lock()
	if hasPrefixed(childTools, "mcp__everything__") || !hasPrefixed(childTools, "mcp__files__") || !slices.Contains(childTools, "mcp__docs__search") {
		t.Errorf("the child was offered %v", childTools)
	}
	mu.Unlock()
	if left := leftovers(project); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// `dsh mcp` asks the go-sdk client's user before a child's write_file
// (the policy says ask), through the call's rounds (protocol 2026-07-28):
// allowed, the file is written; rejected, it is not, and the child goes on.
func TestDshMCPAsksTheClientsUser(t *testing.T) {
	for _, tc := range []struct{ decision string }{{"allow"}, {"reject"}} {
		t.Run(tc.decision, func(t *testing.T) {
			home, cwd := t.TempDir(), t.TempDir()
			srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
				if len(r.ToolResults) > 0 {
					return llmtest.Reply{Text: "child: " + r.ToolResults[0]}
				}
				return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "write_file", Arguments: `{"path":"out.txt","content":"hi"}`}}
			})
			cfg := filepath.Join(home, "dsh.yaml")
			os.WriteFile(cfg, []byte("permissions:\n  tools:\n    write_file: ask\n"), 0o600)
			cmd := exec.Command(dshBinary, "--config", cfg, "mcp", "--cwd", cwd)
			cmd.Env = mcpEnv(home, srv.URL)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			var asked []string
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = append(asked, r.Params.Message)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": tc.decision}}, nil
				}})
			cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, stderr.String())
			}
			res, err := delegate(context.Background(), cs, "write it")
			if err != nil || res.IsError {
				t.Fatalf("delegate: %+v %v\n%s", res, err, stderr.String())
			}
			if len(asked) != 1 || !strings.Contains(asked[0], "wants to run write_file with") {
				t.Errorf("asks %q", asked)
			}
			_, statErr := os.Stat(filepath.Join(cwd, "out.txt"))
			if written := statErr == nil; written != (tc.decision == "allow") {
				t.Errorf("out.txt written: %v after %s (result %q)", written, tc.decision, mcpText(res))
			}
			if err := cs.Close(); err != nil {
				t.Errorf("close: %v\n%s", err, stderr.String())
			}
		})
	}
}

// A child run in the background over MCP is a task the client collects
// with task_output: dsh mcp starts one-shot children even where the
// configuration makes them continuable (MCP does not serve send_message),
// and says so.
func TestDshMCPBackgroundIsATask(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte("subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: spawn\n      continuable: true\n"), 0o600)
	cmd := exec.Command(dshBinary, "--config", cfg, "mcp", "--cwd", t.TempDir())
	cmd.Env = mcpEnv(home, childModel(t))
	stderr := &lines{} // written by the command's copier while the test reads it
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "subagent",
		Arguments: map[string]any{"description": "bg", "prompt": "later", "run_in_background": true}})
	if err != nil || res.IsError || mcpText(res) != "started background subagent task subagent-1" {
		t.Fatalf("start: %+v %v\n%s", res, err, stderr.String())
	}
	out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_output",
		Arguments: map[string]any{"task_id": "subagent-1", "wait": true, "timeout_ms": 30000}})
	if err != nil || !strings.HasPrefix(mcpText(out), "child: later") {
		t.Fatalf("task_output: %+v %v\n%s", out, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "subagent tool subagent starts one-shot children here") {
		t.Errorf("no word that continuable: true was overridden:\n%s", stderr.String())
	}
}
