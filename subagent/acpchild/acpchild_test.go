package acpchild_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/dsh-go/dsh/tool"
	"github.com/google/jsonschema-go/jsonschema"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/dshbin"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// dshBinary is the dsh command built for this test run.
var dshBinary string

func TestMain(m *testing.M) {
	if mode := os.Getenv("ACPCHILD_FAKE_AGENT"); mode != "" {
		fakeAgent(mode)
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "dsh-bin-")
	if err != nil {
		panic(err)
	}
	if dshBinary, err = dshbin.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		return goleakMain(m)
	}()
	os.Exit(code)
}

func goleakMain(m *testing.M) int {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// modelServer behaves by the last user message: hang until the request is
// cancelled, fail with a 400, or answer "done: <prompt>".
func modelServer(t *testing.T) *httptest.Server { return hangingModelServer(t, nil) }

// hangingModelServer is modelServer announcing each PromptHang request on
// hung (when there is room): the child's turn has reached its model.
func hangingModelServer(t *testing.T, hung chan<- struct{}) *httptest.Server {
	return llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch r.LastUser {
		case subagenttest.PromptFail:
			return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"the model refuses this request"}}`}
		case subagenttest.PromptHang:
			select {
			case hung <- struct{}{}:
			default:
			}
			return llmtest.Reply{Text: "working…", Hang: true}
		}
		return llmtest.Reply{Text: "done: " + r.LastUser}
	})
}

// selfLoop returns the config of an acp provider running this build of dsh
// in acp mode against the loopback model server.
func selfLoop(t *testing.T, srv *httptest.Server) acpchild.Config {
	return acpchild.Config{Options: childproc.Options{Command: dshBinary, Args: []string{"acp"},
		Env:           map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL},
		ChildTimeouts: subagent.ChildTimeouts{EOFGrace: 500 * time.Millisecond, TermGrace: 500 * time.Millisecond, CancelGrace: 2 * time.Second}}}
}

func newProvider(t *testing.T, cfg acpchild.Config) *acpchild.Provider {
	t.Helper()
	p, err := acpchild.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// closeAndCheck closes the provider *p (stopping the processes it keeps
// warm) and reports any child process left.
func closeAndCheck(p **acpchild.Provider) func() error {
	return func() error {
		if err := (*p).Close(); err != nil {
			return err
		}
		return noChildren()
	}
}

// children lists the live child processes of this test.
func children() []string { return proc.Children(os.Getpid()) }

func noChildren() error { return proc.NoChildren() }

func TestSelfLoopConformance(t *testing.T) {
	srv := modelServer(t)
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return newProvider(t, selfLoop(t, srv)), subagenttest.ParentAgent(t)
		},
		Leftovers: noChildren,
	})
}

func start(t *testing.T, p *acpchild.Provider, ctx context.Context, prompt string) subagent.Run {
	t.Helper()
	a := subagenttest.ParentAgent(t)
	run, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt(prompt), Parent: a, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func TestSelfLoopAnswer(t *testing.T) {
	p := newProvider(t, selfLoop(t, modelServer(t)))
	run := start(t, p, context.Background(), "hello child")
	res := subagenttest.Wait(t, run)
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "done: hello child" {
		t.Fatalf("result %+v", res)
	}
	if !strings.HasPrefix(run.ID(), "acp-") || run.LocalAgent() != nil {
		t.Fatalf("run id %q", run.ID())
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

func TestChildModelFailureIsAnErrorWithDiagnostic(t *testing.T) {
	p := newProvider(t, selfLoop(t, modelServer(t)))
	run := start(t, p, context.Background(), subagenttest.PromptFail)
	res := subagenttest.Wait(t, run)
	run.Dispose(context.Background())
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "INVALID_REQUEST") {
		t.Fatalf("result %+v", res)
	}
}

// awaitHang waits until the child's turn has reached its model.
func awaitHang(t *testing.T, hung <-chan struct{}) {
	t.Helper()
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("the child's turn never reached its model")
	}
}

func TestCancelMidTurnIsAborted(t *testing.T) {
	hung := make(chan struct{}, 1)
	p := newProvider(t, selfLoop(t, hangingModelServer(t, hung)))
	ctx, cancel := context.WithCancel(context.Background())
	run := start(t, p, ctx, subagenttest.PromptHang)
	awaitHang(t, hung)
	cancel()
	res := subagenttest.Wait(t, run)
	run.Dispose(context.Background())
	if res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

func TestChildKilledMidTurnIsAnError(t *testing.T) {
	hung := make(chan struct{}, 1)
	p := newProvider(t, selfLoop(t, hangingModelServer(t, hung)))
	run := start(t, p, context.Background(), subagenttest.PromptHang)
	awaitHang(t, hung)
	var pids []string
	for _, c := range children() {
		pids = append(pids, strings.Fields(c)[0])
	}
	if len(pids) == 0 {
		t.Fatal("no child process mid-turn")
	}
	for _, pid := range pids {
		var n int
		fmt.Sscan(pid, &n)
		syscall.Kill(n, syscall.SIGKILL)
	}
	res := subagenttest.Wait(t, run)
	run.Dispose(context.Background())
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "signal") {
		t.Fatalf("result %+v", res)
	}
}

func TestBadConfigAndCwd(t *testing.T) {
	for _, cfg := range []acpchild.Config{{}, {Options: childproc.Options{Command: "x"}, Permission: "maybe"}, {Options: childproc.Options{Command: "x", Cwd: "/no/such/dir"}}} {
		if _, err := acpchild.New(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	p := newProvider(t, acpchild.Config{Options: childproc.Options{Command: "/no/such/agent"}})
	if _, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: subagenttest.ParentAgent(t), Depth: 1}); err == nil {
		t.Fatal("a missing command started")
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

// fakeConfig runs this test binary as a misbehaving ACP agent.
func fakeConfig(mode string) acpchild.Config {
	return acpchild.Config{Options: childproc.Options{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{"ACPCHILD_FAKE_AGENT": mode, "GORACE": "atexit_sleep_ms=0"},
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: time.Second, EOFGrace: 200 * time.Millisecond, TermGrace: 200 * time.Millisecond, CancelGrace: 300 * time.Millisecond}}}
}

func TestMisbehavingAgents(t *testing.T) {
	for _, mode := range []string{"silent", "garbage", "exit"} {
		t.Run(mode, func(t *testing.T) {
			p := newProvider(t, fakeConfig(mode))
			_, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: subagenttest.ParentAgent(t), Depth: 1})
			if err == nil {
				t.Fatal("started")
			}
			if err := noChildren(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAgentIgnoringEOFAndTermIsKilled(t *testing.T) {
	p := newProvider(t, fakeConfig("stubborn"))
	run := start(t, p, context.Background(), "x")
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := subagenttest.Wait(t, run); res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

// A 100 MB line on stdout ends the run in error, with bounded memory, and
// the process is gone.
func TestHugeLineIsAnError(t *testing.T) {
	p := newProvider(t, fakeConfig("hugeline"))
	run := start(t, p, context.Background(), "x")
	res := subagenttest.Wait(t, run)
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.Failed {
		t.Fatalf("result %+v", res)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

func TestCancelBeforeReadySpawnsNothing(t *testing.T) {
	p := newProvider(t, fakeConfig("silent"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the fake runs: Start waits for its handshake then. A
		// real process: poll for it on the real clock, boundedly.
		for deadline := time.Now().Add(10 * time.Second); len(children()) == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: subagenttest.ParentAgent(t), Depth: 1})
	if !errors.Is(err, subagent.ErrAbortedBeforeReady) {
		t.Fatalf("err = %v", err)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

// fakeAgent is a misbehaving ACP agent:
//   - silent: never answers initialize;
//   - garbage: writes non-JSON to stdout;
//   - exit: exits at once with an error;
//   - stubborn: answers the handshake, hangs on prompts, ignores EOF, cancel and SIGTERM;
//   - hoard, hoard-crash: see hoarder.
func fakeAgent(mode string) {
	switch mode {
	case "silent":
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "garbage":
		fmt.Println("this is not JSON-RPC {{{")
		select {}
	case "hoard", "hoard-crash":
		hoard(mode == "hoard-crash")
	case "exit":
		fmt.Fprintln(os.Stderr, "fatal: cannot start")
		os.Exit(3)
	case "stubborn", "hugeline":
		if mode == "stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		a := &stubborn{huge: mode == "hugeline"}
		conn := acpsdk.NewAgentSideConnection(a, os.Stdout, os.Stdin)
		conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
		select {}
	}
}

type stubborn struct{ huge bool }

func (stubborn) Initialize(context.Context, acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	return acpsdk.InitializeResponse{ProtocolVersion: acpsdk.ProtocolVersionNumber}, nil
}
func (stubborn) Authenticate(context.Context, acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	return acpsdk.AuthenticateResponse{}, nil
}
func (stubborn) NewSession(context.Context, acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	return acpsdk.NewSessionResponse{SessionId: "s"}, nil
}
func (s stubborn) Prompt(context.Context, acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	if s.huge { // a 100 MB line on stdout
		line := make([]byte, 1<<20)
		for i := range line {
			line[i] = 'x'
		}
		for range 100 {
			os.Stdout.Write(line)
		}
		os.Stdout.Write([]byte("\n"))
	}
	select {} // ignores cancellation
}
func (stubborn) Cancel(context.Context, acpsdk.CancelNotification) error { return nil }
func (stubborn) CloseSession(context.Context, acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	return acpsdk.CloseSessionResponse{}, nil
}
func (stubborn) ListSessions(context.Context, acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return acpsdk.ListSessionsResponse{}, nil
}
func (stubborn) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, nil
}
func (stubborn) SetSessionConfigOption(context.Context, acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	return acpsdk.SetSessionConfigOptionResponse{}, nil
}
func (stubborn) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, nil
}

// ACP cannot carry a depth cap to the child, so the provider enforces its
// own before spawning anything.
func TestProviderDepthCap(t *testing.T) {
	p := newProvider(t, acpchild.Config{Options: childproc.Options{Command: "/no/such/agent"}, MaxDepth: 1})
	_, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: subagenttest.ParentAgent(t), Depth: 2})
	var se *subagent.Error
	if !errors.As(err, &se) || se.Code != subagent.CodeDepthExceeded || se.Attempted != 2 || se.Max != 1 {
		t.Fatalf("err = %v", err)
	}
}

// A dsh child continues its conversation in a new process: ResumeRun
// starts `dsh acp` again and loads the session the first run created; the
// replayed conversation is not the run's output, and the model sees the
// earlier turn. No process is left after either run.
func TestResumeRunLoadsTheSession(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: fmt.Sprintf("done: %s after %d messages", r.LastUser, r.Messages)}
	})
	p := newProvider(t, selfLoop(t, srv))
	a := subagenttest.ParentAgent(t)
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("one"), Parent: a, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	remote := run.(subagent.RemoteRun).RemoteSession()
	if res.StopReason != subagent.Completed || remote == "" {
		t.Fatalf("first run %+v, session %q", res, remote)
	}
	next, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("two"), Parent: a, Depth: 1}, remote)
	if err != nil {
		t.Fatal(err)
	}
	res = subagenttest.Wait(t, next)
	if err := next.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := content.JoinText(res.Output); res.StopReason != subagent.Completed || got != "done: two after 4 messages" {
		t.Fatalf("resumed run %+v", res)
	}
	if next.(subagent.RemoteRun).RemoteSession() != remote {
		t.Error("the resumed run is in another session")
	}
	if _, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: a, Depth: 1}, "no-such-session"); err == nil {
		t.Error("resumed an unknown session")
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

// A dsh child (command: self) honours the seam's capabilities as an
// in-process child does: the persona in its system prompt, a filtered tool
// absent from its request, its delegation refused beyond the depth cap,
// and its structured_output call the run's structured result.
func TestDshChildHonoursTheCapabilities(t *testing.T) {
	const persona = "You are a terse triage clerk."
	var mu sync.Mutex
	var first, second llmtest.Request
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		switch len(r.ToolResults) {
		case 0:
			first = r
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"deeper","prompt":"go deeper"}`}}
		case 1:
			second = r
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "structured_output", Arguments: `{"label":"bug"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	cfg := selfLoop(t, srv)
	cfg.Dsh = true
	p := newProvider(t, cfg)
	if c := p.Capabilities(); !c.Persona || !c.ToolFilter || !c.OutputSchema || !c.DepthLimit {
		t.Fatalf("a dsh child's capabilities %+v", c)
	}
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"label": {Type: "string"}},
		Required: []string{"label"}}
	one := 1
	p2 := persona
	run, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("classify this"),
		Parent: subagenttest.ParentAgent(t), Depth: 1, Persona: &p2, ToolFilter: &tool.Restriction{Deny: []string{"bash"}},
		OutputSchema: schema, MaxDepth: &one})
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	body := string(first.Body)
	switch {
	case !strings.Contains(body, persona):
		t.Errorf("the child's request has no persona:\n%.2000s", body)
	case strings.Contains(body, `"name":"bash"`):
		t.Error("the filtered bash tool is in the child's request")
	case !strings.Contains(body, `"name":"structured_output"`):
		t.Error("the child's request offers no structured_output")
	}
	if len(second.ToolResults) != 1 || !strings.Contains(second.ToolResults[0], "DEPTH_EXCEEDED") && !strings.Contains(second.ToolResults[0], "depth") {
		t.Errorf("the child's delegation past maxDepth 1 answered %q", second.ToolResults)
	}
	t.Logf("the delegation past the cap answered %q", second.ToolResults)
	if got, ok := res.Structured.(map[string]any); res.StopReason != subagent.Completed || !ok || got["label"] != "bug" {
		t.Fatalf("result %+v, structured %#v", res, res.Structured)
	}
}

// The conformance suite holds for a dsh child run with every capability
// requested: a persona, a tool filter, an output schema (its model records
// the result with structured_output) and a depth cap.
func TestDshChildConformanceWithEveryCapability(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch r.LastUser {
		case subagenttest.PromptFail:
			return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"the model refuses this request"}}`}
		case subagenttest.PromptHang:
			return llmtest.Reply{Text: "working…", Hang: true}
		}
		if len(r.ToolResults) > 0 {
			return llmtest.Reply{Text: "recorded"}
		}
		return llmtest.Reply{Text: "done", ToolCall: &llmtest.ToolCall{Name: "structured_output", Arguments: `{"answer":"done"}`}}
	})
	cfg := selfLoop(t, srv)
	cfg.Dsh = true
	persona, depth := "You answer in one word.", 2
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"answer": {Type: "string"}},
		Required: []string{"answer"}}
	var p *acpchild.Provider // the scenario's: its warm process is stopped by Close
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			p = newProvider(t, cfg)
			return p, subagenttest.ParentAgent(t)
		},
		Shape: func(req *subagent.StartRequest) {
			req.Persona, req.ToolFilter, req.OutputSchema, req.MaxDepth = &persona, &tool.Restriction{Deny: []string{"bash"}}, schema, &depth
		},
		Leftovers: closeAndCheck(&p),
	})
}
