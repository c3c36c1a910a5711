package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/testpeers"
)

// MCP as Claude Code runs it, against the pinned reference servers through
// `dsh run --json`: roots/list answers the working directory (so
// server-filesystem runs in roots mode, without a folder), a 161,600-byte
// result reaches the model capped, resources are listed and read, the
// task-required tool is not offered, a server name with a space is kept,
// server-memory works, and the servers' progress and logging notifications
// are --json lines.
func TestMCPAsClaudeCodeRunsIt(t *testing.T) {
	everything := testpeers.Path(t, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	filesystem := testpeers.Path(t, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	memory := testpeers.Path(t, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")
	features, err := os.ReadFile(filepath.Join(filepath.Dir(everything), "docs", "features.md"))
	if err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	big := strings.Repeat("0123456789abcdef\n", 9500) + "THE-END-OF-BIG.TXT"
	os.WriteFile(filepath.Join(project, "big.txt"), []byte(big), 0o600)
	os.WriteFile(filepath.Join(project, "small.txt"), []byte("small file"), 0o600)
	steps := []llmtest.ToolCall{
		{Name: "mcp__everything__get-roots-list", Arguments: `{}`},
		{Name: "mcp__everything__trigger-long-running-operation", Arguments: `{"duration":1,"steps":2}`},
		{Name: "list_mcp_resources", Arguments: `{"server":"everything"}`},
		{Name: "read_mcp_resource", Arguments: `{"server":"everything","uri":"demo://resource/static/document/features.md"}`},
		{Name: "mcp__my_memory__create_entities", Arguments: `{"entities":[{"name":"dsh","entityType":"harness","observations":["speaks MCP"]}]}`},
		{Name: "mcp__my_memory__read_graph", Arguments: `{}`},
		{Name: "mcp__files__read_text_file", Arguments: fmt.Sprintf(`{"path":%q}`, filepath.Join(project, "small.txt"))},
		{Name: "mcp__files__read_text_file", Arguments: fmt.Sprintf(`{"path":%q}`, filepath.Join(project, "big.txt"))},
	}
	var mu sync.Mutex
	var tools []string
	var results []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		n := len(r.ToolResults)
		if n == 0 {
			tools = toolNames(r.Body)
		}
		if n < len(steps) {
			return llmtest.Reply{ToolCall: &steps[n]}
		}
		results = r.ToolResults
		return llmtest.Reply{Text: "done"}
	})
	cfg := filepath.Join(t.TempDir(), "dsh.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
mcpServers:
  everything: {command: node, args: [%q], cwd: %q}
  files: {command: node, args: [%q]}
  "my memory": {command: node, args: [%q], env: {MEMORY_FILE_PATH: %q}, cwd: %q}
`, everything, project, filesystem, memory, filepath.Join(project, "memory.jsonl"), project)), 0o600)
	env := map[string]string{"PATH": os.Getenv("PATH"), "DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "--config", cfg, "run", "--json", "--cwd", project, "use the servers")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"mcp__everything__echo", "mcp__files__read_text_file", "mcp__my_memory__read_graph", "list_mcp_resources", "read_mcp_resource"} {
		if !slices.Contains(tools, want) {
			t.Errorf("the model was not offered %s: %v", want, tools)
		}
	}
	if slices.Contains(tools, "mcp__everything__simulate-research-query") {
		t.Error("the task-required tool was offered")
	}
	if len(results) != len(steps) {
		t.Fatalf("%d results:\n%s\nstderr:\n%s", len(results), strings.Join(results, "\n---\n"), errOut)
	}
	checks := []struct {
		i    int
		want string
	}{
		{0, "file://" + project},
		{1, "Long running operation completed"},
		{2, "demo://resource/static/document/features.md"},
		{3, string(features[:40])},
		{4, `"speaks MCP"`},
		{5, `"entityType": "harness"`},
		{6, "small file"},
		{7, "of the result's"},
	}
	for _, c := range checks {
		if !strings.Contains(results[c.i], c.want) {
			t.Errorf("result %d (%s) lacks %q:\n%.600s", c.i, steps[c.i].Name, c.want, results[c.i])
		}
	}
	if r := results[7]; len(r) > 31000 || !strings.HasPrefix(r, "0123456789abcdef") || !strings.HasSuffix(r, "THE-END-OF-BIG.TXT") {
		t.Errorf("big.txt reached the model as %d bytes", len(r))
	}

	var progress, logs int
	for line := range strings.Lines(out) {
		var l struct {
			Type     string   `json:"type"`
			Server   string   `json:"server"`
			Tool     string   `json:"tool"`
			ID       string   `json:"id"`
			Progress *float64 `json:"progress"`
			Of       float64  `json:"of"`
			Level    string   `json:"level"`
			Text     string   `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		switch l.Type {
		case "mcp_progress":
			if l.Server != "everything" || l.Tool != "mcp__everything__trigger-long-running-operation" || l.ID == "" || l.Progress == nil || l.Of != 2 {
				t.Errorf("progress line %s", line)
			}
			progress++
		case "mcp_log":
			if l.Server == "everything" && l.Level == "info" && strings.Contains(l.Text, "Roots updated: ") {
				logs++
			}
		}
	}
	if progress != 2 || logs == 0 {
		t.Errorf("%d progress lines, %d roots log lines:\n%s", progress, logs, out)
	}
}
