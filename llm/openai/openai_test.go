package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	ssereader "github.com/dsh-go/dsh/llm/internal/sse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-test-0123456789"

// frame is one chat-completions SSE frame as DeepSeek sends it.
func frame(delta, finish string) string { return frameUsage(delta, finish, "") }

// frameUsage is a frame carrying usage, as DeepSeek sends its last one.
func frameUsage(delta, finish, usage string) string {
	f := "null"
	if finish != "" {
		f = strconv.Quote(finish)
	}
	if usage != "" {
		usage = `,"usage":` + usage
	}
	return `data: {"id":"9a1c7e2b-5d3f","object":"chat.completion.chunk","created":1736000000,"model":"deepseek-flash",` +
		`"system_fingerprint":"fp_3a5770e1b4_prod0225","choices":[{"index":0,"delta":` + delta +
		`,"logprobs":null,"finish_reason":` + f + `}]` + usage + "}\n\n"
}

// usageFrame is the trailing usage-only frame OpenAI sends with include_usage.
func usageFrame(usage string) string {
	return `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1736000001,` +
		`"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":` + usage + "}\n\n"
}

const done = "data: [DONE]\n\n"

// sse serves frames one write and flush each.
func sse(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, f := range frames {
			io.WriteString(w, f)
			rc.Flush()
		}
	}
}

// hang blocks until the client goes away. The request body is drained first:
// only then does the server watch the connection and cancel r.Context().
func hang(r *http.Request) {
	io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// captured is what a server saw of one request.
type captured struct {
	body   []byte
	header http.Header
	path   string
}

// capturing wraps next, sending each request it sees on the returned channel.
func capturing(next http.HandlerFunc) (http.HandlerFunc, <-chan captured) {
	ch := make(chan captured, 8)
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- captured{b, r.Header, r.URL.Path}
		next(w, r)
	}, ch
}

func testGetenv(k string) string {
	if k == "TEST_API_KEY" {
		return testKey
	}
	return ""
}

// newModel starts a loopback server running h and a model aimed at it.
func newModel(t testing.TB, h http.HandlerFunc, mod func(*Config)) *Model {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return modelOn(t, srv.URL, srv.Client(), mod)
}

// modelOn is a model aimed at the server at base, reached with client.
func modelOn(t testing.TB, base string, client *http.Client, mod func(*Config)) *Model {
	t.Helper()
	cfg := Config{Provider: "test", BaseURL: base + "/v1", APIKeyEnv: "TEST_API_KEY", Model: "test-model",
		HTTPClient: client, Getenv: testGetenv, InitialBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// collect drains seq and checks the stream ends with exactly one finish.
func collect(t testing.TB, seq iter.Seq[content.Chunk]) []content.Chunk {
	t.Helper()
	var out []content.Chunk
	for c := range seq {
		out = append(out, c)
	}
	checkFinish(t, out)
	return out
}

func checkFinish(t testing.TB, cs []content.Chunk) {
	t.Helper()
	for i, c := range cs {
		if (c.Type == content.ChunkFinish) != (i == len(cs)-1) {
			t.Fatalf("chunk %d of %d is %s: want exactly one finish, last", i, len(cs), c.Type)
		}
	}
	if len(cs) == 0 || cs[len(cs)-1].Finish == nil {
		t.Fatalf("stream has no finish chunk: %+v", cs)
	}
}

func finish(cs []content.Chunk) *content.Finish { return cs[len(cs)-1].Finish }

// wantFailure checks the stream failed with code.
func wantFailure(t *testing.T, cs []content.Chunk, kind content.FinishKind, code string) *content.Failure {
	t.Helper()
	f := finish(cs)
	if f.Kind != kind || f.Failure == nil || f.Failure.Code != code {
		t.Fatalf("finish = %+v (failure %+v), want %s %s", f, f.Failure, kind, code)
	}
	return f.Failure
}

func assemble(cs []content.Chunk) *content.Assembler {
	var a content.Assembler
	for _, c := range cs {
		a.Add(c)
	}
	return &a
}

func request(msgs ...content.Message) *llm.Request {
	if len(msgs) == 0 {
		msgs = []content.Message{content.UserText("hi")}
	}
	return &llm.Request{Provider: "test", Messages: msgs}
}

func TestText(t *testing.T) {
	m := newModel(t, sse(
		frame(`{"role":"assistant","content":""}`, ""),
		frame(`{"content":"Hel"}`, ""),
		frame(`{"content":"lo"}`, ""),
		frameUsage(`{"content":""}`, "stop", `{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14,`+
			`"prompt_tokens_details":{"cached_tokens":0},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":12}`),
		done), nil)
	got := collect(t, m.Stream(t.Context(), request()))
	text := content.Text("Hello")
	want := []content.Chunk{
		{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeText},
		{Type: content.ChunkTextDelta, Index: 0, Text: "Hel"},
		{Type: content.ChunkTextDelta, Index: 0, Text: "lo"},
		{Type: content.ChunkBlockEnd, Index: 0, Block: &text},
		{Type: content.ChunkUsage, Usage: &content.Usage{Input: 12, Output: 2}},
		{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishStop}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("chunks (-want +got):\n%s", d)
	}
}

func TestReasoningRoundTrip(t *testing.T) {
	h, seen := capturing(sse(
		frame(`{"role":"assistant","content":null,"reasoning_content":""}`, ""),
		frame(`{"content":null,"reasoning_content":"Think"}`, ""),
		frame(`{"content":null,"reasoning_content":"ing."}`, ""),
		frame(`{"content":"Answer","reasoning_content":null}`, ""),
		frame(`{"content":"","reasoning_content":null}`, "stop"),
		done))
	m := newModel(t, h, nil)
	got := collect(t, m.Stream(t.Context(), request()))
	if got[0].Type != content.ChunkBlockStart || got[0].BlockType != content.TypeReasoning {
		t.Fatalf("first chunk = %+v, want reasoning block-start", got[0])
	}
	a := assemble(got)
	want := []content.Block{content.Reasoning("Thinking."), content.Text("Answer")}
	if d := cmp.Diff(want, a.Blocks()); d != "" {
		t.Fatalf("blocks (-want +got):\n%s", d)
	}

	next := request(content.UserText("hi"), content.AssistantMessage("test", "test-model", a.Blocks()), content.UserText("more"))
	collect(t, m.Stream(t.Context(), next))
	<-seen
	var sent struct{ Messages []map[string]any }
	if err := json.Unmarshal((<-seen).body, &sent); err != nil {
		t.Fatal(err)
	}
	wantMsg := map[string]any{"role": "assistant", "content": "Answer", "reasoning_content": "Thinking."}
	if d := cmp.Diff(wantMsg, sent.Messages[1]); d != "" {
		t.Errorf("assistant message (-want +got):\n%s", d)
	}
}

func TestToolCallFragments(t *testing.T) {
	m := newModel(t, sse(
		frame(`{"role":"assistant","content":"Let me look."}`, ""),
		frame(`{"tool_calls":[{"index":0,"id":"call_0_6a1f","type":"function","function":{"name":"read_file","arguments":""}}]}`, ""),
		frame(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]}`, ""),
		frame(`{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"a"}}]}`, ""),
		frame(`{"tool_calls":[{"index":0,"function":{"arguments":".go\"}"}}]}`, ""),
		frame(`{"content":null}`, "tool_calls"),
		done), nil)
	got := collect(t, m.Stream(t.Context(), request()))
	a := assemble(got)
	want := []content.Block{content.Text("Let me look."), content.ToolCall("call_0_6a1f", "read_file", `{"path": "a.go"}`)}
	if d := cmp.Diff(want, a.Blocks()); d != "" {
		t.Errorf("blocks (-want +got):\n%s", d)
	}
	if f := finish(got); f.Kind != content.FinishToolCalls {
		t.Errorf("finish = %+v, want tool-calls", f)
	}
	// Every arguments fragment is streamed live on block 1.
	var deltas []string
	for _, c := range got {
		if c.Type == content.ChunkToolCallDelta {
			if c.Index != 1 {
				t.Errorf("tool-call delta index = %d, want 1", c.Index)
			}
			deltas = append(deltas, c.ArgumentsDelta)
		}
	}
	if d := cmp.Diff([]string{"", `{"pa`, `th": "a`, `.go"}`}, deltas); d != "" {
		t.Errorf("argument deltas (-want +got):\n%s", d)
	}
}

func TestParallelToolCalls(t *testing.T) {
	m := newModel(t, sse(
		frame(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"ls","arguments":""}}]}`, ""),
		frame(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"dir\":"}}]}`, ""),
		frame(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"cat","arguments":"{\"file\""}}]}`, ""),
		frame(`{"tool_calls":[{"index":0,"function":{"arguments":"\".\"}"}}]}`, ""),
		frame(`{"tool_calls":[{"index":1,"function":{"arguments":":\"x\"}"}}]}`, ""),
		frame(`{}`, "tool_calls"),
		done), nil)
	got := collect(t, m.Stream(t.Context(), request()))
	want := []content.Block{content.ToolCall("call_a", "ls", `{"dir":"."}`), content.ToolCall("call_b", "cat", `{"file":"x"}`)}
	if d := cmp.Diff(want, assemble(got).Blocks()); d != "" {
		t.Errorf("blocks (-want +got):\n%s", d)
	}
	// Block ends are deferred until [DONE]: none precedes the last delta.
	lastDelta, firstEnd := -1, -1
	for i, c := range got {
		switch c.Type {
		case content.ChunkToolCallDelta:
			lastDelta = i
		case content.ChunkBlockEnd:
			if firstEnd < 0 {
				firstEnd = i
			}
		}
	}
	if firstEnd < lastDelta {
		t.Errorf("block-end at %d precedes a delta at %d", firstEnd, lastDelta)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name, usage string
		want        content.Usage
	}{
		{"openai cached_tokens",
			`{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":30,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":5,"audio_tokens":0}}`,
			content.Usage{Input: 70, Output: 20, CacheRead: 30, Reasoning: 5}},
		{"deepseek prompt_cache_hit_tokens",
			`{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}`,
			content.Usage{Input: 36, Output: 20, CacheRead: 64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newModel(t, sse(
				frame(`{"role":"assistant","content":"ok"}`, ""),
				frame(`{}`, "stop"),
				usageFrame(`{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`), // superseded
				usageFrame(tt.usage),
				done), nil)
			got := collect(t, m.Stream(t.Context(), request()))
			u := assemble(got).Usage()
			if u == nil || *u != tt.want {
				t.Errorf("usage = %+v, want %+v", u, tt.want)
			}
			if c := got[len(got)-2]; c.Type != content.ChunkUsage {
				t.Errorf("chunk before finish = %s, want usage", c.Type)
			}
		})
	}
}

func TestFinishReasons(t *testing.T) {
	tests := []struct {
		name   string
		frames []string
		kind   content.FinishKind
		code   string
	}{
		{"length", []string{frame(`{"content":"trunc"}`, ""), frame(`{}`, "length")}, content.FinishMaxTokens, ""},
		{"content filter", []string{frame(`{"content":"x"}`, "content_filter")}, content.FinishError, "CONTENT_FILTER"},
		{"empty stop", []string{frame(`{"role":"assistant","content":""}`, ""), frame(`{"content":""}`, "stop")}, content.FinishError, llm.CodeEmptyResponse},
		{"absent reason", []string{frame(`{"content":"x"}`, "")}, content.FinishStop, ""},
		{"stream error", []string{`data: {"error":{"message":"overloaded","code":503}}` + "\n\n"}, content.FinishError, llm.CodeServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newModel(t, sse(append(tt.frames, done)...), nil)
			f := finish(collect(t, m.Stream(t.Context(), request())))
			if f.Kind != tt.kind || (tt.code != "") != (f.Failure != nil) || (f.Failure != nil && f.Failure.Code != tt.code) {
				t.Errorf("finish = %+v (failure %+v), want %s %s", f, f.Failure, tt.kind, tt.code)
			}
		})
	}
}

func TestMaxTokensDropsToolCalls(t *testing.T) {
	m := newModel(t, sse(
		frame(`{"content":"x","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"ls","arguments":"{\"d"}}]}`, "length"),
		done), nil)
	got := collect(t, m.Stream(t.Context(), request()))
	if f := finish(got); f.Kind != content.FinishMaxTokens {
		t.Fatalf("finish = %+v, want max-tokens", f)
	}
	if d := cmp.Diff([]content.Block{content.Text("x")}, assemble(got).Blocks()); d != "" {
		t.Errorf("blocks (-want +got):\n%s", d)
	}
}

func TestRetryRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		var logs bytes.Buffer
		ok := sse(frame(`{"content":"fine"}`, "stop"), done)
		m := newMemModel(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				w.Header().Set("Retry-After", "0")
				w.Header().Set("X-Request-Id", "req-1")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
				return
			}
			ok(w, r)
		}, func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
		var retries []llm.Retry
		req := request()
		req.OnRetry = func(r llm.Retry) { retries = append(retries, r) }
		start := time.Now()
		got := collect(t, m.Stream(t.Context(), req))
		if f := finish(got); f.Kind != content.FinishStop {
			t.Fatalf("finish = %+v (failure %+v), want stop", f, f.Failure)
		}
		if n.Load() != 2 || len(retries) != 1 {
			t.Fatalf("requests = %d, retries = %d; want 2 and 1", n.Load(), len(retries))
		}
		r := retries[0]
		if r.Attempt != 1 || r.Failure.Code != llm.CodeRateLimit || r.Failure.Status != 429 || r.Failure.RequestID != "req-1" || r.Delay > 50*time.Millisecond {
			t.Errorf("retry = %+v, failure %+v", r, r.Failure)
		}
		if waited := time.Since(start); waited != r.Delay {
			t.Errorf("took %v on the bubble's clock, want the announced delay %v", waited, r.Delay)
		}
		if l := logs.String(); !strings.Contains(l, "retrying") || strings.Contains(l, testKey) {
			t.Errorf("logs:\n%s", l)
		}
	})
}

func TestRetryAfterDate(t *testing.T) {
	resp := &http.Response{StatusCode: 503, Status: "503 Service Unavailable", Header: http.Header{}}
	resp.Header.Set("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
	m, err := New(Config{APIKeyEnv: "K", BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil {
		t.Fatal(err)
	}
	f := m.httpFailure(resp, strings.NewReader("busy"), "m")
	if f.Code != llm.CodeServer || f.RetryAfterMs <= 1000 || f.RetryAfterMs > 3000 {
		t.Errorf("failure = %+v", f)
	}
}

func TestRetryAfterBeyondMaxBackoff(t *testing.T) {
	var n atomic.Int32
	m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}, nil)
	req := request()
	req.OnRetry = func(llm.Retry) { t.Error("OnRetry called") }
	f := wantFailure(t, collect(t, m.Stream(t.Context(), req)), content.FinishError, llm.CodeRateLimit)
	if n.Load() != 1 || f.RetryAfterMs != 1000 {
		t.Errorf("requests = %d, RetryAfterMs = %d; want 1 and 1000", n.Load(), f.RetryAfterMs)
	}
}

func TestServerErrorStorm(t *testing.T) {
	var n atomic.Int32
	m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, `{"error":{"message":"Internal server error"}}`, http.StatusInternalServerError)
	}, func(c *Config) { c.MaxRetries = 3 })
	var attempts []int
	req := request()
	req.OnRetry = func(r llm.Retry) { attempts = append(attempts, r.Attempt) }
	f := wantFailure(t, collect(t, m.Stream(t.Context(), req)), content.FinishError, llm.CodeServer)
	if n.Load() != 4 || f.Status != 500 || !strings.Contains(f.Message, "Internal server error") {
		t.Errorf("requests = %d, failure = %+v", n.Load(), f)
	}
	if d := cmp.Diff([]int{1, 2, 3}, attempts); d != "" {
		t.Errorf("retry attempts (-want +got):\n%s", d)
	}
}

func TestRetriesDisabled(t *testing.T) {
	var n atomic.Int32
	m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}, func(c *Config) { c.MaxRetries = -1 })
	wantFailure(t, collect(t, m.Stream(t.Context(), request())), content.FinishError, llm.CodeServer)
	if n.Load() != 1 {
		t.Errorf("requests = %d, want 1", n.Load())
	}
}

func TestHTTPErrors(t *testing.T) {
	long := strings.Repeat("x", 2000)
	tests := []struct {
		status int
		body   string
		code   string
		want   []string // substrings of the message
	}{
		{401, `{"error":{"message":"Authentication Fails, Your api key: ****1234 is invalid","type":"authentication_error"}}`, llm.CodeAuth,
			[]string{"HTTP 401 Unauthorized: Authentication Fails, Your api key: ****1234 is invalid", "the key is read from TEST_API_KEY"}},
		{403, `forbidden`, llm.CodeAuth, []string{"HTTP 403 Forbidden: forbidden", "TEST_API_KEY"}},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota"}}`, llm.CodeQuota, []string{"You exceeded your current quota"}},
		{402, `{"error":{"message":"Insufficient Balance","type":"unknown_error"}}`, llm.CodeQuota,
			[]string{"insufficient balance (HTTP 402 Payment Required): Insufficient Balance: top up the account behind TEST_API_KEY"}},
		{400, `{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens.","type":"invalid_request_error"}}`, llm.CodeContextExceeded,
			[]string{"maximum context length is 65536 tokens"}},
		{400, `{"error":{"message":"The supported API model names are deepseek-v4-pro or deepseek-v4-flash, but you passed deepseek-flash.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			llm.CodeUnknownModel, []string{`does not serve model "test-model"`, "but you passed deepseek-flash", "dsh run -m MODEL", "agent.model", "dsh doctor"}},
		{404, `{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","code":"model_not_found"}}`,
			llm.CodeUnknownModel, []string{"does not exist", "dsh doctor"}},
		{400, `{"error":{"message":"Invalid tool schema"}}`, llm.CodeInvalidRequest, []string{"HTTP 400 Bad Request: Invalid tool schema"}},
		{422, `{"error":{"message":"reasoning_effort: unsupported value 'huge'","type":"invalid_request_error"}}`, llm.CodeInvalidParams,
			[]string{"HTTP 422 Unprocessable Entity: reasoning_effort: unsupported value 'huge'"}},
		{413, long, llm.CodeInvalidRequest, []string{long[:100]}},
		{418, `teapot`, "HTTP_418", []string{"teapot"}},
		{400, `{"message":"top-level message"}`, llm.CodeInvalidRequest, []string{": top-level message"}},
		{400, `{"error":"plain string"}`, llm.CodeInvalidRequest, []string{": plain string"}},
		{400, ``, llm.CodeInvalidRequest, []string{"(empty body)"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.status, tt.code), func(t *testing.T) {
			var n atomic.Int32
			m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.Header().Set("X-Request-Id", "rid-7")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}, nil)
			f := wantFailure(t, collect(t, m.Stream(t.Context(), request())), content.FinishError, tt.code)
			if n.Load() != 1 || f.Status != tt.status || f.RequestID != "rid-7" {
				t.Errorf("requests = %d, failure = %+v", n.Load(), f)
			}
			if len(f.Message) > 1000 {
				t.Errorf("message is %d bytes", len(f.Message))
			}
			for _, w := range tt.want {
				if !strings.Contains(f.Message, w) {
					t.Errorf("message %q lacks %q", f.Message, w)
				}
			}
			if strings.Contains(f.Message, testKey) {
				t.Error("message leaks the key")
			}
		})
	}
}

func TestIdleTimeoutMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemModel(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, frame(`{"content":"partial"}`, ""))
			http.NewResponseController(w).Flush()
			hang(r)
		}, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
		start := time.Now()
		got := collect(t, m.Stream(t.Context(), request()))
		wantFailure(t, got, content.FinishError, llm.CodeTimeout)
		if got[1].Text != "partial" {
			t.Errorf("chunks = %+v", got)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("timed out after %v on the bubble's clock, want the idle timeout", d)
		}
	})
}

func TestIdleTimeoutBeforeHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		m := newMemModel(t, func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			hang(r)
		}, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond; c.MaxRetries = 1 })
		start := time.Now()
		wantFailure(t, collect(t, m.Stream(t.Context(), request())), content.FinishError, llm.CodeTimeout)
		if n.Load() != 2 {
			t.Errorf("requests = %d, want 2 (a stall before any output is retried)", n.Load())
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("two stalls cut after %v on the bubble's clock, before their idle timeouts", d)
		}
	})
}

func TestConsumerThinkTimeIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemModel(t, sse(frame(`{"content":"a"}`, ""), frame(`{"content":"b"}`, "stop"), done),
			func(c *Config) { c.IdleTimeout = 50 * time.Millisecond })
		var cs []content.Chunk
		for c := range m.Stream(t.Context(), request()) {
			cs = append(cs, c)
			time.Sleep(80 * time.Millisecond) // the bubble's clock: an idle timer running now would fire
		}
		checkFinish(t, cs)
		if f := finish(cs); f.Kind != content.FinishStop {
			t.Errorf("finish = %+v (failure %+v), want stop", f, f.Failure)
		}
	})
}

func TestStreamClosed(t *testing.T) {
	m := newModel(t, sse(frame(`{"content":"cut"}`, "")), nil)
	wantFailure(t, collect(t, m.Stream(t.Context(), request())), content.FinishError, llm.CodeStreamClosed)
}

func TestMalformed(t *testing.T) {
	m := newModel(t, sse(frame(`{"content":"ok"}`, ""), `data: {"choices":[{"index":0,"delta":{"content":"x"`+"\n\n", done), nil)
	wantFailure(t, collect(t, m.Stream(t.Context(), request())), content.FinishError, llm.CodeMalformed)
}

func TestCredentials(t *testing.T) {
	tests := []struct{ key, code string }{
		{"", llm.CodeMissingKey},
		{"   ", llm.CodeMissingKey},
		{"sk bad", llm.CodeInvalidKey},
		{"sk-\x01", llm.CodeInvalidKey},
		{"sk-ключ", llm.CodeInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			var n atomic.Int32
			m := newModel(t, func(http.ResponseWriter, *http.Request) { n.Add(1) }, func(c *Config) {
				c.Getenv = func(string) string { return tt.key }
			})
			f := wantFailure(t, collect(t, m.Stream(t.Context(), request())), content.FinishError, tt.code)
			if !strings.Contains(f.Message, "TEST_API_KEY") || n.Load() != 0 {
				t.Errorf("failure = %+v, requests = %d", f, n.Load())
			}
			if tt.code == llm.CodeMissingKey && !strings.Contains(f.Message, "TEST_API_KEY is not set") {
				t.Errorf("message = %q", f.Message)
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	handlerDone := make(chan struct{})
	m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		io.WriteString(w, frame(`{"content":"first"}`, ""))
		http.NewResponseController(w).Flush()
		hang(r)
	}, nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	var cs []content.Chunk
	for c := range m.Stream(ctx, request()) {
		cs = append(cs, c)
		if c.Type == content.ChunkTextDelta {
			cancel(errors.New("user interrupt"))
		}
	}
	checkFinish(t, cs)
	f := wantFailure(t, cs, content.FinishAborted, llm.CodeAborted)
	if !strings.Contains(f.Message, "user interrupt") {
		t.Errorf("message = %q", f.Message)
	}
	select {
	case <-handlerDone:
	case <-time.After(2 * time.Second):
		t.Error("the HTTP request was not cancelled")
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemModel(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
			func(c *Config) { c.InitialBackoff, c.MaxBackoff = time.Minute, time.Minute })
		ctx, cancel := context.WithCancel(t.Context())
		req := request()
		req.OnRetry = func(llm.Retry) { cancel() }
		start := time.Now()
		wantFailure(t, collect(t, m.Stream(ctx, req)), content.FinishAborted, llm.CodeAborted)
		if d := time.Since(start); d != 0 {
			t.Errorf("abort took %v on the bubble's clock, want at once", d)
		}
	})
}

func TestConsumerStopsEarly(t *testing.T) {
	handlerDone := make(chan struct{})
	m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		io.WriteString(w, frame(`{"content":"first"}`, ""))
		http.NewResponseController(w).Flush()
		hang(r)
	}, nil)
	for range m.Stream(t.Context(), request()) {
		break
	}
	select {
	case <-handlerDone:
	case <-time.After(2 * time.Second):
		t.Error("the HTTP request was not closed")
	}
}

func TestRequestBody(t *testing.T) {
	h, seen := capturing(sse(frame(`{"content":"ok"}`, "stop"), done))
	m := newModel(t, h, func(c *Config) { c.MaxTokens = 4096 })
	temp := 0.2
	req := &llm.Request{
		System: "You are dsh.",
		Messages: []content.Message{
			content.UserText("List files"),
			content.AssistantMessage("test", "test-model", []content.Block{content.Reasoning("need ls"), content.Text("Listing."),
				content.ToolCall("call_1", "ls", `{"dir":"."}`), content.ToolCall("call_2", "cat", "")}),
			content.ToolResultMessage("call_1", []content.Block{content.Text("a.go\nb.go")}, false),
			content.ToolResultMessage("call_2", nil, true),
			content.UserMessage(content.Text("thanks"), content.Block{Type: content.TypeImage}),
			content.UserMessage(content.ToolResult("call_3", []content.Block{content.Text("x")}, false), content.Text("and?")),
		},
		Tools:       []content.ToolSpec{{Name: "ls", Description: "List a directory", Parameters: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}}}`)}},
		Temperature: &temp,
	}
	collect(t, m.Stream(t.Context(), req))
	got := <-seen
	want := `{"model":"test-model","stream":true,"stream_options":{"include_usage":true},"max_tokens":4096,"temperature":0.2,
	  "messages":[
		{"role":"system","content":"You are dsh."},
		{"role":"user","content":"List files"},
		{"role":"assistant","content":"Listing.","reasoning_content":"need ls","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\"dir\":\".\"}"}},
			{"id":"call_2","type":"function","function":{"name":"cat","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"a.go\nb.go"},
		{"role":"tool","tool_call_id":"call_2","content":"(no output)"},
		{"role":"user","content":"thanks"},
		{"role":"user","content":"and?"},
		{"role":"tool","tool_call_id":"call_3","content":"x"}],
	  "tools":[{"type":"function","function":{"name":"ls","description":"List a directory",
		"parameters":{"type":"object","properties":{"dir":{"type":"string"}}}}}]}`
	var gotV, wantV any
	if err := json.Unmarshal(got.body, &gotV); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantV, gotV); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
	wantHdr := map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json",
		"Accept": "text/event-stream", "User-Agent": "dsh/0 (+github.com/dsh-go/dsh)"}
	for k, v := range wantHdr {
		if got.header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v)
		}
	}
	if got.path != "/v1/chat/completions" {
		t.Errorf("path = %q", got.path)
	}

	// Optional fields are omitted, never null; Request.Model wins.
	collect(t, m.Stream(t.Context(), &llm.Request{Model: "other", Messages: []content.Message{content.UserText("hi")}, MaxTokens: 7}))
	s := string((<-seen).body)
	for _, bad := range []string{"null", "tools", "temperature", "system"} {
		if strings.Contains(s, bad) {
			t.Errorf("body %s contains %q", s, bad)
		}
	}
	if !strings.Contains(s, `"model":"other"`) || !strings.Contains(s, `"max_tokens":7`) {
		t.Errorf("body = %s", s)
	}
}

func TestNew(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	tests := []struct {
		name    string
		cfg     Config
		wantURL string
	}{
		{"deepseek default", withEnv(DeepSeek(), env(nil)), "https://api.deepseek.com/chat/completions"},
		{"deepseek env", withEnv(DeepSeek(), env(map[string]string{"DEEPSEEK_BASE_URL": "https://proxy.example/v1/"})), "https://proxy.example/v1/chat/completions"},
		{"explicit base wins", func() Config {
			c := withEnv(DeepSeek(), env(map[string]string{"DEEPSEEK_BASE_URL": "https://proxy.example"}))
			c.BaseURL = "http://127.0.0.1:8080/v1"
			return c
		}(), "http://127.0.0.1:8080/v1/chat/completions"},
		{"missing base", Config{APIKeyEnv: "K"}, ""},
		{"bad scheme", Config{APIKeyEnv: "K", BaseURL: "ftp://x"}, ""},
		{"no host", Config{APIKeyEnv: "K", BaseURL: "http://"}, ""},
		{"unparsable", Config{APIKeyEnv: "K", BaseURL: "http://x:bad"}, ""},
		{"bad thinking", Config{APIKeyEnv: "K", BaseURL: "http://x", Thinking: "on"}, ""},
		{"bad effort", Config{APIKeyEnv: "K", BaseURL: "http://x", ReasoningEffort: "huge"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.cfg)
			if tt.wantURL == "" {
				if err == nil {
					t.Fatalf("New(%+v) succeeded", tt.cfg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.url != tt.wantURL || m.Provider() != "deepseek" || m.cfg.Model != "deepseek-flash" || m.cfg.MaxTokens != 65536 || !m.cfg.PassBackReasoning {
				t.Errorf("url = %q, provider = %q, model = %q", m.url, m.Provider(), m.cfg.Model)
			}
			if m.cfg.IdleTimeout != 5*time.Minute || m.cfg.RequestTimeout != 30*time.Minute || m.cfg.MaxRetries != 5 || m.cfg.InitialBackoff != 500*time.Millisecond || m.cfg.MaxBackoff != 10*time.Second {
				t.Errorf("defaults = %+v", m.cfg)
			}
		})
	}
}

func withEnv(c Config, getenv func(string) string) Config {
	c.Getenv = getenv
	return c
}

func TestBackoff(t *testing.T) {
	m := &Model{cfg: Config{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	for _, tt := range []struct {
		n          int
		retryAfter int64
		lo, hi     time.Duration
		ok         bool
	}{
		{1, 0, 90 * time.Millisecond, 110 * time.Millisecond, true},
		{3, 0, 360 * time.Millisecond, 440 * time.Millisecond, true},
		{10, 0, 900 * time.Millisecond, time.Second, true},
		{100, 0, 900 * time.Millisecond, time.Second, true},
		{1, 700, 700 * time.Millisecond, 700 * time.Millisecond, true},
		{1, 1000, time.Second, time.Second, true},
		{1, 1001, 0, 0, false},
	} {
		for range 20 {
			d, ok := m.policy().Backoff(tt.n, &content.Failure{RetryAfterMs: tt.retryAfter})
			if ok != tt.ok || (ok && (d < tt.lo || d > tt.hi)) {
				t.Fatalf("backoff(%d, retry-after %dms) = %v, %v; want [%v, %v], %v", tt.n, tt.retryAfter, d, ok, tt.lo, tt.hi, tt.ok)
			}
		}
	}
}

func TestSSEFraming(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"basic", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"multi-line", "data: a\ndata:b\ndata:  c\n\n", []string{"a\nb\n c"}},
		{"comments and fields", ": keep-alive\n\nevent: message\nid: 7\nretry: 10\ndata: x\n: mid\n\n", []string{"x"}},
		{"no data", "event: ping\n\n\n\n", nil},
		{"unterminated at EOF", "data: a\n\ndata: [DONE]", []string{"a", "[DONE]"}},
		{"field without colon", "data\n\ndata: z\n\n", []string{"z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ssereader.NewReader(strings.NewReader(tt.in))
			var got []string
			for {
				d, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(d))
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

func TestSSESizeCap(t *testing.T) {
	big := strings.Repeat("a", 1<<20)
	for name, body := range map[string]string{
		"line":  "data: " + strings.Repeat("a", ssereader.MaxEvent+1) + "\n\n",
		"event": strings.Repeat("data: "+big+"\n", 9) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			var cs []content.Chunk
			decode(strings.NewReader(body), "test", func(c content.Chunk) bool { cs = append(cs, c); return true }, nil)
			checkFinish(t, cs)
			wantFailure(t, cs, content.FinishError, llm.CodeMalformed)
		})
	}
}

// checkStream checks structural invariants of a decoded stream.
func checkStream(t *testing.T, cs []content.Chunk) {
	checkFinish(t, cs)
	opened := 0
	for _, c := range cs {
		switch c.Type {
		case content.ChunkBlockStart:
			if c.Index != opened {
				t.Fatalf("block-start index %d, want %d", c.Index, opened)
			}
			opened++
		case content.ChunkTextDelta, content.ChunkReasoningDelta, content.ChunkToolCallDelta, content.ChunkBlockEnd:
			if c.Index < 0 || c.Index >= opened {
				t.Fatalf("%s for unopened block %d", c.Type, c.Index)
			}
		}
	}
}

func FuzzSSE(f *testing.F) {
	f.Add([]byte(frame(`{"role":"assistant","content":""}`, "") + frame(`{"content":"hi"}`, "stop") + done))
	f.Add([]byte(frame(`{"reasoning_content":"r"}`, "") + frame(`{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}`, "") +
		frame(`{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}`, "tool_calls") + usageFrame(`{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":1}}`) + done))
	f.Add([]byte(": ping\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\ndata: \r\n\r\ndata: [DONE]"))
	f.Add([]byte(`data: {"error":{"message":"x"}}` + "\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"a\"},{\"index\":1,\"id\":\"b\"}]}}]}\n\n" + done))
	f.Add([]byte("garbage\n\x00\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var cs []content.Chunk
		decode(bytes.NewReader(body), "fuzz", func(c content.Chunk) bool { cs = append(cs, c); return true }, nil)
		checkStream(t, cs)
		// A consumer stopping early is never called again.
		stopped := false
		decode(bytes.NewReader(body), "fuzz", func(content.Chunk) bool {
			if stopped {
				t.Fatal("yield called after it returned false")
			}
			stopped = true
			return false
		}, nil)
	})
}

func BenchmarkStreamLongSSE(b *testing.B) {
	const n = 20000
	var sb strings.Builder
	sb.WriteString(frame(`{"role":"assistant","content":""}`, ""))
	for i := range n {
		sb.WriteString(frame(`{"content":"token `+strconv.Itoa(i)+` "}`, ""))
	}
	sb.WriteString(frame(`{"content":""}`, "stop"))
	sb.WriteString(usageFrame(`{"prompt_tokens":10,"completion_tokens":20000,"total_tokens":20010}`))
	sb.WriteString(done)
	body := sb.String()
	m := newModel(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}, nil)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		deltas := 0
		var last content.Chunk
		for c := range m.Stream(b.Context(), request()) {
			if c.Type == content.ChunkTextDelta {
				deltas++
			}
			last = c
		}
		if deltas != n || last.Finish.Kind != content.FinishStop {
			b.Fatalf("deltas = %d, finish = %+v", deltas, last.Finish)
		}
	}
}

// TestPassBackReasoning pins DeepSeek's thinking-mode rule: every assistant
// message that made tool calls carries reasoning_content, "" when empty;
// without PassBackReasoning an empty one is omitted.
func TestPassBackReasoning(t *testing.T) {
	msgs := []content.Message{
		content.UserText("go"),
		content.AssistantMessage("test", "m", []content.Block{content.ToolCall("c1", "ls", `{}`)}),
		content.ToolResultMessage("c1", []content.Block{content.Text("a")}, false),
		content.AssistantMessage("test", "m", []content.Block{content.Reasoning("think"), content.ToolCall("c2", "ls", `{}`)}),
		content.ToolResultMessage("c2", []content.Block{content.Text("b")}, false),
		content.AssistantMessage("test", "m", []content.Block{content.Text("done")}),
		content.UserText("again"),
	}
	for _, tt := range []struct {
		passBack bool
		want     []any // reasoning_content of the three assistant messages; nil: absent
	}{
		{true, []any{"", "think", nil}},
		{false, []any{nil, "think", nil}},
	} {
		h, seen := capturing(sse(frame(`{"content":"ok"}`, "stop"), done))
		m := newModel(t, h, func(c *Config) {
			c.PassBackReasoning = tt.passBack
			c.Thinking, c.ReasoningEffort = ThinkingEnabled, "max"
		})
		collect(t, m.Stream(t.Context(), request(msgs...)))
		var body struct {
			Thinking        map[string]string `json:"thinking"`
			ReasoningEffort string            `json:"reasoning_effort"`
			Messages        []map[string]any  `json:"messages"`
		}
		if err := json.Unmarshal((<-seen).body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Thinking["type"] != "enabled" || body.ReasoningEffort != "max" {
			t.Errorf("thinking = %v, reasoning_effort = %q", body.Thinking, body.ReasoningEffort)
		}
		var got []any
		for _, msg := range body.Messages {
			if msg["role"] == "assistant" {
				got = append(got, msg["reasoning_content"])
			}
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("passBack %v: reasoning_content (-want +got):\n%s", tt.passBack, d)
		}
	}
}

// TestTransientStreamFailuresRetried: a stream that fails before yielding
// anything (an error event, insufficient_system_resource, a cut) is retried;
// once output was yielded the failure stands.
func TestTransientStreamFailuresRetried(t *testing.T) {
	failures := map[string][]string{
		llm.CodeServer:       {`data: {"error":{"message":"overloaded"}}` + "\n\n"},
		llm.CodeOverloaded:   {frame(`{"role":"assistant","content":""}`, "insufficient_system_resource"), done},
		llm.CodeStreamClosed: {frame(`{"role":"assistant","content":""}`, "")},
	}
	for code, first := range failures {
		t.Run(code, func(t *testing.T) {
			var n atomic.Int32
			ok := sse(frame(`{"content":"fine"}`, "stop"), done)
			bad := sse(first...)
			m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					bad(w, r)
					return
				}
				ok(w, r)
			}, nil)
			var retries []llm.Retry
			req := request()
			req.OnRetry = func(r llm.Retry) { retries = append(retries, r) }
			got := collect(t, m.Stream(t.Context(), req))
			if f := finish(got); f.Kind != content.FinishStop || content.JoinText(assemble(got).Blocks()) != "fine" {
				t.Fatalf("finish = %+v (failure %+v), chunks %+v", f, f.Failure, got)
			}
			if n.Load() != 2 || len(retries) != 1 || retries[0].Failure.Code != code {
				t.Errorf("requests = %d, retries = %+v", n.Load(), retries)
			}
		})
	}
	t.Run("after output", func(t *testing.T) {
		var n atomic.Int32
		m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			sse(frame(`{"content":"half"}`, ""), frame(`{}`, "insufficient_system_resource"), done)(w, r)
		}, nil)
		got := collect(t, m.Stream(t.Context(), request()))
		wantFailure(t, got, content.FinishError, llm.CodeOverloaded)
		if n.Load() != 1 {
			t.Errorf("requests = %d, want 1", n.Load())
		}
	})
}

// TestRequestDeadline: keep-alive comments do not hold a call open past
// RequestTimeout.
func TestRequestDeadline(t *testing.T) {
	m := newModel(t, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		io.WriteString(w, frame(`{"content":"slow"}`, ""))
		rc.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
				io.WriteString(w, ": keep-alive\n\n")
				rc.Flush()
			}
		}
	}, func(c *Config) { c.RequestTimeout = 200 * time.Millisecond })
	f := wantFailure(t, collect(t, m.Stream(t.Context(), request())), content.FinishError, llm.CodeTimeout)
	if !strings.Contains(f.Message, "no complete answer within 200ms") {
		t.Errorf("message = %q", f.Message)
	}
}

// TestRefusedLoopbackNotRetried: nothing listening on a loopback endpoint
// fails at once with a hint.
func TestRefusedLoopbackNotRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/v1"
	srv.Close()
	m, err := New(Config{Provider: "local", BaseURL: base, APIKeyEnv: "TEST_API_KEY", Model: "m", Getenv: testGetenv})
	if err != nil {
		t.Fatal(err)
	}
	req := request()
	req.OnRetry = func(llm.Retry) { t.Error("retried") }
	f := wantFailure(t, collect(t, m.Stream(t.Context(), req)), content.FinishError, llm.CodeUnreachable)
	if !strings.Contains(f.Message, "is the server at "+base+" running?") {
		t.Errorf("message = %q", f.Message)
	}
}

// TestKeylessRoute: a route without a key variable (Ollama, llama.cpp)
// sends no Authorization header.
func TestKeylessRoute(t *testing.T) {
	h, seen := capturing(sse(frame(`{"content":"ok"}`, "stop"), done))
	m := newModel(t, h, func(c *Config) { c.APIKeyEnv = "" })
	if f := finish(collect(t, m.Stream(t.Context(), request()))); f.Kind != content.FinishStop {
		t.Fatalf("finish %+v", f)
	}
	if auth := (<-seen).header.Get("Authorization"); auth != "" {
		t.Errorf("Authorization = %q, want none", auth)
	}
}

// OpenAI's own endpoint takes the cap as max_completion_tokens.
func TestMaxCompletionTokens(t *testing.T) {
	bodies := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	m, err := New(Config{BaseURL: srv.URL, Model: "gpt-5", MaxTokens: 99, MaxCompletionTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, m.Stream(t.Context(), &llm.Request{Messages: []content.Message{content.UserText("hi")}}))
	if b := <-bodies; !strings.Contains(b, `"max_completion_tokens":99`) || strings.Contains(b, `"max_tokens"`) {
		t.Fatalf("body %s", b)
	}
}
