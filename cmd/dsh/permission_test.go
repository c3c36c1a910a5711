package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
)

// permClient is an ACP client that answers every permission request with
// one option and records the requests.
type permClient struct {
	answer string // the option id it selects
	mu     sync.Mutex
	titles []string
}

func (c *permClient) RequestPermission(_ context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	title := ""
	if p.ToolCall.Title != nil {
		title = *p.ToolCall.Title
	}
	c.titles = append(c.titles, title)
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(acpsdk.PermissionOptionId(c.answer))}, nil
}

func (c *permClient) asked() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.titles...)
}

func (c *permClient) SessionUpdate(context.Context, acpsdk.SessionNotification) error { return nil }
func (c *permClient) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, acpsdk.NewMethodNotFound("fs/read_text_file")
}
func (c *permClient) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, acpsdk.NewMethodNotFound("fs/write_text_file")
}
func (c *permClient) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, acpsdk.NewMethodNotFound("terminal/create")
}
func (c *permClient) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, acpsdk.NewMethodNotFound("terminal/kill")
}
func (c *permClient) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, acpsdk.NewMethodNotFound("terminal/output")
}
func (c *permClient) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, acpsdk.NewMethodNotFound("terminal/release")
}
func (c *permClient) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, acpsdk.NewMethodNotFound("terminal/wait_for_exit")
}

// delegationModel scripts a parent that delegates "via TOOL [background]"
// to a child told "child: append to MARKER", and a child that appends one
// line to the marker file with bash.
func delegationModel(t *testing.T) *httptest.Server {
	return llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if marker, ok := strings.CutPrefix(r.LastUser, "child: append to "); ok {
			if len(r.ToolResults) == 0 {
				return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":"echo ran >> %s"}`, marker)}}
			}
			return llmtest.Reply{Text: "child: " + r.ToolResults[0]}
		}
		if via, ok := strings.CutPrefix(r.LastUser, "via "); ok && len(r.ToolResults) == 0 {
			tool, marker, _ := strings.Cut(via, " ")
			background := strings.HasSuffix(tool, "+bg")
			tool = strings.TrimSuffix(tool, "+bg")
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: tool,
				Arguments: fmt.Sprintf(`{"description":"touch the marker","prompt":"child: append to %s","run_in_background":%v}`, marker, background)}}
		}
		return llmtest.Reply{Text: "parent done"}
	})
}

// TestACPChildrenAskBeforeBash: under `dsh acp`, a spawned, a forked, a
// background and a `command: self` child each ask the client before bash
// runs, the request names the child, and a rejected command never runs; an
// allowed one runs once.
func TestACPChildrenAskBeforeBash(t *testing.T) {
	srv := delegationModel(t)
	home := t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte(`
subagents:
  providers:
    - name: spawn
    - name: fork
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - provider: spawn
    - provider: fork
      toolName: subagent_fork
    - provider: isolated
      toolName: subagent_isolated
`), 0o644)
	cases := []struct{ via, names string }{
		{"subagent", "spawn · touch the marker: bash"},
		{"subagent_fork", "fork · touch the marker: bash"},
		{"subagent+bg", "spawn · touch the marker: bash"},
		{"subagent_isolated", "isolated · touch the marker: bash"},
	}
	for _, answer := range []string{"reject-once", "allow-once"} {
		for _, tc := range cases {
			t.Run(answer+"/"+tc.via, func(t *testing.T) {
				client := &permClient{answer: answer}
				conn, stop := startACP(t, client, home, cfg, srv.URL)
				defer stop()
				cwd := t.TempDir()
				sess, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: cwd, McpServers: []acpsdk.McpServer{}})
				if err != nil {
					t.Fatal(err)
				}
				marker := filepath.Join(cwd, "marker")
				resp, err := conn.Prompt(context.Background(), acpsdk.PromptRequest{SessionId: sess.SessionId,
					Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("via " + tc.via + " " + marker)}})
				if err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
					t.Fatalf("prompt: %+v, %v", resp, err)
				}
				// A background child asks after the prompt has returned.
				deadline := time.Now().Add(20 * time.Second)
				for len(client.asked()) == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				asked := client.asked()
				if len(asked) != 1 || !strings.Contains(asked[0], tc.names) {
					t.Fatalf("permission requests %q, want one naming %q", asked, tc.names)
				}
				want := ""
				if answer == "allow-once" { // a background child may still be on its way to bash
					want = "ran\n"
					for data, _ := os.ReadFile(marker); len(data) == 0 && time.Now().Before(deadline); data, _ = os.ReadFile(marker) {
						time.Sleep(10 * time.Millisecond)
					}
				}
				stop() // ends every child, so the marker is final
				data, _ := os.ReadFile(marker)
				if string(data) != want {
					t.Fatalf("marker holds %q, want %q", data, want)
				}
			})
		}
	}
}

// startACP runs `dsh acp` as a process driven by client; stop ends it and
// checks that no process is left.
func startACP(t *testing.T, client acpsdk.Client, home, cfg, modelURL string) (*acpsdk.ClientSideConnection, func()) {
	t.Helper()
	cmd := exec.Command(dshBinary, "acp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + cfg,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + modelURL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	conn := acpsdk.NewClientSideConnection(client, stdin, stdout)
	if _, err := conn.Initialize(context.Background(), acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber}); err != nil {
		t.Fatalf("initialize: %v\n%s", err, stderr.String())
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("dsh acp: %v\n%s", err, stderr.String())
			}
			<-conn.Done()
			if err := proc.NoChildren(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return conn, stop
}
