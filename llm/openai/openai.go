// Package openai is an llm.Model adapter for OpenAI-compatible streaming
// chat-completions endpoints, DeepSeek's among them.
package openai

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
)

// Config configures a Model. Zero values take the defaults noted per field.
type Config struct {
	Provider       string              // route name used in messages and logs, e.g. "deepseek"; default "openai"
	BaseURL        string              // endpoint root; "chat/completions" is joined to its path
	APIKeyEnv      string              // environment variable holding the API key, read per request
	Model          string              // model used when Request.Model is empty
	MaxTokens      int                 // max_tokens when Request.MaxTokens is 0; 0 omits it
	IdleTimeout    time.Duration       // bounds each wait for the response headers and for body data; default 5m
	MaxRetries     int                 // retries of a request failing before any output; default 5, -1 disables
	InitialBackoff time.Duration       // first retry delay; default 500ms
	MaxBackoff     time.Duration       // retry delay cap; default 10s
	HTTPClient     *http.Client        // default: a client on http.DefaultTransport
	Getenv         func(string) string // default os.Getenv
	Logger         *slog.Logger        // default: discard

	baseURLEnv, baseURLDefault string // resolve an empty BaseURL at New (see DeepSeek)
}

// DeepSeek returns the configuration of DeepSeek's official endpoint. Its
// BaseURL is left empty: New resolves it from DEEPSEEK_BASE_URL, else
// https://api.deepseek.com. Set BaseURL to override both.
func DeepSeek() Config {
	return Config{Provider: "deepseek", APIKeyEnv: "DEEPSEEK_API_KEY", Model: "deepseek-chat",
		baseURLEnv: "DEEPSEEK_BASE_URL", baseURLDefault: "https://api.deepseek.com"}
}

// Model streams chat completions from one endpoint. It implements llm.Model
// and is safe for concurrent use.
type Model struct {
	cfg    Config
	url    string
	client *http.Client
	log    *slog.Logger
}

const userAgent = "dsh/0 (+github.com/dsh-go/dsh)"

// errIdle is the cancellation cause of a request whose idle timer fired.
var errIdle = errors.New("idle timeout")

// New validates cfg, fills in its defaults and returns the model.
func New(cfg Config) (*Model, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.BaseURL == "" && cfg.baseURLEnv != "" {
		cfg.BaseURL = cmp.Or(strings.TrimSpace(cfg.Getenv(cfg.baseURLEnv)), cfg.baseURLDefault)
	}
	cfg.Provider = cmp.Or(cfg.Provider, "openai")
	if cfg.APIKeyEnv == "" {
		return nil, fmt.Errorf("openai: %s: APIKeyEnv is required", cfg.Provider)
	}
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("openai: %s: BaseURL is required", cfg.Provider)
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: %s: BaseURL %q is not an http(s) URL", cfg.Provider, cfg.BaseURL)
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = 5
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.InitialBackoff <= 0 {
		cfg.InitialBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	m := &Model{cfg: cfg, url: u.JoinPath("chat/completions").String(), client: cfg.HTTPClient, log: cfg.Logger}
	if m.client == nil {
		m.client = &http.Client{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

// Provider returns the route name the model was configured with.
func (m *Model) Provider() string { return m.cfg.Provider }

// Stream implements llm.Model. Rate limits, server errors and transport
// errors that occur before any output are retried with backoff; every other
// failure, an idle timeout included, ends the stream with an error finish.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) { m.stream(ctx, req, yield) }
}

func (m *Model) stream(ctx context.Context, req *llm.Request, yield func(content.Chunk) bool) {
	p := m.cfg.Provider
	key := strings.TrimSpace(m.cfg.Getenv(m.cfg.APIKeyEnv))
	if key == "" {
		yield(llm.FinishError(llm.CodeMissingKey, "%s: %s is not set", p, m.cfg.APIKeyEnv))
		return
	}
	if strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r > '~' }) {
		yield(llm.FinishError(llm.CodeInvalidKey, "%s: %s holds spaces or non-printable characters", p, m.cfg.APIKeyEnv))
		return
	}
	body, model, err := m.body(req)
	if err != nil {
		yield(llm.FinishError(llm.CodeInvalidRequest, "%s: %v", p, err))
		return
	}
	log := m.log.With("provider", p, "model", model, "session", req.SessionID)
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			yield(llm.FinishAborted(context.Cause(ctx)))
			return
		}
		log.Debug("llm request", "url", m.url, "attempt", attempt+1)
		f := m.attempt(ctx, key, body, yield)
		if f == nil {
			return
		}
		retryable := f.Code == llm.CodeRateLimit || f.Code == llm.CodeServer || f.Code == llm.CodeTransport
		delay, ok := m.backoff(attempt+1, f)
		if !retryable || !ok || attempt >= m.cfg.MaxRetries {
			log.Debug("llm request failed", "code", f.Code, "status", f.Status, "request_id", f.RequestID)
			yield(content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishError, Failure: f}})
			return
		}
		log.Warn("llm request failed; retrying", "code", f.Code, "status", f.Status, "retry", attempt+1, "delay", delay)
		if req.OnRetry != nil {
			req.OnRetry(llm.Retry{Attempt: attempt + 1, Delay: delay, Failure: f})
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			yield(llm.FinishAborted(context.Cause(ctx)))
			return
		case <-t.C:
		}
	}
}

// backoff returns the delay before retry n (1-based), or false when the
// provider asks for a longer wait than MaxBackoff.
func (m *Model) backoff(n int, f *content.Failure) (time.Duration, bool) {
	if f.RetryAfterMs > 0 {
		d := time.Duration(f.RetryAfterMs) * time.Millisecond
		return d, d <= m.cfg.MaxBackoff
	}
	d := m.cfg.InitialBackoff
	for i := 1; i < n && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, m.cfg.MaxBackoff)
	jittered := time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
	return min(jittered, m.cfg.MaxBackoff), true
}

// attempt makes one request. It streams the answer to its end itself and
// returns nil, or returns the failure of a request that produced no output.
func (m *Model) attempt(ctx context.Context, key string, body []byte, yield func(content.Chunk) bool) *content.Failure {
	p := m.cfg.Provider
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(m.cfg.IdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()
	// interrupted explains a failed read or request by abort or idle timeout.
	interrupted := func() (content.Chunk, bool) {
		if ctx.Err() != nil {
			return llm.FinishAborted(context.Cause(ctx)), true
		}
		if errors.Is(context.Cause(reqCtx), errIdle) {
			return llm.FinishError(llm.CodeTimeout, "%s: no data from the server for %v", p, m.cfg.IdleTimeout), true
		}
		return content.Chunk{}, false
	}

	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return &content.Failure{Code: llm.CodeTransport, Message: fmt.Sprintf("%s: %v", p, err)}
	}
	hreq.Header.Set("Authorization", "Bearer "+key)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("User-Agent", userAgent)
	resp, err := m.client.Do(hreq)
	idle.Stop()
	if err != nil {
		if c, ok := interrupted(); ok {
			yield(c)
			return nil
		}
		return &content.Failure{Code: llm.CodeTransport, Message: fmt.Sprintf("%s: %v", p, err)}
	}
	defer resp.Body.Close()
	r := &idleReader{r: resp.Body, timer: idle, d: m.cfg.IdleTimeout}
	if resp.StatusCode/100 != 2 {
		f := httpFailure(p, resp, r)
		if c, ok := interrupted(); ok && c.Finish.Kind == content.FinishAborted {
			yield(c)
			return nil
		}
		return f
	}
	decode(r, p, yield, interrupted)
	return nil
}

// idleReader arms the idle timer for the duration of each read.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.timer.Reset(r.d)
	n, err := r.r.Read(b)
	r.timer.Stop()
	return n, err
}

// httpFailure classifies an error response, reading a bounded part of body.
func httpFailure(provider string, resp *http.Response, body io.Reader) *content.Failure {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	text := strings.Join(strings.Fields(strings.ToValidUTF8(string(raw), "\uFFFD")), " ")
	if len(text) > 512 {
		i := 512
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		text = text[:i] + "…"
	}
	f := &content.Failure{
		Code:      classify(resp.StatusCode, string(raw)),
		Message:   fmt.Sprintf("%s: HTTP %s: %s", provider, resp.Status, text),
		Status:    resp.StatusCode,
		RequestID: cmp.Or(resp.Header.Get("X-Request-Id"), resp.Header.Get("X-Deepseek-Request-Id")),
	}
	if ra := strings.TrimSpace(resp.Header.Get("Retry-After")); ra != "" {
		if s, err := strconv.ParseFloat(ra, 64); err == nil && s > 0 && s < 1e9 {
			f.RetryAfterMs = int64(s * 1000)
		} else if t, err := http.ParseTime(ra); err == nil {
			f.RetryAfterMs = max(time.Until(t).Milliseconds(), 0)
		}
	}
	return f
}

// classify maps an error status and its body to a failure code.
func classify(status int, body string) string {
	b := strings.ToLower(body)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(b, w) {
				return true
			}
		}
		return false
	}
	quota := has("quota", "balance", "insufficient")
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.CodeAuth
	case (status == http.StatusTooManyRequests || status == http.StatusPaymentRequired) && quota:
		return llm.CodeQuota
	case status == http.StatusTooManyRequests:
		return llm.CodeRateLimit
	case status == http.StatusBadRequest && has("context length", "context_length", "context window", "overflow"):
		return llm.CodeContextExceeded
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		return llm.CodeInvalidRequest
	case status >= 500:
		return llm.CodeServer
	}
	return "HTTP_" + strconv.Itoa(status)
}
