package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/testpeers"
)

// The third-party ACP client acpx drives `dsh acp` for one prompt. The
// model first asks for bash, which needs the client's permission.
func TestACPXDrivesDshACP(t *testing.T) {
	acpx := testpeers.Path(t, "node_modules/.bin/acpx")
	bin := dshBinary
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{Text: "Checking. ", ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo from-bash"}`}}
		}
		return llmtest.Reply{Text: "bash said: " + strings.TrimSpace(r.ToolResults[0])}
	})
	for _, tc := range []struct {
		flag string
		code int
		want string
	}{
		{"--approve-all", 0, "bash said: from-bash"},
		{"--deny-all", 5, "bash said: Error: the user rejected this call of bash"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			home, cwd := t.TempDir(), t.TempDir()
			cmd := exec.Command(acpx, "--agent", bin+" acp", tc.flag, "--format", "json", "--timeout", "60", "--cwd", cwd, "exec", "run echo")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + filepath.Join(home, ".dsh"),
				"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
			out, err := cmd.Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			stop := ""
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var m struct {
					Method string `json:"method"`
					Params struct {
						Update struct {
							Kind    string          `json:"sessionUpdate"`
							Content json.RawMessage `json:"content"`
						} `json:"update"`
					} `json:"params"`
					Result struct {
						StopReason string `json:"stopReason"`
					} `json:"result"`
				}
				if json.Unmarshal(sc.Bytes(), &m) != nil {
					t.Fatalf("stdout line is not JSON: %s", sc.Bytes())
				}
				if m.Params.Update.Kind == "agent_message_chunk" {
					var c struct {
						Text string `json:"text"`
					}
					json.Unmarshal(m.Params.Update.Content, &c)
					text.WriteString(c.Text)
				}
				if m.Result.StopReason != "" {
					stop = m.Result.StopReason
				}
			}
			if code != tc.code || stop != "end_turn" || !strings.Contains(text.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stop %q, text %q\n%s", code, tc.code, stop, text.String(), out)
			}
		})
	}
}

// A dsh parent delegates to a dsh child running in acp mode as a separate
// process (command "self"): the full self-hosting loop through the real
// binary, the real model adapter on both sides, and a loopback model.
func TestSelfHostedACPChild(t *testing.T) {
	bin := dshBinary
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.LastUser == "what is 6*7?":
			return llmtest.Reply{Text: "42"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent_isolated",
				Arguments: `{"description":"compute","prompt":"what is 6*7?"}`}}
		}
		return llmtest.Reply{Text: "the child said " + r.ToolResults[0]}
	})
	home := t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte(`
subagents:
  providers:
    - name: dsh
      kind: acp
      acp: {command: self}
  tools:
    - provider: dsh
      toolName: subagent_isolated
`), 0o644)
	cmd := exec.Command(bin, "run", "--cwd", t.TempDir(), "delegate the sum")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + cfg,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, stderr.String())
	}
	if strings.TrimSpace(string(out)) != "the child said 42" {
		t.Fatalf("stdout %q\nstderr %s", out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "↳ dsh · compute · completed") {
		t.Fatalf("stderr lacks the child's run:\n%s", stderr.String())
	}
}
