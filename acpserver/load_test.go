package acpserver_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/tool"
)

// serveStore runs a dsh ACP server over the JSONL store in dir, as one
// `dsh acp` process would, and returns the client and a stop that ends the
// server like a process exit.
func serveStore(t *testing.T, dir string, rec *recorder, model llm.Model) (*acpsdk.ClientSideConnection, func()) {
	t.Helper()
	rt, err := dsh.New(dsh.Options{Backend: jsonl.New(dir), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rt.LLM.Register("test", model)
	rt.Tools.Register(tool.Definition{Name: "bash", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("ran"), nil
	}})
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- acpserver.Serve(ctx, acpserver.Options{Agents: rt.Agents, Sessions: rt.Sessions, AgentOptions: agent.Options{Provider: "test"},
			Policy: permission.Policy{}}, serverIn, serverOut)
	}()
	conn := acpsdk.NewClientSideConnection(rec, clientOut, clientIn)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			clientOut.Close()
			serverOut.Close()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			<-conn.Done()
			rt.Close(context.Background())
		})
	}
	t.Cleanup(stop)
	resp, err := conn.Initialize(context.Background(), acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber})
	if err != nil || !resp.AgentCapabilities.LoadSession || resp.AgentCapabilities.SessionCapabilities.List == nil {
		t.Fatalf("initialize: %+v %v", resp.AgentCapabilities, err)
	}
	return conn, stop
}

// A session created by one server continues in another over the same
// store: session/list names it, session/load replays its conversation and
// then takes a prompt whose model request holds the earlier turn. Unknown
// ids, another cwd and a second load are clear errors.
func TestLoadSessionInANewServer(t *testing.T) {
	dir, cwd := t.TempDir(), t.TempDir()
	var mu sync.Mutex
	var requests []*llm.Request
	model := scripted.New(
		scripted.ToolCalls("Let me look.", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}),
		scripted.Text("first answer"),
	)
	conn, stop := serveStore(t, dir, &recorder{}, model)
	resp, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: cwd, McpServers: []acpsdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.SessionId
	if _, err := prompt(conn, id, "first question"); err != nil {
		t.Fatal(err)
	}
	stop()

	second := scripted.New(scripted.Text("second answer"))
	rec := &recorder{}
	conn, stop2 := serveStore(t, dir, rec, llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		mu.Lock()
		requests = append(requests, req)
		mu.Unlock()
		return second.Stream(ctx, req)
	}))
	list, err := conn.ListSessions(context.Background(), acpsdk.ListSessionsRequest{Cwd: &cwd})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionId != id || list.Sessions[0].Cwd != cwd {
		t.Fatalf("session/list: %+v %v", list, err)
	}
	if _, err := conn.LoadSession(context.Background(), acpsdk.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: []acpsdk.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	message, _, tools := rec.texts()
	var user []string
	rec.mu.Lock()
	for _, u := range rec.updates {
		if u.UserMessageChunk != nil && u.UserMessageChunk.Content.Text != nil {
			user = append(user, u.UserMessageChunk.Content.Text.Text)
		}
	}
	rec.mu.Unlock()
	if !slices.Equal(user, []string{"first question"}) || message != "Let me look.first answer" || !slices.Equal(tools, []string{"call bash: ls", "update completed"}) {
		t.Errorf("replay: user %q, message %q, tools %q", user, message, tools)
	}
	if r, err := prompt(conn, id, "second question"); err != nil || r.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt after load: %+v %v", r, err)
	}
	mu.Lock()
	var texts []string
	for _, m := range requests[0].Messages {
		texts = append(texts, content.JoinText(m.Content))
	}
	mu.Unlock()
	if len(texts) < 3 || texts[0] != "first question" || texts[len(texts)-1] != "second question" || !strings.Contains(strings.Join(texts, "|"), "first answer") {
		t.Errorf("the loaded session's request holds %q", texts)
	}

	_, err = conn.LoadSession(context.Background(), acpsdk.LoadSessionRequest{SessionId: "nope", Cwd: cwd, McpServers: []acpsdk.McpServer{}})
	var re *acpsdk.RequestError
	if !errors.As(err, &re) || re.Code != -32002 {
		t.Errorf("unknown session: %v", err)
	}
	if _, err := conn.LoadSession(context.Background(), acpsdk.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: []acpsdk.McpServer{}}); err == nil ||
		!strings.Contains(err.Error(), "already open") {
		t.Errorf("second load: %v", err)
	}
	if _, err := conn.LoadSession(context.Background(), acpsdk.LoadSessionRequest{SessionId: id, Cwd: "relative", McpServers: []acpsdk.McpServer{}}); err == nil {
		t.Error("a relative cwd was accepted")
	}
	stop2()
	conn, _ = serveStore(t, dir, &recorder{}, scripted.New())
	if _, err := conn.LoadSession(context.Background(), acpsdk.LoadSessionRequest{SessionId: id, Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{}}); err == nil ||
		!strings.Contains(err.Error(), "works in "+cwd) {
		t.Errorf("load in another cwd: %v", err)
	}
}
