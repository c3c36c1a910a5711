package a2achild_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/a2achild"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// scripted is a loopback A2A agent, written with a2a-go's server: its
// answer depends on the prompt (the conformance suite's, and the fault
// tests').
type scripted struct {
	mu       sync.Mutex
	metadata map[string]any // the last message's
	release  chan struct{}  // closed to end hung tasks
}

func text(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if t, ok := p.(a2a.TextPart); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func (s *scripted) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	s.mu.Lock()
	s.metadata = rc.Message.Metadata
	s.mu.Unlock()
	write := func(ev a2a.Event) error { return q.Write(ctx, ev) }
	status := func(state a2a.TaskState, msg string, final bool) error {
		var m *a2a.Message
		if msg != "" {
			m = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: msg})
		}
		ev := a2a.NewStatusUpdateEvent(rc, state, m)
		ev.Final = final
		return write(ev)
	}
	if rc.StoredTask == nil {
		if err := write(a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	if err := status(a2a.TaskStateWorking, "working on it", false); err != nil {
		return err
	}
	switch prompt := text(rc.Message.Parts); prompt {
	case subagenttest.PromptHang:
		select {
		case <-ctx.Done():
		case <-s.release:
		}
		return nil
	case subagenttest.PromptFail:
		return status(a2a.TaskStateFailed, "scripted failure", true)
	case "ask":
		return status(a2a.TaskStateInputRequired, "which branch?", true)
	case "reject":
		return status(a2a.TaskStateRejected, "not my job", true)
	case "big": // 1.1 MiB streamed in 48 KiB chunks
		chunk := strings.Repeat("x", 48<<10)
		ev := a2a.NewArtifactEvent(rc, a2a.TextPart{Text: chunk})
		if err := write(ev); err != nil {
			return err
		}
		for range 23 {
			up := a2a.NewArtifactUpdateEvent(rc, ev.Artifact.ID, a2a.TextPart{Text: chunk})
			up.Append = true
			if err := write(up); err != nil {
				return err
			}
		}
		return status(a2a.TaskStateCompleted, "", true)
	case "huge": // one 9 MiB artifact: past every bound
		if err := write(a2a.NewArtifactEvent(rc, a2a.TextPart{Text: strings.Repeat("y", 9<<20)})); err != nil {
			return err
		}
		return status(a2a.TaskStateCompleted, "", true)
	default:
		if err := write(a2a.NewArtifactEvent(rc, a2a.TextPart{Text: "done: " + prompt})); err != nil {
			return err
		}
		ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
		ev.Final = true
		ev.Metadata = map[string]any{a2achild.MetaUsage: map[string]any{"remote/model": map[string]any{"inputTokens": 7, "outputTokens": 3}}}
		return write(ev)
	}
}

func (s *scripted) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

type serverOpts struct {
	streaming bool
	token     string // required bearer token ("" none)
}

// serve starts the scripted agent on a loopback server.
func serve(t *testing.T, o serverOpts) (*httptest.Server, *scripted) {
	t.Helper()
	agentImpl := &scripted{release: make(chan struct{})}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	card := &a2a.AgentCard{Name: "scripted", Description: "a scripted agent", URL: srv.URL + "/rpc",
		PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0", Version: "1",
		Capabilities:      a2a.AgentCapabilities{Streaming: o.streaming},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "echo", Name: "echo", Description: "echoes", Tags: []string{"test"}}}}
	if o.token != "" {
		card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "bearer"}}
		card.Security = []a2a.SecurityRequirements{{"bearer": {}}}
	}
	mux.Handle(a2achild.CardPath, a2asrv.NewStaticAgentCardHandler(card))
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agentImpl))
	mux.Handle("/rpc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.token != "" && r.Header.Get("Authorization") != "Bearer "+o.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		rpc.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(agentImpl.release)
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv, agentImpl
}

func newProvider(t *testing.T, cfg a2achild.Config) *a2achild.Provider {
	t.Helper()
	cfg.CancelGrace = 2 * time.Second
	cfg.PollInterval = 20 * time.Millisecond
	p, err := a2achild.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		name := map[bool]string{true: "Streaming", false: "Polling"}[streaming]
		t.Run(name, func(t *testing.T) {
			srv, _ := serve(t, serverOpts{streaming: streaming})
			subagenttest.Conformance(t, subagenttest.Harness{
				New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
					return newProvider(t, a2achild.Config{URL: srv.URL}), subagenttest.ParentAgent(t)
				},
			})
		})
	}
}

// start starts a child with prompt through the provider, at depth 1.
func start(t *testing.T, p subagent.Provider, prompt string, progress func(subagent.Progress)) (subagent.Run, error) {
	t.Helper()
	parent := subagenttest.ParentAgent(t)
	return p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt(prompt), Parent: parent,
		Depth: parent.Depth() + 1, Progress: progress})
}

func output(res subagent.Result) string { return content.JoinText(res.Output) }

func TestResultProgressUsageAndLineage(t *testing.T) {
	srv, agentImpl := serve(t, serverOpts{streaming: true})
	p := newProvider(t, a2achild.Config{URL: srv.URL + a2achild.CardPath, MaxDepth: 3})
	var mu sync.Mutex
	var seen []string
	run, err := start(t, p, "hello", func(pr subagent.Progress) {
		mu.Lock()
		seen = append(seen, pr.Text)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer subagenttest.Dispose(t, run)
	res := subagenttest.Wait(t, run)
	if res.StopReason != subagent.Completed || output(res) != "done: hello" {
		t.Fatalf("result %+v: want completed with the artifact's text", res)
	}
	if u := res.Usage["remote/model"]; u.Input != 7 || u.Output != 3 {
		t.Errorf("usage %v: want the task's reported usage", res.Usage)
	}
	mu.Lock()
	if !strings.Contains(strings.Join(seen, "|"), "working on it") {
		t.Errorf("progress %q: want the status update's text", seen)
	}
	mu.Unlock()
	agentImpl.mu.Lock()
	md := agentImpl.metadata
	agentImpl.mu.Unlock()
	if md[a2achild.MetaDepth] != float64(1) || md[a2achild.MetaMaxDepth] != float64(3) || md[a2achild.MetaParentSession] == "" {
		t.Errorf("message metadata %v: want depth 1, maxDepth 3 and the parent session", md)
	}
	if rr, ok := run.(subagent.RemoteRun); !ok || rr.RemoteSession() == "" {
		t.Error("run names no remote conversation")
	}
}

func TestDepthBeyondMaxDepthIsRefused(t *testing.T) {
	p := newProvider(t, a2achild.Config{URL: "http://127.0.0.1:1", MaxDepth: 1})
	parent := subagenttest.ParentAgent(t)
	_, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: parent, Depth: 2})
	if !errors.Is(err, subagent.ErrDepthExceeded) {
		t.Fatalf("err = %v: want DEPTH_EXCEEDED", err)
	}
}

func TestTaskStatesMapToStopReasons(t *testing.T) {
	srv, _ := serve(t, serverOpts{streaming: true})
	p := newProvider(t, a2achild.Config{URL: srv.URL})
	for prompt, want := range map[string]subagent.StopReason{"ask": subagent.Completed, "reject": subagent.Refusal, subagenttest.PromptFail: subagent.Failed} {
		run, err := start(t, p, prompt, nil)
		if err != nil {
			t.Fatal(err)
		}
		res := subagenttest.Wait(t, run)
		subagenttest.Dispose(t, run)
		if res.StopReason != want {
			t.Errorf("%s: stop reason %q, want %q (%+v)", prompt, res.StopReason, want, res)
		}
		if prompt == "ask" {
			if out := output(res); !strings.Contains(out, "needs input") || !strings.Contains(out, "which branch?") {
				t.Errorf("input-required output %q: want it to say the agent asks, and what", out)
			}
			if rr := run.(subagent.RemoteRun); !strings.Contains(rr.RemoteSession(), "#") {
				t.Errorf("remote %q: want the waiting task named for the follow-up", rr.RemoteSession())
			}
		}
		if prompt == subagenttest.PromptFail && !strings.Contains(res.Diagnostic, "scripted failure") {
			t.Errorf("diagnostic %q: want the agent's status message", res.Diagnostic)
		}
	}
}

func TestBearerFromTheCardAndNeverInErrors(t *testing.T) {
	const secret = "s3cret-token-value"
	srv, _ := serve(t, serverOpts{streaming: true, token: secret})
	env := map[string]string{"AGENT_TOKEN": secret}
	p := newProvider(t, a2achild.Config{URL: srv.URL, TokenEnv: "AGENT_TOKEN", Getenv: func(k string) string { return env[k] }})
	run, err := start(t, p, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := subagenttest.Wait(t, run); res.StopReason != subagent.Completed {
		t.Errorf("with the token: %+v", res)
	}
	subagenttest.Dispose(t, run)

	for name, cfg := range map[string]a2achild.Config{
		"no tokenEnv":    {URL: srv.URL},
		"empty variable": {URL: srv.URL, TokenEnv: "UNSET", Getenv: func(string) string { return "" }},
	} {
		_, err := start(t, newProvider(t, cfg), "hello", nil)
		if err == nil || !strings.Contains(err.Error(), "requires a credential") {
			t.Errorf("%s: err = %v: want the card's requirement named", name, err)
		}
	}
	wrong := newProvider(t, a2achild.Config{URL: srv.URL, TokenEnv: "T", Getenv: func(string) string { return "wrong-" + secret }})
	run, err = start(t, wrong, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Failed || strings.Contains(res.Diagnostic, secret) {
		t.Errorf("refused token: %+v: want failed, without the token in the diagnostic", res)
	}
}

func TestCardOnAnotherOriginGetsNoCredential(t *testing.T) {
	other, _ := serve(t, serverOpts{streaming: true})
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.Handle(a2achild.CardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{Name: "hostile", URL: other.URL + "/rpc"}))
	p := newProvider(t, a2achild.Config{URL: srv.URL, TokenEnv: "T", Getenv: func(string) string { return "tok" }})
	if _, err := start(t, p, "hello", nil); err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("err = %v: want the credential withheld from another origin", err)
	}
}

func TestBadCardsAreStartErrors(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/garbage"+a2achild.CardPath, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{not a card")) })
	mux.HandleFunc("/grpc"+a2achild.CardPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"name":"g","url":"http://x","preferredTransport":"GRPC"}`))
	})
	for path, want := range map[string]string{"/garbage": "not a valid card", "/grpc": "no JSON-RPC endpoint", "/missing": "404"} {
		_, err := start(t, newProvider(t, a2achild.Config{URL: srv.URL + path}), "hello", nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v: want %q", path, err, want)
		}
	}
}

func TestServerDiesMidTask(t *testing.T) {
	srv, _ := serve(t, serverOpts{streaming: true})
	p := newProvider(t, a2achild.Config{URL: srv.URL})
	run, err := start(t, p, subagenttest.PromptHang, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer subagenttest.Dispose(t, run)
	time.Sleep(100 * time.Millisecond) // let the stream open; the outcome does not depend on it
	srv.CloseClientConnections()
	srv.Listener.Close()
	res := subagenttest.Wait(t, run)
	if res.StopReason != subagent.Failed || res.Diagnostic == "" {
		t.Fatalf("result %+v: want failed with a diagnostic", res)
	}
}

func TestGarbageStreamFails(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.Handle(a2achild.CardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{Name: "garbage", URL: srv.URL + "/rpc",
		Capabilities: a2a.AgentCapabilities{Streaming: true}}))
	mux.HandleFunc("/rpc", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"result\":{\"kind\":\"nonsense\"}}\n\ndata: \x00\xff{{{\n\n"))
	})
	run, err := start(t, newProvider(t, a2achild.Config{URL: srv.URL}), "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer subagenttest.Dispose(t, run)
	if res := subagenttest.Wait(t, run); res.StopReason != subagent.Failed || res.Diagnostic == "" {
		t.Fatalf("result %+v: want failed with a diagnostic", res)
	}
}

func TestHugeArtifactsAreBounded(t *testing.T) {
	srv, _ := serve(t, serverOpts{streaming: true})
	p := newProvider(t, a2achild.Config{URL: srv.URL})
	run, err := start(t, p, "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if out := output(res); res.StopReason != subagent.Completed || len(out) > a2achild.MaxOutput+200 || !strings.Contains(out, "truncated") {
		t.Errorf("1.1 MiB artifact: %q, %d bytes: want completed, cut to %d bytes with a marker", res.StopReason, len(out), a2achild.MaxOutput)
	}
	run, err = start(t, p, "huge", nil)
	if err != nil {
		t.Fatal(err)
	}
	res = subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "larger than") {
		t.Errorf("9 MiB artifact: %+v: want failed, naming the bound", res)
	}
	if len(output(res)) > a2achild.MaxOutput+200 {
		t.Errorf("9 MiB artifact: %d bytes of output kept", len(output(res)))
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for cfg, field := range map[*a2achild.Config]string{
		{}:                                    "url",
		{URL: "ftp://x"}:                      "url",
		{URL: "http://u:p@x"}:                 "url",
		{URL: "http://x", MaxDepth: -1}:       "maxDepth",
		{URL: "http://x", CancelGrace: -1}:    "cancelGrace",
		{URL: "http://x", PollInterval: -1}:   "pollInterval",
		{URL: "http://x", ReadyTimeout: -1e9}: "readyTimeout",
	} {
		_, err := a2achild.New(*cfg)
		var ce *subagent.ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("%+v: err = %v: want a config error on %s", *cfg, err, field)
		}
	}
}

func TestFollowupContinuesTheConversation(t *testing.T) {
	srv, _ := serve(t, serverOpts{streaming: true})
	p := newProvider(t, a2achild.Config{URL: srv.URL})
	run, err := start(t, p, "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	ref := run.(subagent.RemoteRun).RemoteSession()
	if !subagent.Continues(p) {
		t.Fatal("the provider does not say it continues its children")
	}
	parent := subagenttest.ParentAgent(t)
	next, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("main"), Parent: parent, Depth: 1}, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer subagenttest.Dispose(t, next)
	if res := subagenttest.Wait(t, next); res.StopReason != subagent.Completed || output(res) != "done: main" {
		t.Fatalf("follow-up: %+v", res)
	}
	if got := next.(subagent.RemoteRun).RemoteSession(); !strings.HasPrefix(ref, got) {
		t.Errorf("follow-up ran in conversation %q, want %q", got, ref)
	}
	if _, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: parent, Depth: 1}, ""); !errors.Is(err, subagent.ErrNotResumable) {
		t.Errorf("resume without a conversation: %v, want NOT_RESUMABLE", err)
	}
}

func TestHostileCardServers(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("/huge"+a2achild.CardPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"name":"` + strings.Repeat("x", 2<<20) + `"}`))
	})
	mux.HandleFunc("/silent"+a2achild.CardPath, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	if _, err := start(t, newProvider(t, a2achild.Config{URL: srv.URL + "/huge"}), "hello", nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a 2 MiB card: %v, want refused for its size", err)
	}
	p := newProvider(t, a2achild.Config{URL: srv.URL + "/silent", ReadyTimeout: 100 * time.Millisecond})
	_, err := start(t, p, "hello", nil)
	var rt *childproc.ReadyTimeoutError
	if !errors.As(err, &rt) {
		t.Errorf("a card that never comes: %v, want READY_TIMEOUT", err)
	}
	srv.CloseClientConnections()
}
