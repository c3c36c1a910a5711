package acpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
)

// greeter is an MCP server over streamable HTTP with one tool; it records
// the header X-Test of its requests.
func greeter(t *testing.T) (*httptest.Server, func() []string) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "greet", Description: "Greets someone.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Name string }
			json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello, " + a.Name}}}, nil
		})
	var mu sync.Mutex
	var seen []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Test"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// A client passes an MCP server in session/new: that session's agent lists
// and calls its tools (values taken literally); another session does not
// see them; the server is let go with the session.
func TestSessionMCPServer(t *testing.T) {
	hs, headers := greeter(t)
	var mu sync.Mutex
	var final *llm.Request
	rec := &recorder{}
	conn, rt := serve(t, rec,
		scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "mcp__my_greeter__greet", Arguments: `{"name":"acp"}`}),
		scripted.Entry{Reply: func(req *llm.Request) []content.Chunk {
			mu.Lock()
			final = req
			mu.Unlock()
			return scripted.Text("greeted").Chunks
		}})
	init, err := conn.Initialize(context.Background(), acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber})
	if err != nil || !init.AgentCapabilities.McpCapabilities.Http || !init.AgentCapabilities.McpCapabilities.Sse {
		t.Fatalf("initialize = %+v, %v", init.AgentCapabilities, err)
	}
	resp, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{
		{Http: &acpsdk.McpServerHttpInline{Name: "my greeter", Type: "http", Url: hs.URL,
			Headers: []acpsdk.HttpHeader{{Name: "X-Test", Value: "${NOT_EXPANDED}"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	other := newSession(t, conn)
	if r, err := prompt(conn, resp.SessionId, "greet acp"); err != nil || r.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt = %+v, %v", r, err)
	}
	if _, _, tools := rec.texts(); strings.Join(tools, ",") != "call mcp__my_greeter__greet,update completed" {
		t.Errorf("tools %v", tools)
	}
	mu.Lock()
	var listed bool
	for _, spec := range final.Tools {
		listed = listed || spec.Name == "mcp__my_greeter__greet"
	}
	last := final.Messages[len(final.Messages)-1]
	mu.Unlock()
	if !listed || content.JoinText(last.Content[0].Content) != "hello, acp" {
		t.Errorf("listed %v, last message %+v", listed, last)
	}
	if h := headers(); len(h) == 0 || h[0] != "${NOT_EXPANDED}" {
		t.Errorf("the server saw X-Test %q", h)
	}
	for _, a := range rt.Agents.List() {
		if a.ID() == string(other) && a.Tools().Has("mcp__my_greeter__greet") {
			t.Error("another session sees the server's tool")
		}
	}
}

func TestSessionMCPServerRefused(t *testing.T) {
	conn, _ := serve(t, &recorder{})
	for _, servers := range [][]acpsdk.McpServer{
		{{Http: &acpsdk.McpServerHttpInline{Name: "x", Type: "http", Url: "ftp://nowhere"}}},
		{{Stdio: &acpsdk.McpServerStdio{Name: "x", Command: ""}}},
		{{Stdio: &acpsdk.McpServerStdio{Name: "x", Command: "a"}}, {Stdio: &acpsdk.McpServerStdio{Name: "x", Command: "b"}}},
	} {
		if _, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: servers}); err == nil {
			t.Errorf("session/new with %+v accepted", servers)
		}
	}
}
