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
	"github.com/dsh-go/dsh/internal/testpeers"
)

// acpTerminalRun drives dsh acp with the pinned TypeScript SDK client as
// an editor that offers terminal/*, under a user configuration config;
// the model runs bash twice (a command that prints, then one that outlives
// its timeout) and the tool results it reads are returned with the
// client's report.
func acpTerminalRun(t *testing.T, config string) (results []string, got acpTerminalReport) {
	t.Helper()
	sdk := testpeers.Path(t, "node_modules/@agentclientprotocol/sdk/dist/acp.js")
	var mu sync.Mutex
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		switch len(r.ToolResults) {
		case 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo in-terminal; pwd; exit 3"}`}}
		case 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"sleep 30","timeout_ms":300}`}}
		}
		results = r.ToolResults
		return llmtest.Reply{Text: "ran"}
	})
	home, cwd := t.TempDir(), t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte(config), 0o600)
	cmd := exec.Command("node", "testdata/acp-terminal.mjs", sdk, dshBinary, cwd)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + cfg,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	if got.Exit != 0 || len(got.Invalid) > 0 || got.Stop != "end_turn" {
		t.Fatalf("exit %d, stop %q, invalid frames: %v", got.Exit, got.Stop, got.Invalid)
	}
	got.cwd = cwd
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 2 {
		t.Fatalf("the model read %d tool results: %q", len(results), results)
	}
	return results, got
}

// acpTerminalReport is what the terminal client saw.
type acpTerminalReport struct {
	Exit    int
	Invalid []map[string]string
	Stop    string
	Calls   []struct {
		Method, ID, Command, Cwd string
		Args                     []string
		Limit                    int
	}
	Left        int // terminals not released
	ToolUpdates []struct {
		ToolCallID string
		Status     string
		Content    []struct{ Type, TerminalID string }
	}
	cwd string
}

// With the sandbox full and a client that offers terminal/*, dsh acp's
// bash runs in the client's terminal: created with bash -c in the
// session's directory and an output limit, shown in the tool call, waited
// for, read, killed when it outlives its timeout, and always released; the
// model reads the output and the exit code as from dsh's own bash.
func TestACPTerminalRunsBashInTheClient(t *testing.T) {
	results, got := acpTerminalRun(t, "tools:\n  sandbox: full\n")
	var methods []string
	for _, c := range got.Calls {
		methods = append(methods, c.Method)
	}
	want := "create wait_for_exit output release create wait_for_exit kill output release"
	if strings.Join(methods, " ") != want || got.Left != 0 {
		t.Fatalf("terminal calls %v (want %s), %d left", methods, want, got.Left)
	}
	c := got.Calls[0]
	if c.Command != "bash" || len(c.Args) != 2 || c.Args[0] != "-c" || c.Args[1] != "echo in-terminal; pwd; exit 3" ||
		c.Cwd != got.cwd || c.Limit <= 0 {
		t.Errorf("terminal/create %+v", c)
	}
	if !strings.Contains(results[0], "in-terminal\n"+got.cwd) || !strings.Contains(results[0], "exit code 3") {
		t.Errorf("the first result: %q", results[0])
	}
	if !strings.Contains(results[1], "command timed out after 300ms and was killed") {
		t.Errorf("the second result: %q", results[1])
	}
	shown := map[string]bool{}
	for _, u := range got.ToolUpdates {
		for _, c := range u.Content {
			if c.Type == "terminal" && strings.HasPrefix(c.TerminalID, "term-") {
				shown[u.ToolCallID+" "+c.TerminalID+" "+u.Status] = true
			}
		}
	}
	if len(shown) < 4 {
		t.Errorf("the tool calls do not show their terminals: %+v", got.ToolUpdates)
	}
}

// Under the default sandbox, a client's terminal (the editor's process,
// outside the sandbox) is not used: bash stays dsh's.
func TestACPTerminalNotUnderTheSandbox(t *testing.T) {
	results, got := acpTerminalRun(t, "")
	if len(got.Calls) != 0 {
		t.Fatalf("dsh used the client's terminal under the sandbox: %+v", got.Calls)
	}
	if !strings.Contains(results[0], "in-terminal") || !strings.Contains(results[1], "timed out") {
		t.Errorf("dsh's own bash: %q", results)
	}
}
