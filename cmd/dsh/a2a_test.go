package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/a2achild"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// a2aModel is the model of a `dsh a2a` tree: the task's agent delegates
// "delegate: X" to a spawn child and reports the child's answer; a child
// answers "child: X" ("hang" hangs); the conformance prompts complete,
// hang and fail at the task's agent itself.
func a2aModel(t *testing.T) string {
	inner := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && r.LastUser == "hang":
			return llmtest.Reply{Text: "thinking", Hang: true}
		case r.Child:
			return llmtest.Reply{Text: "child: " + r.LastUser}
		case len(r.ToolResults) > 0:
			return llmtest.Reply{Text: "parent got: " + r.ToolResults[len(r.ToolResults)-1]}
		case strings.HasPrefix(r.LastUser, "run: "):
			args, _ := json.Marshal(map[string]string{"command": strings.TrimPrefix(r.LastUser, "run: ")})
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: string(args)}}
		case strings.HasPrefix(r.LastUser, "remote: "):
			args, _ := json.Marshal(map[string]string{"description": "remote", "prompt": "delegate: " + strings.TrimPrefix(r.LastUser, "remote: ")})
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "remote", Arguments: string(args)}}
		case strings.HasPrefix(r.LastUser, "delegate: "):
			args, _ := json.Marshal(map[string]string{"description": "asked", "prompt": strings.TrimPrefix(r.LastUser, "delegate: ")})
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: string(args)}}
		case r.LastUser == subagenttest.PromptHang:
			return llmtest.Reply{Text: "working", Hang: true}
		case r.LastUser == subagenttest.PromptFail:
			return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"scripted failure"}}`}
		}
		return llmtest.Reply{Text: "done: " + r.LastUser}
	})
	inner.Close()
	// No connection of dsh's outlives its request for long (nor one that
	// dsh dialled for a request it then cancelled): the conformance suite
	// finds no goroutine of this server left after a scenario (it waits
	// about 400ms for them to end).
	srv := httptest.NewUnstartedServer(inner.Config.Handler)
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Config.ReadHeaderTimeout = 250 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// a2aServing is a `dsh a2a` process.
type a2aServing struct {
	cmd    *exec.Cmd
	home   string
	base   string // http://host:port
	token  string
	stderr *lines
}

// startA2A starts `dsh a2a` on a free loopback port and waits until it
// serves.
func startA2A(t *testing.T, args ...string) *a2aServing {
	t.Helper()
	return startA2AWith(t, "", args...)
}

// startA2AWith starts `dsh a2a` with config as its dsh.yaml ("" none).
func startA2AWith(t *testing.T, config string, args ...string) *a2aServing {
	t.Helper()
	home := t.TempDir()
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(dshBinary, append([]string{"a2a", "--listen", "127.0.0.1:0", "--cwd", t.TempDir()}, args...)...)
	cmd.Env = mcpEnv(home, a2aModel(t))
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &a2aServing{cmd: cmd, home: home, stderr: &lines{}}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(pipe)
	var said []string
	for s.base == "" && sc.Scan() {
		said = append(said, sc.Text())
		if _, rest, ok := strings.Cut(sc.Text(), "serving A2A 0.3 (JSON-RPC) at "); ok {
			endpoint, _, _ := strings.Cut(rest, ",")
			s.base = strings.TrimSuffix(endpoint, "/a2a")
		}
	}
	if s.base == "" {
		cmd.Wait()
		t.Fatalf("dsh a2a did not serve:\n%s", strings.Join(said, "\n"))
	}
	go io.Copy(s.stderr, pipe)
	token, err := os.ReadFile(filepath.Join(home, "a2a-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(token))
	return s
}

// stop ends the server with SIGTERM: it exits cleanly and leaves no
// process behind.
func (s *a2aServing) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("dsh a2a: %v\n%s", err, s.stderr.String())
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// provider is an a2a provider for s, with its token.
func (s *a2aServing) provider(t *testing.T, maxDepth int) *a2achild.Provider {
	t.Helper()
	p, err := a2achild.New(a2achild.Config{URL: s.base, TokenEnv: "DSH_A2A_TOKEN", MaxDepth: maxDepth,
		Getenv: func(string) string { return s.token }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The a2a provider passes the conformance suite against `dsh a2a`.
func TestA2AProviderConformsAgainstDshA2A(t *testing.T) {
	s := startA2A(t)
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return s.provider(t, 0), subagenttest.ParentAgent(t)
		},
		Timeout: time.Minute,
	})
	s.stop(t)
}

// A parent delegates to `dsh a2a` through the a2a provider; the task's
// agent delegates to a spawn child. The child's progress reaches the
// parent, the usage of the remote tree comes back, the depth crosses the
// hop in the message's metadata (the remote sessions sit one and two
// below the parent) and is capped there, and the sessions are stored.
func TestA2ADelegationAcrossTheHop(t *testing.T) {
	s := startA2A(t)
	p := s.provider(t, 4)
	parent := subagenttest.ParentAgent(t)
	var mu sync.Mutex
	var progress []string
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("delegate: fix it"), Parent: parent,
		Depth: parent.Depth() + 1, Progress: func(pr subagent.Progress) {
			mu.Lock()
			progress = append(progress, pr.Text)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Completed || !strings.Contains(outputText(res), "parent got:") || !strings.Contains(outputText(res), "child: fix it") {
		t.Fatalf("result %+v: want the remote agent's answer with its child's", res)
	}
	var total int64
	for _, u := range res.Usage {
		total += u.Input + u.Output
	}
	if total == 0 {
		t.Errorf("usage %v: want the remote tree's tokens", res.Usage)
	}
	mu.Lock()
	if joined := strings.Join(progress, "\n"); !strings.Contains(joined, "[spawn · asked] started") {
		t.Errorf("progress %q: want the remote child's start as a status update", joined)
	}
	mu.Unlock()

	// Capped across the hop: at depth 3, the remote agent's child would be
	// at 4, beyond the remote subagent tool's maxDepth (3).
	run, err = p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("delegate: deeper"), Parent: parent, Depth: 3})
	if err != nil {
		t.Fatal(err)
	}
	res = subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if out := outputText(res); strings.Contains(out, "child: deeper") || !strings.Contains(out, "depth") {
		t.Errorf("delegation past the cap across the hop: %q: want it refused for depth", out)
	}
	s.stop(t)

	depths := map[int]int{}
	for _, ss := range storedSessions(t, s.home) {
		depths[ss.header.DelegationDepth]++
	}
	if depths[1] != 1 || depths[2] != 1 || depths[3] != 1 {
		t.Errorf("stored sessions by depth %v: want the first task's at 1 and its child's at 2, the second task's at 3 and no child", depths)
	}
}

func outputText(res subagent.Result) string {
	var b strings.Builder
	for _, c := range res.Output {
		b.WriteString(c.Text)
	}
	return b.String()
}

// Cancelling the parent's run cancels the remote task (tasks/cancel): the
// remote child's turn ends and no process is left.
func TestA2ACancelStopsTheRemoteTree(t *testing.T) {
	s := startA2A(t)
	p := s.provider(t, 0)
	parent := subagenttest.ParentAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 1)
	run, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt("delegate: hang"), Parent: parent, Depth: 1,
		Progress: func(pr subagent.Progress) {
			if strings.Contains(pr.Text, "started") {
				select {
				case started <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the remote child never started")
	}
	cancel()
	if res := subagenttest.Wait(t, run); res.StopReason != subagent.Aborted {
		t.Errorf("stop reason %q, want aborted", res.StopReason)
	}
	subagenttest.Dispose(t, run)
	s.stop(t)
	for id, ss := range storedSessions(t, s.home) {
		if end, ok := lastTurnEnd(ss.repaired); !ok || end.Reason.Kind == session.EndCompleted {
			t.Errorf("session %s (depth %d): last turn %+v, want it ended by the cancel", id, ss.header.DelegationDepth, end)
		}
	}
}

// Without the token, the endpoint refuses; the card is public and says
// what it needs.
func TestA2AAuthRequired(t *testing.T) {
	if _, _, err := runCLI(t, map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "k"}, "a2a", "--listen", "0.0.0.0:0"); err == nil ||
		!strings.Contains(err.Error(), "--any-address") {
		t.Errorf("a public address: %v", err)
	}
	s := startA2A(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`
	for _, header := range []string{"", "Bearer wrong"} {
		req, _ := http.NewRequest(http.MethodPost, s.base+"/a2a", strings.NewReader(body))
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("authorization %q: HTTP %d, want 401", header, resp.StatusCode)
		}
	}
	resp, err := http.Get(s.base + a2achild.CardPath)
	if err != nil {
		t.Fatal(err)
	}
	var card struct {
		URL             string `json:"url"`
		ProtocolVersion string `json:"protocolVersion"`
		Skills          []struct{ ID string }
		Security        []map[string]any `json:"security"`
		Capabilities    struct{ Streaming bool }
	}
	err = json.NewDecoder(resp.Body).Decode(&card)
	resp.Body.Close()
	if err != nil || card.URL != s.base+"/a2a" || card.ProtocolVersion != "0.3.0" || len(card.Security) != 1 || !card.Capabilities.Streaming ||
		len(card.Skills) == 0 || card.Skills[0].ID != "subagent" {
		t.Errorf("card %+v (%v): want the endpoint, A2A 0.3.0, streaming, the bearer requirement and the subagent skill", card, err)
	}
	// A request larger than the bound is refused, and the server goes on.
	big := strings.Replace(body, `"hi"`, `"`+strings.Repeat("x", 2<<20)+`"`, 1)
	req, _ := http.NewRequest(http.MethodPost, s.base+"/a2a", strings.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(reply), `"error"`) {
		t.Errorf("a 2 MiB request: %s, want a JSON-RPC error", reply)
	}
	s.stop(t)
}

// The README's a2a example, as written but for the port: `dsh run` with it
// delegates through `dsh a2a`, whose agent delegates to a spawn child.
func TestREADMEA2A(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "## A2A, both ways")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("the README's A2A section has no yaml block")
	}
	s := startA2A(t)
	// The only test-specific wiring: where the server listens.
	yaml := strings.Replace(m[1], "http://127.0.0.1:8766", s.base, 1)
	if yaml == m[1] {
		t.Fatal("the README's a2a url changed: update this test's wiring")
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dshBinary, "run", "--cwd", t.TempDir(), "remote: fix it")
	cmd.Env = append(mcpEnv(home, a2aModel(t)), "DSH_A2A_TOKEN="+s.token)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child: fix it") {
		t.Fatalf("dsh run through dsh a2a: %v\n%s", err, out)
	}
	if strings.Contains(string(out), s.token) {
		t.Error("the token shows in dsh run's output")
	}
	s.stop(t)
}

// A second message in the task's contextId continues the same session.
func TestA2AFollowupContinuesTheSession(t *testing.T) {
	s := startA2A(t)
	p := s.provider(t, 0)
	parent := subagenttest.ParentAgent(t)
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("first"), Parent: parent, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	next, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("second"), Parent: parent, Depth: 1},
		run.(subagent.RemoteRun).RemoteSession())
	if err != nil {
		t.Fatal(err)
	}
	if res := subagenttest.Wait(t, next); res.StopReason != subagent.Completed || outputText(res) != "done: second" {
		t.Errorf("follow-up: %+v", res)
	}
	subagenttest.Dispose(t, next)
	s.stop(t)
	sessions := storedSessions(t, s.home)
	if len(sessions) != 1 {
		t.Fatalf("%d sessions stored, want the one both messages ran in", len(sessions))
	}
	for _, ss := range sessions {
		if got := userTexts(ss.repaired); len(got) != 2 || got[0] != "first" || got[1] != "second" {
			t.Errorf("the session's prompts %q, want first and second", got)
		}
	}
}

// Past --max-tasks, a task is refused while the others run on.
func TestA2AMaxTasks(t *testing.T) {
	s := startA2A(t, "--max-tasks", "1")
	p := s.provider(t, 0)
	parent := subagenttest.ParentAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 1)
	hung, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt("delegate: hang"), Parent: parent, Depth: 1,
		Progress: func(pr subagent.Progress) {
			if strings.Contains(pr.Text, "started") {
				select {
				case started <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started: // the first task holds its place
	case <-time.After(time.Minute):
		t.Fatal("the first task never started its child")
	}
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("more"), Parent: parent, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Refusal || !strings.Contains(res.Diagnostic, "at most 1 tasks at once") {
		t.Errorf("a second task past --max-tasks 1: %+v, want it refused", res)
	}
	select {
	case <-hung.Done():
		t.Errorf("the running task ended: %+v", subagenttest.Wait(t, hung))
	default:
	}
	cancel()
	subagenttest.Wait(t, hung)
	subagenttest.Dispose(t, hung)
	s.stop(t)
}

// An SDK client (a2a-go's) streams a task, drops the connection, gets the
// task back with tasks/resubscribe and tasks/get, and cancels it.
func TestA2AResubscribeAndCancel(t *testing.T) {
	s := startA2A(t)
	tr := a2aclient.NewJSONRPCTransport(s.base+"/a2a", &http.Client{Transport: bearerAuth{s.token, http.DefaultTransport}})
	ctx, drop := context.WithCancel(context.Background())
	var id a2a.TaskID
	for ev, err := range tr.SendStreamingMessage(ctx, &a2a.MessageSendParams{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: subagenttest.PromptHang})}) {
		if err != nil {
			t.Fatal(err)
		}
		if id = ev.TaskInfo().TaskID; id != "" {
			break
		}
	}
	drop() // the connection goes; the task runs on
	if task, err := tr.GetTask(context.Background(), &a2a.TaskQueryParams{ID: id}); err != nil || task.Status.State.Terminal() {
		t.Fatalf("tasks/get after the drop: %+v, %v", task, err)
	}
	events := make(chan a2a.Event, 16)
	go func() {
		defer close(events)
		for ev, err := range tr.ResubscribeToTask(context.Background(), &a2a.TaskIDParams{ID: id}) {
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	time.Sleep(100 * time.Millisecond) // let the resubscription open; the outcome does not depend on it
	if _, err := tr.CancelTask(context.Background(), &a2a.TaskIDParams{ID: id}); err != nil {
		t.Fatal(err)
	}
	var last a2a.TaskState
	for ev := range events {
		if up, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			last = up.Status.State
		}
	}
	if last != a2a.TaskStateCanceled {
		t.Errorf("the resubscribed stream ended in %q, want canceled", last)
	}
	if task, err := tr.GetTask(context.Background(), &a2a.TaskQueryParams{ID: id}); err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Errorf("tasks/get after the cancel: %+v, %v", task, err)
	}
	s.stop(t)
}

// The A2A JavaScript SDK's client (pinned in tools/peers; 1.x, through
// its v0.3 compatibility layer) drives `dsh a2a`: the card, auth refused
// without the token, a streamed task with a delegation inside, and a
// cancel while the child works (its turn ends; no process is left).
func TestA2AJavaScriptClient(t *testing.T) {
	sdk := testpeers.Path(t, "node_modules/@a2a-js/sdk")
	s := startA2A(t)
	cmd := exec.Command("node", "testdata/a2a-client.mjs", sdk, s.base, s.token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("%s", out)
	var got struct {
		Card struct {
			Name, ProtocolVersion string
		}
		Unauthorized string
		Delegation   struct {
			States      []int
			StatusTexts []string
			Artifacts   []string
		}
		Cancel struct {
			States     []int
			Afterwards int
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	const completed, canceled = 3, 5 // TaskState in A2A 1.0
	if got.Card.Name != "dsh" || got.Card.ProtocolVersion != "0.3.0" {
		t.Errorf("card %+v", got.Card)
	}
	if !strings.Contains(got.Unauthorized, "401") || !strings.Contains(got.Unauthorized, "a2a-token") {
		t.Errorf("without the token: %q, want refused with 401", got.Unauthorized)
	}
	d := got.Delegation
	if len(d.States) == 0 || d.States[len(d.States)-1] != completed || len(d.Artifacts) != 1 || !strings.Contains(d.Artifacts[0], "child: fix it") ||
		!strings.Contains(strings.Join(d.StatusTexts, "\n"), "started") {
		t.Errorf("streamed delegation %+v: want the child's start, the answer as an artifact, completed", d)
	}
	if c := got.Cancel; len(c.States) == 0 || c.States[len(c.States)-1] != canceled || c.Afterwards != canceled {
		t.Errorf("cancelled task %+v: want canceled", c)
	}
	s.stop(t)
}

// SIGTERM while a task's child works: dsh a2a cancels the task, exits
// cleanly and leaves no process; the parent's child fails, naming the
// lost agent, instead of waiting on.
func TestA2AServerStopsMidTask(t *testing.T) {
	s := startA2A(t)
	p := s.provider(t, 0)
	parent := subagenttest.ParentAgent(t)
	started := make(chan struct{}, 1)
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("delegate: hang"), Parent: parent, Depth: 1,
		Progress: func(pr subagent.Progress) {
			if strings.Contains(pr.Text, "started") {
				select {
				case started <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the remote child never started")
	}
	s.stop(t)
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason == subagent.Completed {
		t.Errorf("result %+v: want the lost task reported, not completed", res)
	}
}

// An ask of the permission policy becomes the task's input-required
// state, naming the call; the client's next message in the task answers
// it, and the turn goes on with the answer.
func TestA2AAskIsInputRequired(t *testing.T) {
	s := startA2AWith(t, "permissions:\n  tools:\n    bash: ask\n")
	p := s.provider(t, 0)
	parent := subagenttest.ParentAgent(t)
	for answer, want := range map[string]string{"yes": "parent got: asked-and-ran", "no": "parent got: "} {
		run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("run: echo asked-and-ran"), Parent: parent, Depth: 1})
		if err != nil {
			t.Fatal(err)
		}
		res := subagenttest.Wait(t, run)
		subagenttest.Dispose(t, run)
		if out := outputText(res); res.StopReason != subagent.Completed || !strings.Contains(out, "needs input") || !strings.Contains(out, "asks to run bash") ||
			!strings.Contains(out, "echo asked-and-ran") {
			t.Fatalf("the ask: %+v, want the task waiting for input, naming the call", res)
		}
		remote := run.(subagent.RemoteRun).RemoteSession()
		next, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt(answer), Parent: parent, Depth: 1}, remote)
		if err != nil {
			t.Fatal(err)
		}
		res = subagenttest.Wait(t, next)
		subagenttest.Dispose(t, next)
		out := outputText(res)
		if res.StopReason != subagent.Completed || !strings.HasPrefix(out, want) || (answer == "no") == strings.Contains(out, "asked-and-ran\n") {
			t.Errorf("answered %q: %+v, want %q", answer, res, want)
		}
	}
	// A task left waiting for its answer does not hold the server up: it
	// exits cleanly, leaving no process.
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("run: echo never"), Parent: parent, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	s.stop(t)
}
