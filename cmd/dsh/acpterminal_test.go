package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/testpeers"
)

// acpTerminalRun drives dsh acp with the pinned TypeScript SDK client as
// an editor that offers terminal/* (in mode, see acp-terminal.mjs), under
// a user configuration config; the model runs bash with each of args in
// turn, then answers. It returns the tool results the model read last,
// with the client's report.
func acpTerminalRun(t *testing.T, config, mode string, args ...string) (results []string, got acpTerminalReport) {
	t.Helper()
	var mu sync.Mutex
	got = acpTerminalClient(t, config, mode, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		results = r.ToolResults
		if n := len(r.ToolResults); n < len(args) {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: args[n]}}
		}
		return llmtest.Reply{Text: "ran"}
	})
	mu.Lock()
	defer mu.Unlock()
	return results, got
}

// acpTerminalClient runs the terminal client against dsh acp and a model
// answering with reply, and returns its report.
func acpTerminalClient(t *testing.T, config, mode string, reply func(llmtest.Request) llmtest.Reply) (got acpTerminalReport) {
	t.Helper()
	sdk := testpeers.Path(t, "node_modules/@agentclientprotocol/sdk/dist/acp.js")
	srv := llmtest.NewServer(t, reply)
	home, cwd := t.TempDir(), t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte(config), 0o600)
	cmd := exec.Command("node", "testdata/acp-terminal.mjs", sdk, dshBinary, cwd, mode)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + cfg,
		"DEEPSEEK_API_KEY=" + acpTerminalKey, "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	if got.Exit != 0 || len(got.Invalid) > 0 {
		t.Fatalf("exit %d, invalid frames: %v", got.Exit, got.Invalid)
	}
	got.cwd = cwd
	return got
}

// methods lists the terminal methods the client saw, in order.
func (r acpTerminalReport) methods() string {
	var m []string
	for _, c := range r.Calls {
		m = append(m, c.Method)
	}
	return strings.Join(m, " ")
}

// acpTerminalArgs are two bash calls: one that prints (the model key of
// the editor's environment too) and fails, one that outlives its timeout.
var acpTerminalArgs = []string{`{"command":"echo in-terminal; pwd; echo \"key=$DEEPSEEK_API_KEY\"; exit 3"}`,
	`{"command":"sleep 30","timeout_ms":300}`}

// acpTerminalKey is the model key in the environment of dsh and the client.
const acpTerminalKey = "sk-terminal-0123456789abcdef0123456789"

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
// model reads the output (redacted) and the exit code as from dsh's own
// bash.
func TestACPTerminalRunsBashInTheClient(t *testing.T) {
	results, got := acpTerminalRun(t, "tools:\n  sandbox: full\n", "", acpTerminalArgs...)
	want := "create wait_for_exit output release create wait_for_exit kill output release"
	if got.methods() != want || got.Left != 0 || got.Stop != "end_turn" || len(results) != 2 {
		t.Fatalf("terminal calls %v (want %s), %d left, stop %q, results %q", got.methods(), want, got.Left, got.Stop, results)
	}
	c := got.Calls[0]
	if c.Command != "bash" || len(c.Args) != 2 || c.Args[0] != "-c" || c.Args[1] != `echo in-terminal; pwd; echo "key=$DEEPSEEK_API_KEY"; exit 3` ||
		c.Cwd != got.cwd || c.Limit <= 0 {
		t.Errorf("terminal/create %+v", c)
	}
	if !strings.Contains(results[0], "in-terminal\n"+got.cwd) || !strings.Contains(results[0], "exit code 3") ||
		!strings.Contains(results[0], "key=") || strings.Contains(results[0], acpTerminalKey) {
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
	results, got := acpTerminalRun(t, "", "", acpTerminalArgs...)
	if len(got.Calls) != 0 || len(results) != 2 {
		t.Fatalf("dsh used the client's terminal under the sandbox: %+v", got.Calls)
	}
	if !strings.Contains(results[0], "in-terminal") || !strings.Contains(results[1], "timed out") {
		t.Errorf("dsh's own bash: %q", results)
	}
}

// A child's commands stay dsh's, in its sandbox, whatever the client
// offers: only the session's own agent uses the client's terminal.
func TestACPTerminalNotForChildren(t *testing.T) {
	var childResult atomic.Value
	got := acpTerminalClient(t, "tools:\n  sandbox: full\n", "", func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo child-bash"}`}}
		case r.Child:
			childResult.Store(r.ToolResults[0])
			return llmtest.Reply{Text: "child done"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"helper","prompt":"run it"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	if got.Stop != "end_turn" || len(got.Calls) != 0 {
		t.Fatalf("stop %q; a child's bash used the client's terminal: %+v", got.Stop, got.Calls)
	}
	if r, _ := childResult.Load().(string); !strings.Contains(r, "child-bash") {
		t.Fatalf("the child's bash: %q", r)
	}
}

// session/cancel kills the command in the client's terminal and releases
// it; a client that answers more output than outputByteLimit has the
// output's tail kept, cut at a character.
func TestACPTerminalCancelAndFlood(t *testing.T) {
	_, got := acpTerminalRun(t, "tools:\n  sandbox: full\n", "cancel", `{"command":"sleep 30"}`)
	if got.methods() != "create wait_for_exit kill output release" || got.Left != 0 || got.Stop != "cancelled" {
		t.Fatalf("after a cancel: terminal calls %v, %d left, stop %q", got.methods(), got.Left, got.Stop)
	}
	results, got := acpTerminalRun(t, "tools:\n  sandbox: full\n  outputLimit: 1000\n", "flood", `{"command":"echo last-line"}`)
	if len(results) != 1 || !strings.HasPrefix(results[0], "(the beginning of the output is omitted)\n") ||
		!strings.HasSuffix(strings.TrimSpace(results[0]), "last-line") || len(results[0]) > 1100 || !utf8.ValidString(results[0]) {
		t.Fatalf("a flood of output: %d bytes, %.200q", len(results[0]), results)
	}
	if got.Calls[0].Limit != 1000 {
		t.Errorf("outputByteLimit %d, want tools.outputLimit", got.Calls[0].Limit)
	}
}
