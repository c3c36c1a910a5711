package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/session"
)

// stopSleep is what the background child runs; its odd length marks its
// process.
const stopSleep = "sleep 30.0719"

// stopConfig mounts spawn (continuable with the default JSONL store) with
// bash allowed.
const stopConfig = `permissions: {tools: {bash: allow}}
subagents:
  providers:
    - name: spawn
  tools:
    - provider: spawn
`

// stopOneShotConfig mounts spawn with one-shot children: a background one
// runs as a task.
const stopOneShotConfig = `permissions: {tools: {bash: allow}}
subagents:
  providers:
    - name: spawn
  tools:
    - provider: spawn
      continuable: false
`

// stopSelfConfig mounts this dsh over ACP as the subagent tool: the
// continuable child runs in a process of its own.
const stopSelfConfig = `permissions: {tools: {bash: allow}}
subagents:
  providers:
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - {provider: isolated, toolName: subagent, subagentTypes: false}
acp:
  askPermission: []
`

// stopModel is the model of the tree-stop tests: the root starts one
// background child that runs stopSleep; any later request is counted.
type stopModel struct {
	mu       sync.Mutex
	requests []llmtest.Request
}

func (m *stopModel) reply(r llmtest.Request) llmtest.Reply {
	m.mu.Lock()
	m.requests = append(m.requests, r)
	m.mu.Unlock()
	switch {
	case r.LastUser == "SLEEPER" && len(r.ToolResults) == 0: // in process or out
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"` + stopSleep + `"}`}}
	case !r.Child && r.LastUser == "go" && len(r.ToolResults) == 0:
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
			Arguments: `{"description":"sleeper","prompt":"SLEEPER","run_in_background":true}`}}
	}
	return llmtest.Reply{Text: "ok"}
}

func (m *stopModel) seen() []llmtest.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llmtest.Request(nil), m.requests...)
}

// waitSleeper returns the PID of the child's sleep below pid, once it runs.
func waitSleeper(t *testing.T, pid int, stderr func() string) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ps := treeProcesses(pid, stopSleep); len(ps) > 0 {
			return ps[0]
		}
	}
	t.Fatalf("the child's %s never ran; dsh said: %s", stopSleep, stderr())
	return 0
}

// goneWithin fails t unless pid is gone within d.
func goneWithin(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the child's %s (pid %d) still runs %s after the stop", stopSleep, pid, d)
		}
	}
}

// stopSession starts `dsh acp` with config in home, against the model at
// modelURL, and opens a session.
func stopSession(t *testing.T, home, config, modelURL string) (*acpsdk.ClientSideConnection, acpsdk.NewSessionResponse, func()) {
	t.Helper()
	cfg := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	conn, stop := startACP(t, &permClient{answer: "allow-once"}, home, cfg, modelURL)
	sess, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{}})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	return conn, sess, stop
}

// ACP session/cancel stops the tree: a background continuable child's
// turn and its bash process end within 2 s, the model gets no request
// until the next prompt, and that prompt shows the model the child's
// notice.
func TestTreeStopACPCancel(t *testing.T) {
	for name, config := range map[string]string{"inproc": stopConfig, "outofprocess": stopSelfConfig, "oneshot": stopOneShotConfig} {
		t.Run(name, func(t *testing.T) { treeStopACPCancel(t, config) })
	}
}

func treeStopACPCancel(t *testing.T, config string) {
	m := &stopModel{}
	srv := llmtest.NewServer(t, m.reply)
	home := t.TempDir()
	conn, sess, stop := stopSession(t, home, config, srv.URL)
	defer stop()
	ctx := context.Background()
	resp, err := conn.Prompt(ctx, acpsdk.PromptRequest{SessionId: sess.SessionId, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("go")}})
	if err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v", resp, err)
	}
	sleeper := waitSleeper(t, os.Getpid(), func() string { return "" })
	before := len(m.seen())
	if err := conn.Cancel(ctx, acpsdk.CancelNotification{SessionId: sess.SessionId}); err != nil {
		t.Fatal(err)
	}
	goneWithin(t, sleeper, 2*time.Second)
	time.Sleep(time.Second) // a notice that opened a turn would call the model by now
	if after := m.seen(); len(after) != before {
		t.Fatalf("the model got %d requests after session/cancel, before any prompt: %+v", len(after)-before, after[before:])
	}
	resp, err = conn.Prompt(ctx, acpsdk.PromptRequest{SessionId: sess.SessionId, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("next")}})
	if err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("next prompt: %+v, %v", resp, err)
	}
	after := m.seen()
	if len(after) != before+1 || !strings.Contains(string(after[before].Body), "Background subagent") &&
		!strings.Contains(string(after[before].Body), "background task subagent-1") {
		t.Errorf("the next prompt's request does not show the child's notice (%d requests)", len(after)-before)
	}
}

// SIGINT under `dsh run` stops the tree: the background continuable
// child's bash process ends within 2 s, dsh exits 130, and the model gets
// no further request.
func TestTreeStopSIGINTUnderRun(t *testing.T) {
	m := &stopModel{}
	srv := llmtest.NewServer(t, m.reply)
	home, cwd := t.TempDir(), t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(cfg, []byte(stopConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	dsh := exec.Command(dshBinary, "run", "--cwd", cwd, "go")
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + cfg,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr lines
	dsh.Stderr = &stderr
	if err := dsh.Start(); err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	go func() { finished <- dsh.Wait() }()
	sleeper := waitSleeper(t, dsh.Process.Pid, stderr.String)
	before := len(m.seen())
	if err := dsh.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	goneWithin(t, sleeper, 2*time.Second)
	select {
	case err := <-finished:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupt {
			t.Errorf("dsh run ended %v, want exit %d; it said: %s", err, exitInterrupt, stderr.String())
		}
	case <-time.After(10 * time.Second):
		dsh.Process.Kill()
		t.Fatalf("dsh run did not exit after SIGINT; it said: %s", stderr.String())
	}
	if after := m.seen(); len(after) != before {
		t.Errorf("the model got %d requests after SIGINT", len(after)-before)
	}
	if ps := descendants(os.Getpid()); len(treeProcesses(os.Getpid(), stopSleep)) > 0 {
		t.Errorf("processes left: %v", ps)
	}
	children := 0
	for id, st := range storedSessions(t, home) {
		if st.header.ParentSession == "" {
			continue
		}
		children++
		end, ok := lastTurnEnd(st.repaired)
		if !ok || end.Reason.Cause == nil || end.Reason.Cause.Kind != "user" || end.Reason.Cause.Reason != "SIGINT" {
			t.Errorf("child %s's turn ended %s with cause %+v, want aborted by the user (SIGINT)", id, end.Reason.Kind, end.Reason.Cause)
		}
	}
	if children != 1 {
		t.Errorf("%d child sessions, want 1", children)
	}
}

// stopRemoteConfig mounts this dsh over ACP (subagent) and spawn (local):
// a self child runs in a process of its own, and its own children in that
// process.
const stopRemoteConfig = `permissions: {tools: {bash: allow}}
subagents:
  providers:
    - name: spawn
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - {provider: isolated, toolName: subagent, subagentTypes: false}
    - {provider: spawn, toolName: local, subagentTypes: false}
acp:
  askPermission: []
`

// interrupt_agent works on every row list_agents scope: descendants shows,
// a grandchild that lives in a self child's process included: the root
// asks the self child's process to interrupt it there, and its bash
// process ends within 2 s.
func TestInterruptAgentReachesAGrandchildInAnotherProcess(t *testing.T) {
	var mu sync.Mutex
	var results []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.LastUser == "SLEEPER" && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"` + stopSleep + `"}`}}
		case r.LastUser == "MIDDLE" && len(r.ToolResults) == 0: // the self child waits for its own child
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "local", Arguments: `{"description":"sleeper","prompt":"SLEEPER"}`}}
		case r.LastUser == "go" && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"middle","prompt":"MIDDLE","run_in_background":true}`}}
		case strings.HasPrefix(r.LastUser, "stop ") && len(r.ToolResults) == 1: // the first turn's subagent call's
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "interrupt_agent",
				Arguments: `{"agent_id":"` + strings.TrimPrefix(r.LastUser, "stop ") + `"}`}}
		case strings.HasPrefix(r.LastUser, "stop "):
			mu.Lock()
			results = append(results, r.ToolResults[len(r.ToolResults)-1])
			mu.Unlock()
		}
		return llmtest.Reply{Text: "ok"}
	})
	home := t.TempDir()
	conn, sess, stop := stopSession(t, home, stopRemoteConfig, srv.URL)
	defer stop()
	ctx := context.Background()
	prompt := func(text string) {
		t.Helper()
		resp, err := conn.Prompt(ctx, acpsdk.PromptRequest{SessionId: sess.SessionId, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
		if err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("prompt %q: %+v, %v", text, resp, err)
		}
	}
	prompt("go")
	sleeper := waitSleeper(t, os.Getpid(), func() string { return "" })
	var grandchild string
	for id, st := range storedSessions(t, home) {
		for _, e := range st.repaired {
			if c, ok := e.Data.(session.ToolCall); ok && c.Name == "bash" {
				grandchild = id
			}
		}
	}
	if grandchild == "" {
		t.Fatal("no stored session ran the sleeper")
	}
	prompt("stop " + grandchild)
	mu.Lock()
	got := slices.Clone(results)
	mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], "interrupt requested") {
		t.Fatalf("interrupt_agent answered %q", got)
	}
	goneWithin(t, sleeper, 2*time.Second)
}
