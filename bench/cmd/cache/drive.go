package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/bench/internal/dshbin"
)

// workspace makes a scenario's working directory with its generated files
// and returns the environment of a dsh on the loopback model.
func workspace(dir string, sc *scenario, baseURL, yaml string) (cwd string, env []string, err error) {
	cwd = filepath.Join(dir, "work")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return "", nil, err
	}
	for name, size := range sc.files {
		if err := os.WriteFile(filepath.Join(cwd, name), prose(name, size), 0o644); err != nil {
			return "", nil, err
		}
	}
	vars, err := dshbin.Env(dir, baseURL)
	if err != nil {
		return "", nil, err
	}
	if yaml != "" {
		if err := os.WriteFile(filepath.Join(vars["DSH_HOME"], "dsh.yaml"), []byte(yaml), 0o600); err != nil {
			return "", nil, err
		}
	}
	return cwd, dshbin.Environ(vars), nil
}

// prose returns about size bytes of numbered lines of plain words (nothing
// JSON must escape but the newlines), different for each name.
func prose(name string, size int) []byte {
	words := []string{"cache", "prefix", "child", "parent", "request", "token", "session", "history",
		"fork", "spawn", "model", "answer", "tool", "result", "turn", "step"}
	var b bytes.Buffer
	for line := 1; b.Len() < size; line++ {
		fmt.Fprintf(&b, "%s line %d:", strings.TrimSuffix(name, ".txt"), line)
		for w := range 10 {
			b.WriteString(" " + words[(line*7+w*3+len(name))%len(words)])
		}
		b.WriteString(".\n")
	}
	return b.Bytes()
}

// runDsh runs `dsh run --yes PROMPT` in cwd and fails unless it exits 0.
func runDsh(ctx context.Context, bin, cwd string, env []string, prompt string) error {
	cmd := exec.CommandContext(ctx, bin, "run", "--yes", prompt)
	cmd.Dir, cmd.Env = cwd, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("dsh run: %v\n%s", err, tail(stderr.String(), 2000))
	}
	return nil
}

// runACP starts `dsh acp` in cwd, opens one session there and sends each
// prompt as one turn of it, in order; then it closes stdin and waits for
// the process to exit.
func runACP(ctx context.Context, bin, cwd string, env []string, prompts []string) (err error) {
	cmd := exec.Command(bin, "acp")
	cmd.Dir, cmd.Env = cwd, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, tail(stderr.String(), 2000))
		}
	}()
	conn := acpsdk.NewClientSideConnection(&acpClient{}, stdin, stdout)
	if _, err := conn.Initialize(ctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber}); err != nil {
		return fmt.Errorf("dsh acp: initialize: %w", err)
	}
	sess, err := conn.NewSession(ctx, acpsdk.NewSessionRequest{Cwd: cwd, McpServers: []acpsdk.McpServer{}})
	if err != nil {
		return fmt.Errorf("dsh acp: session/new: %w", err)
	}
	for i, p := range prompts {
		resp, err := conn.Prompt(ctx, acpsdk.PromptRequest{SessionId: sess.SessionId, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(p)}})
		if err != nil {
			return fmt.Errorf("dsh acp: prompt %d: %w", i+1, err)
		}
		if resp.StopReason != acpsdk.StopReasonEndTurn {
			return fmt.Errorf("dsh acp: prompt %d stopped %s", i+1, resp.StopReason)
		}
	}
	return nil
}

// acpClient approves what the agent asks and offers no file system or
// terminal.
type acpClient struct{}

var _ acpsdk.Client = (*acpClient)(nil)

var errUnsupported = errors.New("not offered by this client")

func (*acpClient) RequestPermission(_ context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	for _, o := range p.Options {
		if o.Kind == acpsdk.PermissionOptionKindAllowOnce || o.Kind == acpsdk.PermissionOptionKindAllowAlways {
			return acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{
				Selected: &acpsdk.RequestPermissionOutcomeSelected{OptionId: o.OptionId}}}, nil
		}
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{Cancelled: &acpsdk.RequestPermissionOutcomeCancelled{}}}, nil
}

func (*acpClient) SessionUpdate(context.Context, acpsdk.SessionNotification) error { return nil }

func (*acpClient) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, errUnsupported
}

func (*acpClient) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, errUnsupported
}

func (*acpClient) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, errUnsupported
}

func (*acpClient) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, errUnsupported
}

func (*acpClient) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, errUnsupported
}

func (*acpClient) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, errUnsupported
}

func (*acpClient) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, errUnsupported
}

// syncBuffer is a bytes.Buffer safe for one writer and a later reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tail keeps the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
