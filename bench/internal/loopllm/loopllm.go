// Package loopllm is a loopback OpenAI-compatible chat-completions server
// that answers every request at once with a short server-sent-event stream
// (two text deltas, a finish chunk with usage, [DONE]), the format of the
// main module's internal/llmtest, whose mocks need a test to run in; its
// Responses API answer (StartResponses) is llmtest's.
package loopllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// Server is a running loopback model.
type Server struct {
	*httptest.Server
	Requests atomic.Int64
}

// Start starts a server whose every answer is text; the caller closes it.
func Start(text string) *Server {
	s := &Server{}
	half := len(text) / 2
	parts := []string{text[:half], text[half:]}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(chunk string) {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
			w.(http.Flusher).Flush()
		}
		for _, p := range parts {
			b, _ := json.Marshal(p)
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%s}}]}`, b))
		}
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)
		send("[DONE]")
	}))
	return s
}

// StartResponses starts a loopback OpenAI Responses API server (what Codex
// speaks, `wire_api = "responses"`) whose every answer is text, in one
// delta, at once; the caller closes it.
func StartResponses(text string) *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		event(map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}})
		llmtest.WriteResponsesText(event, text, map[string]any{"input_tokens": 3, "output_tokens": 2, "total_tokens": 5})
	}))
	return s
}
