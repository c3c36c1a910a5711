// Package loopllm is a loopback OpenAI-compatible chat-completions server
// that answers every request at once with a short server-sent-event stream
// (two text deltas, a finish chunk with usage, [DONE]), the format of the
// main module's internal/llmtest, which another module cannot import.
package loopllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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
		part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		event(map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}})
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
			"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}})
	}))
	return s
}
