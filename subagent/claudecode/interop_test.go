package claudecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/claudecode"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The interop tier runs the real Claude Code CLI (the pinned native
// binary) against a loopback Anthropic Messages API mock: keyless and
// offline.

// claudeBinary is the pinned native binary, or skips (fails under CI).
func claudeBinary(t *testing.T) string {
	return testpeers.Path(t, "node_modules/@anthropic-ai/claude-code-linux-x64/claude")
}

// mockRequest is what the mock saw of one /v1/messages request.
type mockRequest struct {
	Path        string
	APIKey      string
	Model       string
	Stream      bool
	LastUser    string   // the text of the last user message, system reminders left out
	ToolResults []string // the tool results of the last user message, "error: " marking failed ones
}

// mockReply is the mock's answer.
type mockReply struct {
	Text    string
	ToolUse *mockToolUse
	Hang    bool // start the message, then block until the client goes away
	Status  int  // an HTTP error instead of a stream
	Body    string
}

type mockToolUse struct {
	ID, Name string
	Input    map[string]any
}

// anthropicMock is a Messages API that streams server-sent events as the
// real API does.
type anthropicMock struct {
	*httptest.Server
	mu       sync.Mutex
	requests []mockRequest
	arrived  chan struct{} // one token per request
}

func newAnthropicMock(t *testing.T, reply func(mockRequest) mockReply) *anthropicMock {
	m := &anthropicMock{arrived: make(chan struct{}, 64)}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		req, err := parseMockRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.requests = append(m.requests, req)
		m.mu.Unlock()
		select {
		case m.arrived <- struct{}{}:
		default:
		}
		m.serve(w, r, req, reply(req))
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *anthropicMock) seen() []mockRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mockRequest(nil), m.requests...)
}

func parseMockRequest(r *http.Request) (mockRequest, error) {
	var body struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return mockRequest{}, err
	}
	req := mockRequest{Path: r.URL.Path, APIKey: r.Header.Get("x-api-key"), Model: body.Model, Stream: body.Stream}
	for _, msg := range body.Messages {
		if msg.Role != "user" {
			continue
		}
		req.LastUser, req.ToolResults = "", nil
		var text string
		if json.Unmarshal(msg.Content, &text) == nil {
			req.LastUser = text
			continue
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
			IsError bool            `json:"is_error"`
		}
		json.Unmarshal(msg.Content, &blocks)
		var texts []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if !strings.HasPrefix(b.Text, "<system-reminder>") {
					texts = append(texts, b.Text)
				}
			case "tool_result":
				var s string
				if json.Unmarshal(b.Content, &s) != nil {
					s = string(b.Content)
				}
				if b.IsError {
					s = "error: " + s
				}
				req.ToolResults = append(req.ToolResults, s)
			}
		}
		req.LastUser = strings.Join(texts, "\n")
	}
	return req, nil
}

func (m *anthropicMock) serve(w http.ResponseWriter, r *http.Request, req mockRequest, rep mockReply) {
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		fmt.Fprint(w, rep.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		w.(http.Flusher).Flush()
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", len(m.seen())),
		"type": "message", "role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 11, "output_tokens": 1, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 2}}})
	if rep.Hang {
		<-r.Context().Done()
		return
	}
	index, stop := 0, "end_turn"
	if rep.Text != "" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		half := len(rep.Text) / 2
		for _, part := range []string{rep.Text[:half], rep.Text[half:]} {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if tu := rep.ToolUse; tu != nil {
		input, _ := json.Marshal(tu.Input)
		send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "tool_use", "id": tu.ID, "name": tu.Name, "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		stop = "tool_use"
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// realConfig runs the real CLI against the mock, per §4.4 of the research
// note: fake key, no nonessential traffic, no retries, a private HOME (and a
// fresh CLAUDE_CONFIG_DIR per run, the provider's default).
func realConfig(t *testing.T, bin string, m *anthropicMock) claudecode.Config {
	return claudecode.Config{Command: bin, Model: "mock-model",
		Env: map[string]string{"ANTHROPIC_BASE_URL": m.URL, "ANTHROPIC_API_KEY": "fake", "HOME": t.TempDir(),
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
			"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "0"},
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 20 * time.Second, CancelGrace: 5 * time.Second, EOFGrace: 2 * time.Second, TermGrace: 2 * time.Second}}
}

const authError = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`

func TestRealClaudeAnswer(t *testing.T) {
	bin := claudeBinary(t)
	checkNoChildren(t)
	m := newAnthropicMock(t, func(r mockRequest) mockReply { return mockReply{Text: "Hello from the mock: " + r.LastUser} })
	var rec recorder
	run := startWith(t, newProvider(t, realConfig(t, bin, m)), context.Background(), "say hello", rec.add)
	res := wait(t, run)
	dispose(t, run)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "Hello from the mock: say hello" {
		t.Fatalf("result %+v", res)
	}
	want := map[string]content.Usage{"claude-code/mock-model": {Input: 11, Output: 5, CacheRead: 3, CacheWrite: 2}}
	if !mapsEqual(res.Usage, want) {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if res.CostUSD <= 0 {
		t.Errorf("cost %v", res.CostUSD)
	}
	seen := m.seen()
	if len(seen) != 1 || seen[0].APIKey != "fake" || seen[0].Model != "mock-model" || !seen[0].Stream || seen[0].LastUser != "say hello" {
		t.Errorf("the mock saw %+v", seen)
	}
	var text string
	for _, p := range rec.all() {
		if p.Kind == subagent.ProgressText {
			text += p.Text
		}
	}
	if text != "Hello from the mock: say hello" {
		t.Errorf("progress text %q", text)
	}
}

func TestRealClaude401IsAFailure(t *testing.T) {
	bin := claudeBinary(t)
	checkNoChildren(t)
	m := newAnthropicMock(t, func(mockRequest) mockReply { return mockReply{Status: http.StatusUnauthorized, Body: authError} })
	res := runToEnd(t, realConfig(t, bin, m), "say hello")
	if res.StopReason != subagent.Failed || len(res.Output) != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, s := range []string{`claude result "success" with is_error`, "API status 401", "exit status 1"} {
		if !strings.Contains(res.Diagnostic, s) {
			t.Errorf("diagnostic %q lacks %q", res.Diagnostic, s)
		}
	}
	if n := len(m.seen()); n != 1 {
		t.Errorf("%d requests, want 1 (no retries)", n)
	}
}

func TestRealClaudeCancelDuringModelRequest(t *testing.T) {
	bin := claudeBinary(t)
	checkNoChildren(t)
	m := newAnthropicMock(t, func(mockRequest) mockReply { return mockReply{Hang: true} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := realConfig(t, bin, m)
	run := start(t, newProvider(t, cfg), ctx, "take your time")
	select {
	case <-m.arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("no model request")
	}
	began := time.Now()
	cancel()
	res := wait(t, run)
	if res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(began); d >= cfg.CancelGrace {
		t.Errorf("settled after %s: the CLI ignored the interrupt", d)
	}
	dispose(t, run)
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

func TestRealClaudePermissionRequests(t *testing.T) {
	bin := claudeBinary(t)
	for _, policy := range []string{claudecode.PermissionDeny, claudecode.PermissionPolicy} {
		t.Run(policy, func(t *testing.T) {
			checkNoChildren(t)
			a := parent(t)
			target := filepath.Join(a.Cwd(), "out.txt")
			m := newAnthropicMock(t, func(r mockRequest) mockReply {
				if len(r.ToolResults) == 0 {
					return mockReply{Text: "I will write the file.", ToolUse: &mockToolUse{ID: "toolu_01", Name: "Write",
						Input: map[string]any{"file_path": target, "content": "hello\n"}}}
				}
				return mockReply{Text: "tool said: " + r.ToolResults[0]}
			})
			cfg := realConfig(t, bin, m)
			cfg.PermissionMode, cfg.Permission = "default", policy
			var rec recorder
			run, err := newProvider(t, cfg).Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("write a file"),
				Parent: a, Progress: rec.add})
			if err != nil {
				t.Fatal(err)
			}
			res := wait(t, run)
			dispose(t, run)
			out := content.JoinText(res.Output)
			_, statErr := os.Stat(target)
			switch policy {
			case claudecode.PermissionDeny:
				if res.StopReason != subagent.Completed || !strings.HasPrefix(out, "tool said: error: permission to use Write denied") || statErr == nil {
					t.Fatalf("result %+v, file: %v", res, statErr)
				}
			case claudecode.PermissionPolicy: // the parent's policy allows everything
				if res.StopReason != subagent.Completed || !strings.HasPrefix(out, "tool said: File created successfully") || statErr != nil {
					t.Fatalf("result %+v, file: %v", res, statErr)
				}
			}
			var call bool
			for _, p := range rec.all() {
				call = call || p.Kind == subagent.ProgressToolCall && p.Tool == "Write" && p.CallID == "toolu_01"
			}
			if !call {
				t.Errorf("no tool-call progress in %+v", rec.all())
			}
		})
	}
}

func TestRealClaudeConformance(t *testing.T) {
	bin := claudeBinary(t)
	m := newAnthropicMock(t, func(r mockRequest) mockReply {
		switch r.LastUser {
		case subagenttest.PromptHang:
			return mockReply{Hang: true}
		case subagenttest.PromptFail:
			return mockReply{Status: http.StatusUnauthorized, Body: authError}
		}
		return mockReply{Text: "done: " + r.LastUser}
	})
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return newProvider(t, realConfig(t, bin, m)), parent(t)
		},
		Leftovers: noChildren,
	})
}
