package llmtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/prompt"
)

// MessagesModels are the model names the strict Messages API accepts.
var MessagesModels = []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"}

// MessagesRequest is what a reply function of the strict Messages API sees.
type MessagesRequest struct {
	Model       string
	Thinking    bool     // extended thinking is on
	LastUser    string   // the text of the last user message; for a child's first, its task
	Child       bool     // the first user message opens with a child's instructions
	ToolResults []string // the tool results of the last user message
	// Breakpoints name the blocks carrying cache_control, in order:
	// "tools[N]", "system[N]", "messages[I][J]".
	Breakpoints []string
	// CacheRead is the size, in bytes, of the longest prefix ending at a
	// breakpoint that an earlier request wrote to the cache.
	CacheRead int
	// Prefixes are the hashes of the prefixes ending at each breakpoint,
	// in the order of Breakpoints.
	Prefixes []string
	Messages int
	Body     []byte
}

// MessagesReply is one answer of the strict Messages API.
type MessagesReply struct {
	Thinking string // streamed as a signed thinking block when thinking is on
	Text     string
	ToolUses []MessagesToolUse
	Status   int // an HTTP error instead of a stream
	Body     string
}

// MessagesToolUse is a tool call of a MessagesReply.
type MessagesToolUse struct {
	Name  string
	Input string // a JSON object
}

// Messages is a loopback Anthropic Messages API that enforces the rules
// the real one does, answering a request that breaks one with the
// status and error body the API sends: x-api-key and anthropic-version
// headers, a known model, max_tokens, roles that alternate from the user,
// non-empty text, every tool_use answered by a tool_result first in the
// next user message, thinking blocks sent back unchanged with the
// signature the server gave them (the last assistant turn's first when
// it used a tool, with thinking on), budget_tokens below max_tokens, no
// temperature with thinking, and at most four cache_control breakpoints,
// none on a thinking block. It keeps the prefixes each request marked, so
// that a later request sees what it would read from the cache.
type Messages struct {
	*httptest.Server
	mu       sync.Mutex
	seen     []MessagesRequest
	prefixes map[string]int // hash → length of the cached prefix
	calls    int
}

// NewMessages starts the strict Messages API; it is closed when the test
// ends.
func NewMessages(t testing.TB, reply func(MessagesRequest) MessagesReply) *Messages {
	m := &Messages{prefixes: map[string]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == "" {
			messagesError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
			return
		}
		if r.Header.Get("Anthropic-Version") != "2023-06-01" {
			messagesError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
			return
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
			var data []map[string]string
			for _, id := range MessagesModels {
				data = append(data, map[string]string{"type": "model", "id": id})
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"data": data, "has_more": false})
			return
		case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
			messagesError(w, http.StatusNotFound, "not_found_error", "Not Found")
			return
		}
		raw, err := readBody(r)
		if err != nil {
			messagesError(w, http.StatusRequestEntityTooLarge, "request_too_large", err.Error())
			return
		}
		m.mu.Lock()
		req, status, msg := m.check(raw)
		if status == 0 {
			m.seen = append(m.seen, req)
			m.calls++
		}
		n := m.calls
		m.mu.Unlock()
		if status != 0 {
			typ := "invalid_request_error"
			if status == http.StatusNotFound {
				typ = "not_found_error"
			}
			messagesError(w, status, typ, msg)
			return
		}
		rep := reply(req)
		if rep.Status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.Status)
			w.Write([]byte(rep.Body))
			return
		}
		streamMessage(w, req, rep, n)
	}))
	t.Cleanup(m.Close)
	return m
}

// Seen returns the requests accepted so far.
func (m *Messages) Seen() []MessagesRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen)
}

func messagesError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// signature is the signature the server gives a thinking text.
func signature(thinking string) string {
	h := sha256.Sum256([]byte("llmtest:" + thinking))
	return hex.EncodeToString(h[:16])
}

type messagesBody struct {
	Model       string   `json:"model"`
	MaxTokens   int      `json:"max_tokens"`
	Stream      bool     `json:"stream"`
	Temperature *float64 `json:"temperature"`
	Thinking    *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	System   []map[string]any `json:"system"`
	Tools    []map[string]any `json:"tools"`
	Messages []struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	} `json:"messages"`
}

// check applies the API's rules to a body (m.mu held).
func (m *Messages) check(raw []byte) (MessagesRequest, int, string) {
	var body messagesBody
	if err := json.Unmarshal(raw, &body); err != nil {
		return MessagesRequest{}, http.StatusBadRequest, "invalid JSON: " + err.Error()
	}
	req := MessagesRequest{Model: body.Model, Messages: len(body.Messages), Body: raw}
	bad := func(format string, args ...any) (MessagesRequest, int, string) {
		return req, http.StatusBadRequest, fmt.Sprintf(format, args...)
	}
	switch {
	case !slices.Contains(MessagesModels, body.Model):
		return req, http.StatusNotFound, "model: " + body.Model
	case body.MaxTokens < 1:
		return bad("max_tokens: Field required")
	case !body.Stream:
		return bad("this loopback server only streams")
	case len(body.Messages) == 0:
		return bad("messages: at least one message is required")
	}
	if t := body.Thinking; t != nil && t.Type == "enabled" {
		req.Thinking = true
		switch {
		case t.BudgetTokens < 1024:
			return bad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		case t.BudgetTokens >= body.MaxTokens:
			return bad("`max_tokens` must be greater than `thinking.budget_tokens`")
		case body.Temperature != nil && *body.Temperature != 1:
			return bad("`temperature` may only be set to 1 when thinking is enabled")
		}
	}
	var open []string // tool_use ids the next user message must answer
	for i, msg := range body.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if msg.Role != want {
			return bad("messages: roles must alternate between \"user\" and \"assistant\", starting with \"user\" (messages.%d is %q)", i, msg.Role)
		}
		if len(msg.Content) == 0 {
			return bad("messages.%d: content must not be empty", i)
		}
		if msg.Role == "user" {
			answered := 0
			for j, b := range msg.Content {
				typ, _ := b["type"].(string)
				switch typ {
				case "tool_result":
					id, _ := b["tool_use_id"].(string)
					if j != answered || !slices.Contains(open, id) {
						return bad("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message, and come first.", i, j, id)
					}
					answered++
					req.ToolResults = append(req.ToolResults, fmt.Sprint(b["content"]))
				case "text":
					if strings.TrimSpace(fmt.Sprint(b["text"])) == "" {
						return bad("messages.%d.content.%d: text content blocks must be non-empty", i, j)
					}
				default:
					return bad("messages.%d.content.%d: block type %q is not allowed in a user message", i, j, typ)
				}
			}
			if answered != len(open) {
				return bad("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %v", i, open)
			}
			open = nil
			if i < len(body.Messages)-1 {
				req.ToolResults = nil
			}
			req.LastUser = userText(msg.Content)
			if i == 0 {
				_, task, child := prompt.SplitChildTask(req.LastUser)
				req.Child = child
				req.LastUser = task
			}
			continue
		}
		usedTool, firstThinking := false, false
		for j, b := range msg.Content {
			typ, _ := b["type"].(string)
			switch typ {
			case "thinking":
				text, _ := b["thinking"].(string)
				if sig, _ := b["signature"].(string); sig != signature(text) {
					return bad("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
				}
				if b["cache_control"] != nil {
					return bad("messages.%d.content.%d.thinking.cache_control: Thinking blocks cannot be cached directly", i, j)
				}
				firstThinking = firstThinking || j == 0
			case "redacted_thinking":
				firstThinking = firstThinking || j == 0
			case "text":
				if strings.TrimSpace(fmt.Sprint(b["text"])) == "" {
					return bad("messages.%d.content.%d: text content blocks must be non-empty", i, j)
				}
			case "tool_use":
				id, _ := b["id"].(string)
				if _, ok := b["input"].(map[string]any); !ok || id == "" {
					return bad("messages.%d.content.%d: tool_use needs an id and an object input", i, j)
				}
				usedTool = true
				open = append(open, id)
			default:
				return bad("messages.%d.content.%d: block type %q is not allowed in an assistant message", i, j, typ)
			}
		}
		if req.Thinking && usedTool && i == len(body.Messages)-2 && !firstThinking {
			return bad("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.", i, msg.Content[0]["type"])
		}
	}
	if body.Messages[len(body.Messages)-1].Role != "user" {
		return bad("the last message must be the user's")
	}
	return m.cache(req, &body)
}

// cache finds the breakpoints, what they read from the cache and what
// they write to it (m.mu held).
func (m *Messages) cache(req MessagesRequest, body *messagesBody) (MessagesRequest, int, string) {
	type mark struct {
		name   string
		prefix []byte
	}
	var marks []mark
	strip := func(b map[string]any) map[string]any {
		c := map[string]any{}
		for k, v := range b {
			if k != "cache_control" {
				c[k] = v
			}
		}
		return c
	}
	var tools, system []map[string]any
	for _, t := range body.Tools {
		tools = append(tools, strip(t))
	}
	for _, s := range body.System {
		system = append(system, strip(s))
	}
	type msg struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	}
	var msgs []msg
	prefix := func(tn, sn int, extra []msg) []byte {
		b, _ := json.Marshal(map[string]any{"model": body.Model, "tools": tools[:tn], "system": system[:sn], "messages": extra})
		return b
	}
	for i, t := range body.Tools {
		if t["cache_control"] != nil {
			marks = append(marks, mark{fmt.Sprintf("tools[%d]", i), prefix(i+1, 0, nil)})
		}
	}
	for i, s := range body.System {
		if s["cache_control"] != nil {
			marks = append(marks, mark{fmt.Sprintf("system[%d]", i), prefix(len(tools), i+1, nil)})
		}
	}
	for i, mm := range body.Messages {
		var blocks []map[string]any
		for j, b := range mm.Content {
			blocks = append(blocks, strip(b))
			if b["cache_control"] != nil {
				marks = append(marks, mark{fmt.Sprintf("messages[%d][%d]", i, j),
					prefix(len(tools), len(system), append(slices.Clone(msgs), msg{mm.Role, slices.Clone(blocks)}))})
			}
		}
		msgs = append(msgs, msg{mm.Role, blocks})
	}
	if len(marks) > 4 {
		return req, http.StatusBadRequest, fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", len(marks))
	}
	for _, mk := range marks {
		h := sha256.Sum256(mk.prefix)
		key := hex.EncodeToString(h[:8])
		req.Breakpoints = append(req.Breakpoints, mk.name)
		req.Prefixes = append(req.Prefixes, key)
		if n, ok := m.prefixes[key]; ok && n > req.CacheRead {
			req.CacheRead = n
		}
	}
	for i, mk := range marks {
		m.prefixes[req.Prefixes[i]] = len(mk.prefix)
	}
	return req, 0, ""
}

func userText(blocks []map[string]any) string {
	var texts []string
	for _, b := range blocks {
		if b["type"] == "text" {
			texts = append(texts, fmt.Sprint(b["text"]))
		}
	}
	return strings.Join(texts, "\n")
}

// streamMessage writes rep as a Messages event stream; n numbers the ids.
func streamMessage(w http.ResponseWriter, req MessagesRequest, rep MessagesReply, n int) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		w.(http.Flusher).Flush()
	}
	input := len(req.Body)/4 - req.CacheRead/4
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message",
		"role": "assistant", "model": req.Model, "content": []any{},
		"usage": map[string]any{"input_tokens": max(input, 1), "cache_read_input_tokens": req.CacheRead / 4, "cache_creation_input_tokens": 7, "output_tokens": 1}}})
	send("ping", map[string]any{"type": "ping"})
	i := 0
	block := func(start map[string]any, deltas ...map[string]any) {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	if req.Thinking && rep.Thinking != "" {
		half := len(rep.Thinking) / 2
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""},
			map[string]any{"type": "thinking_delta", "thinking": rep.Thinking[:half]},
			map[string]any{"type": "thinking_delta", "thinking": rep.Thinking[half:]},
			map[string]any{"type": "signature_delta", "signature": signature(rep.Thinking)})
	}
	if rep.Text != "" {
		block(map[string]any{"type": "text", "text": ""}, map[string]any{"type": "text_delta", "text": rep.Text})
	}
	for k, u := range rep.ToolUses {
		half := len(u.Input) / 2
		block(map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", n, k), "name": u.Name, "input": map[string]any{}},
			map[string]any{"type": "input_json_delta", "partial_json": u.Input[:half]},
			map[string]any{"type": "input_json_delta", "partial_json": u.Input[half:]})
	}
	stop := "end_turn"
	if len(rep.ToolUses) > 0 {
		stop = "tool_use"
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5 + len(rep.Text)/4}})
	send("message_stop", map[string]any{"type": "message_stop"})
}
