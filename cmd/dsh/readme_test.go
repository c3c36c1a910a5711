package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/testpeers"
)

// readmeConfig returns the dsh.yaml example of README.md, as written.
func readmeConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatal("README.md has no yaml block")
	}
	return string(m[1])
}

// TestREADMEConfig runs a delegation through every provider the README's
// dsh.yaml declares, with the file as written: spawn, fork and the
// `command: self` child always; Codex and Claude Code, the pinned real
// programs, in the interop tier. It checks the self child's lineage in
// `sessions list` and that the last line counts every child's tokens.
func TestREADMEConfig(t *testing.T) {
	yaml := readmeConfig(t)
	home := t.TempDir()
	cfgPath := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath, func(string) string { return "" })
	if err != nil || len(cfg.Warnings()) > 0 {
		t.Fatalf("README config: %v %q", err, cfg.Warnings())
	}

	tools := []string{"subagent", "subagent_fork", "subagent_isolated"}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "NO_PROXY=127.0.0.1"}
	if dir := os.Getenv("DSH_PEERS_DIR"); dir != "" || os.Getenv("CI") == "true" {
		bin := testpeers.Path(t, "node_modules/.bin")
		codexMock := llmtest.NewResponses(t)
		claudeMock := llmtest.NewAnthropic(t, func(r llmtest.AnthropicRequest) llmtest.AnthropicReply {
			return llmtest.AnthropicReply{Text: "claude did: " + r.LastUser}
		})
		// The only test-specific wiring: where each product's model is.
		// Claude Code reads ANTHROPIC_BASE_URL from the environment it
		// inherits; Codex reads its provider from CODEX_HOME, which a
		// codexHome key in the README's block would name.
		codexHome := t.TempDir()
		os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(fmt.Sprintf(`model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false
[model_providers.mock]
name = "mock"
base_url = "%s/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
[analytics]
enabled = false
`, codexMock.URL)), 0o600)
		wired := strings.Replace(yaml, "codex: {permissionMode: policy,", "codex: {codexHome: "+codexHome+", permissionMode: policy,", 1)
		if wired == yaml {
			t.Fatal("the README's codex block changed: update this test's wiring")
		}
		os.WriteFile(cfgPath, []byte(wired), 0o600)
		env = append(env, "PATH="+bin+":"+os.Getenv("PATH"), "OPENAI_API_KEY=fake", "ANTHROPIC_API_KEY=fake",
			"ANTHROPIC_BASE_URL="+claudeMock.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
			"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_MAX_RETRIES=0")
		tools = append(tools, "subagent_codex", "subagent_claude")
	}

	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if task, ok := strings.CutPrefix(r.LastUser, "task for "); ok {
			return llmtest.Reply{Text: "done: " + task}
		}
		if n := len(r.ToolResults); n < len(tools) {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: tools[n],
				Arguments: fmt.Sprintf(`{"description":"via %s","prompt":"task for %s"}`, tools[n], tools[n])}}
		}
		return llmtest.Reply{Text: "all children answered: " + strings.Join(r.ToolResults, " | ")}
	})
	env = append(env, "DEEPSEEK_BASE_URL="+srv.URL)
	cmd := exec.Command(dshBinary, "--config", cfgPath, "run", "--cwd", t.TempDir(), "delegate to every provider")
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s\n%s", err, out, stderr.String())
	}
	for _, tool := range tools {
		if !strings.Contains(stderr.String(), "via "+tool+" · completed") {
			t.Errorf("no completed child for %s:\n%s", tool, stderr.String())
		}
	}
	for _, want := range []string{"done: subagent |", "done: subagent_fork |", "done: subagent_isolated"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stdout lacks %q: %s", want, out)
		}
	}
	// Five tokens per loopback request: the parent's 4 requests and one
	// per in-process or self child (its usage travels back over ACP).
	id := regexp.MustCompile(`\[session ([0-9a-f-]{36}) · tokens in (\d+) \(\d+ cached\) out (\d+) · \$`).FindStringSubmatch(stderr.String())
	if id == nil {
		t.Fatalf("no session line with a cost:\n%s", stderr.String())
	}
	if len(tools) == 3 && (id[2] != "21" || id[3] != "14") {
		t.Errorf("usage in %s out %s, want 21 and 14 (children included)", id[2], id[3])
	}
	list := exec.Command(dshBinary, "--config", cfgPath, "sessions", "list", "--all", "--json")
	list.Env = env
	listed, err := list.Output()
	var rows []struct {
		Parent string
		Depth  int
	}
	if err != nil || json.Unmarshal(listed, &rows) != nil {
		t.Fatalf("sessions list: %v\n%s", err, listed)
	}
	children := 0
	for _, r := range rows {
		if r.Parent == id[1] && r.Depth == 1 {
			children++
		}
	}
	// Every continuable child has a session here (an out-of-process
	// child's is its record: the messages it was sent and its answers);
	// the self child also has the session its dsh acp process writes.
	// Claude Code without configDir keeps no conversation to continue, so
	// its child is one-shot, with no session of its own.
	want := len(tools) + 1
	if slices.Contains(tools, "subagent_claude") {
		want--
	}
	if children != want {
		t.Errorf("%d sessions at depth 1 under %s, want %d:\n%s", children, id[1], want, listed)
	}
}
