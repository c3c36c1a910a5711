package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// ResponsesAnswer is what the Responses mock answers a prompt with.
func ResponsesAnswer(prompt string) string { return "PONG: " + prompt }

// Responses is an OpenAI Responses API on loopback that behaves by the
// last user message: "fail" in it → HTTP 400; "hang" → a stream that never
// ends; otherwise it streams ResponsesAnswer.
type Responses struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	auth     []string
	users    [][]string    // every request's user texts, in order
	Hanging  chan struct{} // receives once per hanging request
}

// NewResponses starts the mock; it is closed when the test ends.
func NewResponses(t testing.TB) *Responses {
	m := &Responses{Hanging: make(chan struct{}, 16)}
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
		var users []string
		for _, in := range body.Input {
			if in.Role == "user" && len(in.Content) > 0 {
				prompt = in.Content[len(in.Content)-1].Text
				users = append(users, prompt)
			}
		}
		m.mu.Lock()
		m.users = append(m.users, users)
		m.mu.Unlock()
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
			m.Hanging <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		WriteResponsesText(event, ResponsesAnswer(prompt), map[string]any{
			"input_tokens": 11, "input_tokens_details": map[string]any{"cached_tokens": 3},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 1}, "total_tokens": 16})
	}))
	t.Cleanup(func() {
		close(release)
		m.Close()
	})
	return m
}

// UserTexts returns the user texts of every request so far, in order.
func (m *Responses) UserTexts() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]string(nil), m.users...)
}

// Stats returns the number of requests and their Authorization headers.
func (m *Responses) Stats() (int, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests, append([]string(nil), m.auth...)
}

// WriteResponsesText sends, through event (one server-sent event each),
// the OpenAI Responses API stream of an answer of text in one delta, after
// response.created: the message item, its one output_text part, and
// response.completed with usage.
func WriteResponsesText(event func(map[string]any), text string, usage map[string]any) {
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
	event(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "usage": usage}})
}

// CodexConfig is a Codex config.toml that runs Codex offline against the
// Responses API at baseURL (a loopback mock, its key in $MOCK_API_KEY):
// no approvals, a read-only sandbox, and no update check, retries or
// analytics.
func CodexConfig(baseURL string) string {
	return fmt.Sprintf(`model = "mock-model"
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
`, baseURL)
}
