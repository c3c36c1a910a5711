package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/anthropic"
)

func newModel(t *testing.T, url, thinking string) *anthropic.Model {
	t.Helper()
	m, err := anthropic.New(anthropic.Config{BaseURL: url, APIKeyEnv: "ANTHROPIC_API_KEY", Model: "claude-sonnet-4-5", Thinking: thinking,
		MaxRetries: -1, Getenv: func(k string) string {
			if k == "ANTHROPIC_API_KEY" {
				return "sk-ant-test"
			}
			return ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// answer is an assembled answer and its usage.
type answer struct {
	content.Message
	Usage *content.Usage
}

// collect streams req and returns the assembled answer.
func collect(t *testing.T, m llm.Model, req *llm.Request) answer {
	t.Helper()
	var a content.Assembler
	for c := range m.Stream(context.Background(), req) {
		a.Add(c)
	}
	if f := a.Finish(); f.Kind == content.FinishError || f.Kind == content.FinishAborted {
		t.Fatalf("finish %+v %+v", f, f.Failure)
	}
	return answer{content.Message{Role: content.RoleAssistant, Content: a.Blocks()}, a.Usage()}
}

// A tool-using turn with thinking on: the thinking block comes back with
// its signature, first in the assistant message; the tool result follows
// the tool use; breakpoints sit on the tools, the system prompt, the end
// of the conversation and the end of the previous request's; the second
// request reads what the first wrote; usage maps cache reads and writes.
func TestToolTurnWithThinkingAndCache(t *testing.T) {
	srv := llmtest.NewMessages(t, func(r llmtest.MessagesRequest) llmtest.MessagesReply {
		if len(r.ToolResults) == 0 {
			return llmtest.MessagesReply{Thinking: "I should list the files.", Text: "Looking.", ToolUses: []llmtest.MessagesToolUse{{Name: "bash", Input: `{"command":"ls"}`}}}
		}
		return llmtest.MessagesReply{Thinking: "Two files.", Text: "There are two files."}
	})
	m := newModel(t, srv.URL, anthropic.ThinkingEnabled)
	tools := []content.ToolSpec{{Name: "read_file", Parameters: []byte(`{"type":"object"}`)}, {Name: "bash", Parameters: []byte(`{"type":"object"}`)}}
	history := []content.Message{{Role: content.RoleUser, Content: []content.Block{content.Text("what is here?")}}}
	first := collect(t, m, &llm.Request{System: "You are terse.", Tools: tools, Messages: history})
	calls := content.ToolCalls(first.Content)
	if len(calls) != 1 || calls[0].Arguments != `{"command":"ls"}` || first.Content[0].Type != content.TypeReasoning || first.Content[0].Signature == "" {
		t.Fatalf("first answer %+v", first.Content)
	}
	if u := first.Usage; u == nil || u.CacheWrite != 7 || u.Input <= 7 || u.Output == 0 {
		t.Fatalf("usage %+v", first.Usage)
	}
	history = append(history, first.Message, content.Message{Role: content.RoleUser, Content: []content.Block{content.ToolResult(calls[0].ID, []content.Block{content.Text("a.go b.go")}, false)}})
	second := collect(t, m, &llm.Request{System: "You are terse.", Tools: tools, Messages: history})
	if content.JoinText(second.Content) != "There are two files." {
		t.Fatalf("second answer %+v", second.Content)
	}
	seen := srv.Seen()
	if want := []string{"tools[1]", "system[0]", "messages[0][0]"}; !slices.Equal(seen[0].Breakpoints, want) {
		t.Errorf("first request's breakpoints %v, want %v", seen[0].Breakpoints, want)
	}
	if want := []string{"tools[1]", "system[0]", "messages[0][0]", "messages[2][0]"}; !slices.Equal(seen[1].Breakpoints, want) {
		t.Errorf("second request's breakpoints %v, want %v", seen[1].Breakpoints, want)
	}
	if seen[1].CacheRead == 0 || second.Usage.CacheRead == 0 {
		t.Errorf("the second request read nothing from the cache: %d, usage %+v", seen[1].CacheRead, second.Usage)
	}
}

// Reasoning another route made (no signature) is not sent; a turn whose
// messages do not alternate is merged so that they do.
func TestForeignReasoningAndMergedRoles(t *testing.T) {
	srv := llmtest.NewMessages(t, func(r llmtest.MessagesRequest) llmtest.MessagesReply { return llmtest.MessagesReply{Text: "ok"} })
	m := newModel(t, srv.URL, "")
	history := []content.Message{
		{Role: content.RoleUser, Content: []content.Block{content.Text("one")}},
		{Role: content.RoleSystem, Content: []content.Block{content.Text("a notice")}},
		{Role: content.RoleAssistant, Content: []content.Block{content.Reasoning("deepseek thought"), content.Text("answer")}},
		{Role: content.RoleAssistant, Content: []content.Block{content.Text("")}},
		{Role: content.RoleUser, Content: []content.Block{content.Text("two")}},
	}
	if got := content.JoinText(collect(t, m, &llm.Request{Messages: history}).Content); got != "ok" {
		t.Fatalf("answer %q", got)
	}
	if body := string(srv.Seen()[0].Body); strings.Contains(body, "deepseek thought") || !strings.Contains(body, "a notice") {
		t.Fatalf("body %s", body)
	}
}

// Error responses map to the codes and hints of every route.
func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		code   string
		hint   string
	}{
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, llm.CodeAuth, "ANTHROPIC_API_KEY"},
		{404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`, llm.CodeUnknownModel, "dsh doctor"},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`, llm.CodeContextExceeded, "context window"},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`, llm.CodeQuota, "top up"},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, llm.CodeRateLimit, "slow down"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.CodeOverloaded, "Overloaded"},
	} {
		srv := llmtest.NewMessages(t, func(llmtest.MessagesRequest) llmtest.MessagesReply {
			return llmtest.MessagesReply{Status: tc.status, Body: tc.body}
		})
		var a content.Assembler
		for c := range newModel(t, srv.URL, "").Stream(context.Background(), &llm.Request{Messages: []content.Message{{Role: content.RoleUser, Content: []content.Block{content.Text("hi")}}}}) {
			a.Add(c)
		}
		f := a.Finish().Failure
		if f == nil || f.Code != tc.code || !strings.Contains(f.Message, tc.hint) {
			t.Errorf("HTTP %d: failure %+v, want %s with %q", tc.status, f, tc.code, tc.hint)
		}
	}
}

// ListModels reads GET v1/models with the key and version headers.
func TestListModels(t *testing.T) {
	srv := llmtest.NewMessages(t, nil)
	ids, err := newModel(t, srv.URL, "").ListModels(context.Background())
	if err != nil || !slices.Contains(ids, "claude-sonnet-4-5") {
		t.Fatalf("ids %v, err %v", ids, err)
	}
}

// A cancelled call ends at once with an aborted finish, mid-stream; a
// stream that stalls past the idle timeout ends with TIMEOUT.
func TestCancelAndIdle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n")
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hel\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	req := &llm.Request{Messages: []content.Message{{Role: content.RoleUser, Content: []content.Block{content.Text("hi")}}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last content.Chunk
	start := time.Now()
	for c := range newModel(t, srv.URL, "").Stream(ctx, req) {
		if c.Type == content.ChunkTextDelta {
			cancel()
		}
		last = c
	}
	if last.Finish == nil || last.Finish.Kind != content.FinishAborted || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled: last %+v after %v", last, time.Since(start))
	}
	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, Model: "claude-sonnet-4-5", IdleTimeout: 200 * time.Millisecond, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	var a content.Assembler
	for c := range m.Stream(context.Background(), req) {
		a.Add(c)
	}
	if f := a.Finish(); f.Failure == nil || f.Failure.Code != llm.CodeTimeout {
		t.Fatalf("idle: finish %+v %+v", f, f.Failure)
	}
}

// An overload before any output is retried; the retry's answer streams.
func TestOverloadRetried(t *testing.T) {
	var n atomic.Int32
	srv := llmtest.NewMessages(t, func(llmtest.MessagesRequest) llmtest.MessagesReply {
		if n.Add(1) == 1 {
			return llmtest.MessagesReply{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}
		}
		return llmtest.MessagesReply{Text: "fine"}
	})
	m, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKeyEnv: "K", Model: "claude-sonnet-4-5", InitialBackoff: time.Millisecond,
		Getenv: func(string) string { return "k" }})
	if err != nil {
		t.Fatal(err)
	}
	var retries int
	req := &llm.Request{Messages: []content.Message{{Role: content.RoleUser, Content: []content.Block{content.Text("hi")}}},
		OnRetry: func(llm.Retry) { retries++ }}
	if got := content.JoinText(collect(t, m, req).Content); got != "fine" || retries != 1 {
		t.Fatalf("answer %q after %d retries", got, retries)
	}
}
