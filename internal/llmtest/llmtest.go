// Package llmtest runs loopback model servers for tests and load runs: a
// chat-completions server that speaks DeepSeek's streaming API as it is
// documented today and enforces its rules (the current model names, the
// thinking switch and reasoning effort values, reasoning_content passed
// back on every tool-call turn in thinking mode, tool messages answering a
// preceding tool call, a bounded max_tokens), answering a request that
// breaks one with the status and error body the real API sends, so that a
// regression fails a test instead of a user's first run; an Anthropic
// Messages API (Claude Code's) and an OpenAI Responses API (Codex's). Each
// streams server-sent events decided by a function of the request. Of dsh
// it imports only package prompt (to tell a child's first message by its
// frame), so that the tests of any package, subagent/inproc's included,
// can use it.
package llmtest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/prompt"
)

// Models are the model names the server accepts: DeepSeek's current model
// and the legacy names it still routes.
var Models = []string{"deepseek-flash", "deepseek-v4-flash", "deepseek-v4-pro"}

// MaxOutputTokens is the largest max_tokens the server accepts (384K).
const MaxOutputTokens = 384 << 10

// Request is what a reply function sees of a chat-completions request.
type Request struct {
	Model       string
	Thinking    bool     // thinking mode is on (DeepSeek's default)
	Effort      string   // reasoning_effort as sent, "" when absent
	MaxTokens   int      // max_tokens as sent, 0 when absent
	LastUser    string   // the text of the last user message; for a child's first, its task (without its instructions)
	Child       bool     // the request is an in-process child's: its first user message opens with its instructions
	ToolResults []string // the contents of the tool messages, in order
	Messages    int      // how many messages the request holds
	Body        []byte   // the raw request body
	Header      http.Header
}

// Reply is one answer.
type Reply struct {
	Reasoning string        // streamed as reasoning_content in thinking mode (ignored otherwise)
	Text      string        // streamed in two deltas
	ToolCall  *ToolCall     // a tool call after the text
	ToolCalls []ToolCall    // more tool calls after ToolCall, in one answer
	Delay     time.Duration // wait this long before answering (the client's cancel ends the wait)
	Hang      bool          // stream Text, then block until the client goes away
	// PromptTokens is the prompt_tokens the answer's usage reports
	// (default 3).
	PromptTokens int
	Status       int    // an HTTP error status instead of a stream
	Body         string // the error body
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

// wireBody is the part of a request body the server reads.
type wireBody struct {
	Model    string `json:"model"`
	Messages []struct {
		Role             string         `json:"role"`
		Content          string         `json:"content"`
		ReasoningContent *string        `json:"reasoning_content"`
		ToolCalls        []wireToolCall `json:"tool_calls"`
		ToolCallID       string         `json:"tool_call_id"`
	} `json:"messages"`
	Stream    bool `json:"stream"`
	MaxTokens *int `json:"max_tokens"`
	Thinking  *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	ReasoningEffort *string `json:"reasoning_effort"`
}

type wireToolCall struct {
	ID string `json:"id"`
}

// Start starts a server answering with reply; the caller closes it.
func Start(reply func(Request) Reply) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			refuse(w, http.StatusUnauthorized, "Authentication Fails, Your api key is invalid", "authentication_error")
			return
		}
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
			listModels(w)
			return
		}
		raw, err := readBody(r)
		if err != nil {
			refuse(w, http.StatusBadRequest, err.Error(), "invalid_request_error")
			return
		}
		var body wireBody
		if err := json.Unmarshal(raw, &body); err != nil {
			refuse(w, http.StatusBadRequest, "Failed to deserialize the JSON body into the target type: "+err.Error(), "invalid_request_error")
			return
		}
		req, status, msg := check(&body)
		if status != 0 {
			refuse(w, status, msg, "invalid_request_error")
			return
		}
		req.Body, req.Header = raw, r.Header
		rep := reply(req)
		if rep.Status != 0 {
			http.Error(w, rep.Body, rep.Status)
			return
		}
		stream(w, r, req, rep)
	}))
}

// readBody reads a request body of at most 64 MiB.
func readBody(r *http.Request) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<20+1))
	if err == nil && len(raw) > 64<<20 {
		err = errors.New("request body over 64 MiB")
	}
	return raw, err
}

// check applies DeepSeek's rules to a request body. It returns the request
// as a reply function sees it, or the status and message of the refusal.
func check(body *wireBody) (Request, int, string) {
	req := Request{Model: body.Model, Thinking: true, Messages: len(body.Messages)}
	if !slices.Contains(Models, body.Model) {
		return req, http.StatusBadRequest, fmt.Sprintf("The supported API model names are %s, but you passed %s.",
			strings.Join(Models, " or "), body.Model)
	}
	if !body.Stream {
		return req, http.StatusBadRequest, "this loopback server only streams: set stream to true"
	}
	if body.Thinking != nil {
		switch body.Thinking.Type {
		case "enabled":
		case "disabled":
			req.Thinking = false
		default:
			return req, http.StatusBadRequest, fmt.Sprintf("thinking.type: unknown variant `%s`, expected `enabled` or `disabled`", body.Thinking.Type)
		}
	}
	if body.ReasoningEffort != nil {
		switch e := *body.ReasoningEffort; e {
		case "minimal", "low", "medium", "high", "xhigh", "max", "ultra":
			req.Effort = e
		default:
			return req, http.StatusUnprocessableEntity, fmt.Sprintf("reasoning_effort: unknown variant `%s`", e)
		}
	}
	if body.MaxTokens != nil {
		if *body.MaxTokens < 1 || *body.MaxTokens > MaxOutputTokens {
			return req, http.StatusUnprocessableEntity, fmt.Sprintf("Invalid max_tokens value, the valid range of max_tokens is [1, %d]", MaxOutputTokens)
		}
		req.MaxTokens = *body.MaxTokens
	}
	if len(body.Messages) == 0 {
		return req, http.StatusBadRequest, "messages: empty list"
	}
	open := map[string]bool{} // tool calls awaiting their result
	for i, m := range body.Messages {
		if m.Role != "tool" && len(open) > 0 {
			return req, http.StatusBadRequest, fmt.Sprintf("messages[%d]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'", i)
		}
		switch m.Role {
		case "system":
		case "user":
			_, task, child := prompt.SplitChildTask(m.Content)
			req.LastUser, req.Child = task, req.Child || child
		case "assistant":
			if len(m.ToolCalls) > 0 && req.Thinking && m.ReasoningContent == nil {
				return req, http.StatusBadRequest, "The reasoning_content in the thinking mode must be passed back to the API."
			}
			for _, c := range m.ToolCalls {
				if c.ID == "" || open[c.ID] {
					return req, http.StatusBadRequest, fmt.Sprintf("messages[%d]: tool call ids must be unique and non-empty", i)
				}
				open[c.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				return req, http.StatusBadRequest, fmt.Sprintf("messages[%d]: Messages with role 'tool' must be a response to a preceding message with 'tool_calls'", i)
			}
			delete(open, m.ToolCallID)
			req.ToolResults = append(req.ToolResults, m.Content)
		default:
			return req, http.StatusBadRequest, fmt.Sprintf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	return req, 0, ""
}

// listModels answers GET /models as DeepSeek does.
func listModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, id := range Models {
		list.Data = append(list.Data, model{id, "model", "deepseek"})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

// refuse writes an error in DeepSeek's JSON error shape.
func refuse(w http.ResponseWriter, status int, msg, typ string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": typ}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// stream writes rep as a chat-completions event stream.
func stream(w http.ResponseWriter, r *http.Request, req Request, rep Reply) {
	if rep.Delay > 0 {
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(chunk string) {
		fmt.Fprintf(w, "data: %s\n\n", chunk)
		w.(http.Flusher).Flush()
	}
	delta := func(field, s string) {
		text, _ := json.Marshal(s)
		send(fmt.Sprintf(`{"id":"llmtest","object":"chat.completion.chunk","model":%q,"choices":[{"index":0,"delta":{%q:%s},"finish_reason":null}]}`, req.Model, field, text))
	}
	send(fmt.Sprintf(`{"id":"llmtest","object":"chat.completion.chunk","model":%q,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`, req.Model))
	if req.Thinking && rep.Reasoning != "" {
		delta("reasoning_content", rep.Reasoning)
	}
	if rep.Text != "" {
		half := len(rep.Text) / 2
		for half < len(rep.Text) && rep.Text[half]&0xC0 == 0x80 {
			half++
		}
		for _, part := range []string{rep.Text[:half], rep.Text[half:]} {
			if part != "" {
				delta("content", part)
			}
		}
	}
	if rep.Hang {
		<-r.Context().Done()
		return
	}
	finish := "stop"
	calls := rep.ToolCalls
	if rep.ToolCall != nil {
		calls = append([]ToolCall{*rep.ToolCall}, calls...)
	}
	for i, c := range calls {
		name, _ := json.Marshal(c.Name)
		args, _ := json.Marshal(c.Arguments)
		id := fmt.Sprintf("call_%d", req.Messages)
		if i > 0 {
			id += fmt.Sprintf("_%d", i)
		}
		send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%s,"arguments":%s}}]}}]}`,
			i, id, name, args))
		finish = "tool_calls"
	}
	prompt := cmp.Or(rep.PromptTokens, 3)
	send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{},"finish_reason":%q}],"usage":{"prompt_tokens":%d,"completion_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":%d}}`,
		finish, prompt, prompt))
	send("[DONE]")
}
