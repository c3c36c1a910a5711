package codex_test

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
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// codexBinary is the native binary of the pinned @openai/codex package.
const codexBinary = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

// mockAnswer is what the Responses mock answers a prompt with.
func mockAnswer(prompt string) string { return "PONG: " + prompt }

// responsesMock is an OpenAI Responses API on loopback that behaves by the
// last user message: "fail" in it → HTTP 400; "hang" → a stream that never
// ends; otherwise it streams mockAnswer.
type responsesMock struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	auth     []string
	hanging  chan struct{} // receives once per hanging request
}

func newResponsesMock(t *testing.T) *responsesMock {
	m := &responsesMock{hanging: make(chan struct{}, 16)}
	release := make(chan struct{})
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Input []struct {
				Role    string `json:"role"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"input"`
		}
		if r.URL.Path != "/v1/responses" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "unexpected request", http.StatusNotFound)
			return
		}
		m.mu.Lock()
		m.requests++
		m.auth = append(m.auth, r.Header.Get("Authorization"))
		m.mu.Unlock()
		prompt := ""
		for _, in := range body.Input {
			if in.Role == "user" && len(in.Content) > 0 {
				prompt = in.Content[len(in.Content)-1].Text
			}
		}
		if strings.Contains(prompt, "fail") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"the mock rejects this request","type":"invalid_request_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		flusher := w.(http.Flusher)
		event := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			flusher.Flush()
		}
		event(map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}})
		if strings.Contains(prompt, "hang") {
			m.hanging <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		text := mockAnswer(prompt)
		part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		event(map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []any{}}})
		event(map[string]any{"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": ""}})
		event(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text})
		event(map[string]any{"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": text})
		event(map[string]any{"type": "response.content_part.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": part})
		event(map[string]any{"type": "response.output_item.done", "output_index": 0,
			"item": map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []any{part}}})
		event(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "usage": map[string]any{
			"input_tokens": 11, "input_tokens_details": map[string]any{"cached_tokens": 3},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 1}, "total_tokens": 16}}})
	}))
	t.Cleanup(func() {
		close(release)
		m.Close()
	})
	return m
}

func (m *responsesMock) stats() (int, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests, append([]string(nil), m.auth...)
}

// realConfig runs the pinned codex against m, offline and keyless, with a
// fresh CODEX_HOME and HOME.
func realConfig(t *testing.T, m *responsesMock) codex.Config {
	bin := testpeers.Path(t, codexBinary)
	home := t.TempDir()
	toml := fmt.Sprintf(`model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.mock]
name = "Mock Responses"
base_url = "%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
requires_openai_auth = false
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`, m.URL)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return codex.Config{Command: bin, CodexHome: home,
		Env:           map[string]string{"HOME": t.TempDir(), "MOCK_API_KEY": "fake", "NO_PROXY": "127.0.0.1"},
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 10 * time.Second, CancelGrace: 3 * time.Second, EOFGrace: time.Second, TermGrace: time.Second}}
}

func TestRealCodexAnswers(t *testing.T) {
	m := newResponsesMock(t)
	p := newProvider(t, realConfig(t, m))
	var mu sync.Mutex
	var streamed strings.Builder
	req := request(t, "say PONG")
	req.Progress = func(pr subagent.Progress) {
		if pr.Kind == subagent.ProgressText {
			mu.Lock()
			streamed.WriteString(pr.Text)
			mu.Unlock()
		}
	}
	run := start(t, p, context.Background(), req)
	res := wait(t, run)
	dispose(t, run)
	checkNoChildren(t)
	want := mockAnswer("say PONG")
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != want {
		t.Fatalf("result %+v", res)
	}
	if n, auth := m.stats(); n != 1 || auth[0] != "Bearer fake" {
		t.Errorf("%d model requests, auth %q", n, auth)
	}
	if u := res.Usage["codex/mock-model"]; u != (content.Usage{Input: 8, CacheRead: 3, Output: 5, Reasoning: 1}) {
		t.Errorf("usage %+v", res.Usage)
	}
	mu.Lock()
	defer mu.Unlock()
	if streamed.String() != want {
		t.Errorf("streamed %q", streamed.String())
	}
}

func TestRealCodexModelFailure(t *testing.T) {
	m := newResponsesMock(t)
	run := start(t, newProvider(t, realConfig(t, m)), context.Background(), request(t, "please fail"))
	res := wait(t, run)
	dispose(t, run)
	checkNoChildren(t)
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "category other") ||
		!strings.Contains(res.Diagnostic, "the mock rejects this request") {
		t.Fatalf("result %+v", res)
	}
}

func TestRealCodexCancelDuringModelRequest(t *testing.T) {
	m := newResponsesMock(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := start(t, newProvider(t, realConfig(t, m)), ctx, request(t, "please hang"))
	select {
	case <-m.hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("the model request never came")
	}
	t0 := time.Now()
	cancel()
	res := wait(t, run)
	t.Logf("aborted %s after the cancel", time.Since(t0))
	dispose(t, run)
	checkNoChildren(t)
	if res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
}

func TestRealCodexConformance(t *testing.T) {
	m := newResponsesMock(t)
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return newProvider(t, realConfig(t, m)), parent(t)
		},
		Leftovers: noChildren,
	})
}
