// Package llmtest runs a loopback OpenAI-compatible chat-completions server
// for tests and load runs: it answers each request, as the real API does, with a stream of
// server-sent events, as decided by a function of the request.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Request is what a reply function sees of a chat-completions request.
type Request struct {
	LastUser    string   // the text of the last user message
	ToolResults []string // the contents of the tool messages, in order
	Header      http.Header
}

// Reply is one answer.
type Reply struct {
	Text     string    // streamed in two deltas
	ToolCall *ToolCall // a tool call after the text
	Hang     bool      // stream Text, then block until the client goes away
	Status   int       // an HTTP error status instead of a stream
	Body     string    // the error body
}

// ToolCall is a function call the reply makes.
type ToolCall struct {
	Name      string
	Arguments string
}

// NewServer starts a server answering with reply; it is closed when the test
// ends.
func NewServer(t testing.TB, reply func(Request) Reply) *httptest.Server {
	srv := Start(reply)
	t.Cleanup(srv.Close)
	return srv
}

// Start starts a server answering with reply; the caller closes it.
func Start(reply func(Request) Reply) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := Request{Header: r.Header}
		for _, m := range body.Messages {
			switch m.Role {
			case "user":
				req.LastUser = m.Content
			case "tool":
				req.ToolResults = append(req.ToolResults, m.Content)
			}
		}
		rep := reply(req)
		if rep.Status != 0 {
			http.Error(w, rep.Body, rep.Status)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(chunk string) {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
			w.(http.Flusher).Flush()
		}
		if rep.Text != "" {
			half := len(rep.Text) / 2
			for half < len(rep.Text) && rep.Text[half]&0xC0 == 0x80 {
				half++
			}
			for _, part := range []string{rep.Text[:half], rep.Text[half:]} {
				text, _ := json.Marshal(part)
				send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%s}}]}`, text))
			}
		}
		if rep.Hang {
			<-r.Context().Done()
			return
		}
		finish := "stop"
		if c := rep.ToolCall; c != nil {
			name, _ := json.Marshal(c.Name)
			args, _ := json.Marshal(c.Arguments)
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":%s,"arguments":%s}}]}}]}`, name, args))
			finish = "tool_calls"
		}
		send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{},"finish_reason":%q}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`, finish))
		send("[DONE]")
	}))
}
