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

// AnthropicRequest is what the Anthropic mock saw of one /v1/messages request.
type AnthropicRequest struct {
	Path        string
	APIKey      string
	Model       string
	Stream      bool
	LastUser    string   // the text of the last user message, system reminders left out
	ToolResults []string // the tool results of the last user message, "error: " marking failed ones
	UserTexts   []string // the text of every user message with text, in order
}

// AnthropicReply is the mock's answer.
type AnthropicReply struct {
	Text    string
	ToolUse *AnthropicToolUse
	Hang    bool // start the message, then block until the client goes away
	Status  int  // an HTTP error instead of a stream
	Body    string
}

// AnthropicToolUse is a tool call the mock makes.
type AnthropicToolUse struct {
	ID, Name string
	Input    map[string]any
}

// Anthropic is a Messages API that streams server-sent events as the
// real API does.
type Anthropic struct {
	*httptest.Server
	mu       sync.Mutex
	requests []AnthropicRequest
	Arrived  chan struct{} // receives one token per request (when not full)
}

// NewAnthropic starts the mock, answering each request with reply; it is
// closed when the test ends.
func NewAnthropic(t testing.TB, reply func(AnthropicRequest) AnthropicReply) *Anthropic {
	m := &Anthropic{Arrived: make(chan struct{}, 64)}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		req, err := parseAnthropicRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.requests = append(m.requests, req)
		m.mu.Unlock()
		select {
		case m.Arrived <- struct{}{}:
		default:
		}
		m.serve(w, r, req, reply(req))
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *Anthropic) Seen() []AnthropicRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]AnthropicRequest(nil), m.requests...)
}

func parseAnthropicRequest(r *http.Request) (AnthropicRequest, error) {
	var body struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return AnthropicRequest{}, err
	}
	req := AnthropicRequest{Path: r.URL.Path, APIKey: r.Header.Get("x-api-key"), Model: body.Model, Stream: body.Stream}
	for _, msg := range body.Messages {
		if msg.Role != "user" {
			continue
		}
		req.LastUser, req.ToolResults = "", nil
		var text string
		if json.Unmarshal(msg.Content, &text) == nil {
			req.LastUser = text
			req.UserTexts = append(req.UserTexts, text)
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
		if req.LastUser != "" {
			req.UserTexts = append(req.UserTexts, req.LastUser)
		}
	}
	return req, nil
}

func (m *Anthropic) serve(w http.ResponseWriter, r *http.Request, req AnthropicRequest, rep AnthropicReply) {
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
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", len(m.Seen())),
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
