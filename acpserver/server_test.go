package acpserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	acpsdk "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an ACP client that records updates and answers permission
// requests with a fixed option.
type recorder struct {
	mu      sync.Mutex
	updates []acpsdk.SessionUpdate
	answer  string // option id to select; "" cancels
	asked   int
}

func (r *recorder) SessionUpdate(_ context.Context, n acpsdk.SessionNotification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, n.Update)
	return nil
}

func (r *recorder) RequestPermission(_ context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	if r.answer == "" {
		return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(acpsdk.PermissionOptionId(r.answer))}, nil
}

func (r *recorder) ReadTextFile(context.Context, acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	return acpsdk.ReadTextFileResponse{}, errors.New("no")
}
func (r *recorder) WriteTextFile(context.Context, acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	return acpsdk.WriteTextFileResponse{}, errors.New("no")
}
func (r *recorder) CreateTerminal(context.Context, acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	return acpsdk.CreateTerminalResponse{}, errors.New("no")
}
func (r *recorder) KillTerminal(context.Context, acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	return acpsdk.KillTerminalResponse{}, errors.New("no")
}
func (r *recorder) TerminalOutput(context.Context, acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	return acpsdk.TerminalOutputResponse{}, errors.New("no")
}
func (r *recorder) ReleaseTerminal(context.Context, acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	return acpsdk.ReleaseTerminalResponse{}, errors.New("no")
}
func (r *recorder) WaitForTerminalExit(context.Context, acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	return acpsdk.WaitForTerminalExitResponse{}, errors.New("no")
}

func (r *recorder) texts() (message, thought string, tools []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.updates {
		switch {
		case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
			message += u.AgentMessageChunk.Content.Text.Text
		case u.AgentThoughtChunk != nil && u.AgentThoughtChunk.Content.Text != nil:
			thought += u.AgentThoughtChunk.Content.Text.Text
		case u.ToolCall != nil:
			tools = append(tools, "call "+u.ToolCall.Title)
		case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
			tools = append(tools, "update "+string(*u.ToolCallUpdate.Status))
		}
	}
	return
}

// userTexts returns the user message chunks the client received.
func (r *recorder) userTexts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, u := range r.updates {
		if u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil {
			out = append(out, u.UserMessageChunk.Content.Text.Text)
		}
	}
	return out
}

// server is dsh's ACP server running on a model, connected by pipes to a
// client.
type server struct {
	rt   *dsh.Runtime
	in   io.WriteCloser // the client's frames to the server
	out  io.Reader      // the server's frames to the client
	done chan error     // Serve's result
}

// start runs Serve with opts (Agents, AgentOptions and a Policy asking
// before the default tools filled in when unset) on model and a bash tool that only says "ran". The
// cleanup closes the client's side and checks that Serve returned without
// an error and left no agent.
func start(t *testing.T, opts acpserver.Options, model llm.Model) *server {
	t.Helper()
	rt, err := dsh.New(dsh.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rt.LLM.Register("test", model)
	rt.Tools.Register(tool.Definition{Name: "bash", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("ran"), nil
	}})
	opts.Agents, opts.AgentOptions = rt.Agents, agent.Options{Provider: "test"}
	if opts.Policy.Unrestricted() {
		opts.Policy = permission.Policy{}.Narrow(permission.AskFor(acpserver.DefaultAskPermission()...))
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	srv := &server{rt: rt, in: clientOut, out: clientIn, done: make(chan error, 1)}
	go func() { srv.done <- acpserver.Serve(ctx, opts, serverIn, serverOut) }()
	t.Cleanup(func() {
		clientOut.Close()
		if err := <-srv.done; err != nil {
			t.Errorf("serve: %v", err)
		}
		cancel()
		serverOut.Close()
		if n := len(rt.Agents.List()); n != 0 {
			t.Errorf("%d agents left after the connection closed", n)
		}
		rt.Close(context.Background())
	})
	return srv
}

// connect starts a server and an SDK client recording into rec, and
// initializes the connection.
func connect(t *testing.T, opts acpserver.Options, model llm.Model, rec acpsdk.Client) (*acpsdk.ClientSideConnection, *server) {
	t.Helper()
	var conn *acpsdk.ClientSideConnection
	t.Cleanup(func() { <-conn.Done() }) // after start's cleanup closed the pipes
	srv := start(t, opts, model)
	conn = acpsdk.NewClientSideConnection(rec, srv.in, srv.out)
	if _, err := conn.Initialize(context.Background(), acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	return conn, srv
}

// serve runs dsh's ACP server on a scripted model, connected by pipes to an
// SDK client.
func serve(t *testing.T, rec *recorder, entries ...scripted.Entry) (*acpsdk.ClientSideConnection, *dsh.Runtime) {
	t.Helper()
	conn, srv := connect(t, acpserver.Options{}, scripted.New(entries...), rec)
	return conn, srv.rt
}

func newSession(t *testing.T, conn *acpsdk.ClientSideConnection) acpsdk.SessionId {
	t.Helper()
	resp, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.SessionId
}

func prompt(conn *acpsdk.ClientSideConnection, id acpsdk.SessionId, text string) (acpsdk.PromptResponse, error) {
	return conn.Prompt(context.Background(), acpsdk.PromptRequest{SessionId: id, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(text)}})
}

func TestInitializeIsHonest(t *testing.T) {
	rec := &recorder{}
	conn, _ := serve(t, rec)
	resp, err := conn.Initialize(context.Background(), acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber})
	if err != nil || resp.ProtocolVersion != 1 || !resp.AgentCapabilities.LoadSession || resp.AgentCapabilities.PromptCapabilities.Image ||
		resp.AgentInfo == nil || resp.AgentInfo.Name != "dsh" {
		t.Fatalf("initialize = %+v, %v", resp, err)
	}
}

func TestPromptStreamsTextToolsAndEnds(t *testing.T) {
	rec := &recorder{answer: "allow-once"}
	conn, _ := serve(t, rec,
		scripted.ToolCalls("Let me run it.", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}),
		scripted.Text("All done."))
	id := newSession(t, conn)
	resp, err := prompt(conn, id, "go")
	if err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", resp, err)
	}
	msg, _, tools := rec.texts()
	if msg != "Let me run it.All done." || strings.Join(tools, ",") != "call bash: ls,update completed" || rec.asked != 1 {
		t.Fatalf("message %q, tools %v, asked %d", msg, tools, rec.asked)
	}
}

func TestRejectedPermissionRefusesTheTool(t *testing.T) {
	rec := &recorder{answer: "reject-once"}
	conn, _ := serve(t, rec,
		scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"rm -rf /"}`}),
		scripted.Text("I was not allowed."))
	id := newSession(t, conn)
	if resp, err := prompt(conn, id, "go"); err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", resp, err)
	}
	if _, _, tools := rec.texts(); strings.Join(tools, ",") != "call bash: rm -rf /,update failed" {
		t.Fatalf("tools %v", tools)
	}
}

func TestCancelResolvesCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		conn, _ := serve(t, rec, scripted.Hang("thinking"))
		id := newSession(t, conn)
		type answer struct {
			resp acpsdk.PromptResponse
			err  error
		}
		done := make(chan answer, 1)
		go func() { r, err := prompt(conn, id, "go"); done <- answer{r, err} }()
		synctest.Wait() // the turn is parked in its model call, its text sent
		if m, _, _ := rec.texts(); m != "thinking" {
			t.Errorf("message before the cancel %q", m)
		}
		conn.Cancel(context.Background(), acpsdk.CancelNotification{SessionId: id})
		if a := <-done; a.err != nil || a.resp.StopReason != acpsdk.StopReasonCancelled {
			t.Fatalf("prompt = %+v, %v", a.resp, a.err)
		}
	})
}

func TestBadRequests(t *testing.T) {
	rec := &recorder{}
	conn, _ := serve(t, rec, scripted.Fail("MISSING_CREDENTIAL", "DEEPSEEK_API_KEY is not set"))
	for _, tc := range []struct {
		name string
		req  acpsdk.NewSessionRequest
	}{
		{"relative cwd", acpsdk.NewSessionRequest{Cwd: "rel", McpServers: []acpsdk.McpServer{}}},
		{"missing cwd", acpsdk.NewSessionRequest{Cwd: "/no/such/dir", McpServers: []acpsdk.McpServer{}}},
	} {
		_, err := conn.NewSession(context.Background(), tc.req)
		var re *acpsdk.RequestError
		if !errors.As(err, &re) || re.Code != -32602 {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
	if _, err := prompt(conn, "nope", "hi"); err == nil {
		t.Error("prompt to an unknown session succeeded")
	}
	id := newSession(t, conn)
	_, err := conn.Prompt(context.Background(), acpsdk.PromptRequest{SessionId: id,
		Prompt: []acpsdk.ContentBlock{{Image: &acpsdk.ContentBlockImage{Data: "x", MimeType: "image/png"}}}})
	if err == nil {
		t.Error("an image prompt was accepted without the capability")
	}
	// No model key: the prompt fails with a clear error instead of hanging.
	_, err = prompt(conn, id, "hi")
	if err == nil || !strings.Contains(err.Error(), "DEEPSEEK_API_KEY is not set") {
		t.Fatalf("err = %v", err)
	}
}

func TestOnePromptInFlightPerSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		conn, _ := serve(t, rec, scripted.Hang("working"))
		id := newSession(t, conn)
		first := make(chan acpsdk.PromptResponse, 1)
		go func() { r, _ := prompt(conn, id, "one"); first <- r }()
		synctest.Wait() // the first turn is parked in its model call, its text sent
		if m, _, _ := rec.texts(); m != "working" {
			t.Fatalf("message before the second prompt %q", m)
		}
		_, err := prompt(conn, id, "two")
		if err == nil || !strings.Contains(err.Error(), "already in flight") {
			t.Fatalf("second prompt: %v", err)
		}
		conn.Cancel(context.Background(), acpsdk.CancelNotification{SessionId: id})
		if r := <-first; r.StopReason != acpsdk.StopReasonCancelled {
			t.Fatalf("first = %+v", r)
		}
	})
}

// A client's `_meta` can narrow the session's policy, never widen it: a
// policy that allows bash still leaves bash asked about, and one that denies
// it refuses it without asking. The session's lineage comes from the meta.
func TestMetaPolicyOnlyNarrows(t *testing.T) {
	for _, tc := range []struct {
		decision permission.Decision
		asked    int
		status   string
	}{{permission.Allow, 1, "completed"}, {permission.Deny, 0, "failed"}} {
		t.Run(string(tc.decision), func(t *testing.T) {
			rec := &recorder{answer: "allow-once"}
			conn, rt := serve(t, rec,
				scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}),
				scripted.Text("done"))
			policy := permission.Policy{}.Narrow(permission.Rules{Default: permission.Allow, Tools: map[string]permission.Decision{"bash": tc.decision}})
			resp, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{},
				Meta: acpmeta.Set(nil, acpmeta.Session{ParentSession: "parent-1", Depth: 2, Policy: &policy})})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := prompt(conn, resp.SessionId, "go"); err != nil {
				t.Fatal(err)
			}
			if _, _, tools := rec.texts(); rec.asked != tc.asked || strings.Join(tools, ",") != "call bash: ls,update "+tc.status {
				t.Errorf("asked %d, tools %v", rec.asked, tools)
			}
			a, _ := rt.Agents.Get(string(resp.SessionId))
			if h := a.Session().Header(); h.ParentSession != "parent-1" || h.DelegationDepth != 2 || a.Depth() != 2 {
				t.Errorf("header %+v, depth %d", h, a.Depth())
			}
		})
	}
}
