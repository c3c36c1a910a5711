package main

import (
	"bufio"
	"encoding/json"
	"fmt"
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
		res := r.ToolResults[0]
		return llmtest.Reply{Text: "the child said " + res[strings.LastIndex(res, "\n")+1:]} // after the line naming the child
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

// A third-party ACP client (the TypeScript SDK, pinned in tools/peers)
// creates a session in `dsh acp`, the process ends, a new `dsh acp` lists
// and loads the session — replaying its conversation — and a second prompt
// reaches the model with the first turn in its request.
func TestThirdPartyClientLoadsASessionInANewProcess(t *testing.T) {
	sdk := testpeers.Path(t, "node_modules/@agentclientprotocol/sdk/dist/acp.js")
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if r.LastUser == "second question" {
			return llmtest.Reply{Text: fmt.Sprintf("second answer (history kept: %v)",
				strings.Contains(string(r.Body), "first question") && strings.Contains(string(r.Body), "first answer"))}
		}
		return llmtest.Reply{Text: "first answer"}
	})
	home, cwd := t.TempDir(), t.TempDir()
	cmd := exec.Command("node", "testdata/acp-load.mjs", sdk, dshBinary, cwd)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		First struct {
			SessionID string             `json:"sessionId"`
			Stop      string             `json:"stop"`
			Answer    string             `json:"answer"`
			Exit      struct{ Code int } `json:"exit"`
		} `json:"first"`
		Second struct {
			LoadSession bool     `json:"loadSession"`
			Listed      []string `json:"listed"`
			ReplayUser  string   `json:"replayUser"`
			ReplayAgent string   `json:"replayAgent"`
			Stop        string   `json:"stop"`
			Answer      string   `json:"answer"`
		} `json:"second"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	f, s := got.First, got.Second
	if f.Stop != "end_turn" || f.Answer != "first answer" || f.Exit.Code != 0 {
		t.Errorf("first process: %+v", f)
	}
	if !s.LoadSession || len(s.Listed) != 1 || s.Listed[0] != f.SessionID || s.ReplayUser != "first question" || s.ReplayAgent != "first answer" {
		t.Errorf("load: %+v", s)
	}
	if s.Stop != "end_turn" || s.Answer != "second answer (history kept: true)" {
		t.Errorf("second prompt: %+v", s)
	}
}
