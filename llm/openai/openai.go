// Package openai is an llm.Model adapter for OpenAI-compatible streaming
// chat-completions endpoints, DeepSeek's among them.
package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/internal/httpfail"
	"github.com/dsh-go/dsh/llm/internal/retry"
)

// Config configures a Model. Zero values take the defaults noted per field.
type Config struct {
	Provider  string // route name used in messages and logs, e.g. "deepseek"; default "openai"
	BaseURL   string // endpoint root; "chat/completions" is joined to its path
	APIKeyEnv string // environment variable holding the API key, read per request
	Model     string // model used when Request.Model is empty
	MaxTokens int    // max_tokens when Request.MaxTokens is 0; 0 omits it
	// MaxCompletionTokens sends the cap as max_completion_tokens, which
	// OpenAI's own endpoint requires of its reasoning models, instead of
	// max_tokens.
	MaxCompletionTokens bool
	IdleTimeout         time.Duration // bounds each wait for the response headers and for body data; default 5m
	RequestTimeout      time.Duration // bounds a whole model call, retries included; default 30m
	// Thinking is sent as DeepSeek's thinking switch, {"thinking":
	// {"type": Thinking}}, when set: ThinkingEnabled or ThinkingDisabled.
	Thinking string
	// ReasoningEffort is sent as reasoning_effort when set: DeepSeek takes
	// low, high and max; OpenAI minimal, low, medium and high.
	ReasoningEffort string
	// PassBackReasoning makes every assistant message that made tool calls
	// carry reasoning_content, as "" when it had none. DeepSeek's thinking
	// mode refuses a tool-call turn's history without it (HTTP 400).
	PassBackReasoning bool
	MaxRetries        int                 // retries of a request failing before any output; default 5, -1 disables
	InitialBackoff    time.Duration       // first retry delay; default 500ms
	MaxBackoff        time.Duration       // retry delay cap; default 10s
	HTTPClient        *http.Client        // default: a client on http.DefaultTransport
	Getenv            func(string) string // default os.Getenv
	Logger            *slog.Logger        // default: discard

	baseURLEnv, baseURLDefault string // resolve an empty BaseURL at New (see DeepSeek)
}

// Values of Config.Thinking.
const (
	ThinkingEnabled  = "enabled"
	ThinkingDisabled = "disabled"
)

// DeepSeek's current model and the defaults of its route.
const (
	DeepSeekModel     = "deepseek-flash" // DeepSeek-V4.1-Flash: thinking on by default, 1M context, up to 384K output
	DeepSeekMaxTokens = 65536            // max_tokens by default; reasoning counts against it
)

// DeepSeek returns the configuration of DeepSeek's official endpoint: its
// current model, reasoning passed back on tool-call turns, and a default
// max_tokens. Its BaseURL is left empty: New resolves it from
// DEEPSEEK_BASE_URL, else https://api.deepseek.com. Set BaseURL to override
// both.
func DeepSeek() Config {
	return Config{Provider: "deepseek", APIKeyEnv: "DEEPSEEK_API_KEY", Model: DeepSeekModel,
		MaxTokens: DeepSeekMaxTokens, PassBackReasoning: true,
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

// New validates cfg, fills in its defaults and returns the model.
func New(cfg Config) (*Model, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.BaseURL == "" && cfg.baseURLEnv != "" {
		cfg.BaseURL = cmp.Or(strings.TrimSpace(cfg.Getenv(cfg.baseURLEnv)), cfg.baseURLDefault)
	}
	cfg.Provider = cmp.Or(cfg.Provider, "openai")
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("openai: %s: BaseURL is required", cfg.Provider)
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: %s: BaseURL %q is not an http(s) URL", cfg.Provider, cfg.BaseURL)
	}
	switch cfg.Thinking {
	case "", ThinkingEnabled, ThinkingDisabled:
	default:
		return nil, fmt.Errorf("openai: %s: thinking %q: want %s or %s", cfg.Provider, cfg.Thinking, ThinkingEnabled, ThinkingDisabled)
	}
	switch cfg.ReasoningEffort {
	case "", "minimal", "low", "medium", "high", "xhigh", "max":
	default:
		return nil, fmt.Errorf("openai: %s: reasoning effort %q: want low, high or max (DeepSeek), or minimal, low, medium or high (OpenAI)", cfg.Provider, cfg.ReasoningEffort)
	}
	d := retry.Defaults(retry.Settings{IdleTimeout: cfg.IdleTimeout, RequestTimeout: cfg.RequestTimeout,
		MaxRetries: cfg.MaxRetries, InitialBackoff: cfg.InitialBackoff, MaxBackoff: cfg.MaxBackoff})
	cfg.IdleTimeout, cfg.RequestTimeout, cfg.MaxRetries = d.IdleTimeout, d.RequestTimeout, d.MaxRetries
	cfg.InitialBackoff, cfg.MaxBackoff = d.InitialBackoff, d.MaxBackoff
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

// Stream implements llm.Model. Rate limits, server errors, transport errors
// and streams that fail or stall before yielding anything are retried with
// backoff; every other failure ends the stream with an error finish. The
// whole call, retries included, is bounded by Config.RequestTimeout.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) {
		m.policy().Call(ctx, req, m.log, m.url, m.body, m.request, yield)
	}
}

// policy is the route's key variable and retry settings.
func (m *Model) policy() retry.Policy {
	c := m.cfg
	return retry.Policy{Provider: c.Provider, APIKeyEnv: c.APIKeyEnv, Getenv: c.Getenv, RequestTimeout: c.RequestTimeout,
		MaxRetries: c.MaxRetries, InitialBackoff: c.InitialBackoff, MaxBackoff: c.MaxBackoff}
}

// request is this route's part of a streamed request (see retry.Request).
func (m *Model) request(key, model string) retry.Request {
	return retry.Request{Client: m.client, URL: m.url, BaseURL: m.cfg.BaseURL, IdleTimeout: m.cfg.IdleTimeout,
		New: func(ctx context.Context, body io.Reader) (*http.Request, error) {
			hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, body)
			if err != nil {
				return nil, err
			}
			if key != "" {
				hreq.Header.Set("Authorization", "Bearer "+key)
			}
			hreq.Header.Set("User-Agent", userAgent)
			return hreq, nil
		},
		HTTPFailure: func(resp *http.Response, body io.Reader) *content.Failure { return m.httpFailure(resp, body, model) },
		Decode: func(r io.Reader, yield func(content.Chunk) bool, interrupted func() (content.Chunk, bool)) {
			decode(r, m.cfg.Provider, yield, interrupted)
		},
	}
}

// httpFailure classifies an error response, reading a bounded part of body.
// Its message is the endpoint's own (taken from a JSON error body when
// there is one) with a hint at what the user can do.
func (m *Model) httpFailure(resp *http.Response, body io.Reader, model string) *content.Failure {
	p := m.cfg.Provider
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	text := httpfail.Text(raw)
	code := httpfail.Classify(resp.StatusCode, text)
	msg := httpfail.Message(httpfail.Route{Name: p, KeyEnv: m.cfg.APIKeyEnv, BaseURL: m.cfg.BaseURL}, resp, text, code, model)
	f := &content.Failure{
		Code:      code,
		Message:   msg,
		Status:    resp.StatusCode,
		RequestID: cmp.Or(resp.Header.Get("X-Request-Id"), resp.Header.Get("X-Deepseek-Request-Id")),
	}
	f.RetryAfterMs = httpfail.RetryAfterMs(resp.Header)
	return f
}

// ListModels returns the ids of the models the endpoint serves (GET
// models), for diagnostics such as `dsh doctor`.
func (m *Model) ListModels(ctx context.Context) ([]string, error) {
	p := m.cfg.Provider
	key, f := m.policy().Key()
	if f != nil {
		return nil, &llm.Error{Code: f.Code, Msg: f.Message}
	}
	u, err := url.Parse(m.cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.IdleTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath("models").String(), nil)
	if err != nil {
		return nil, err
	}
	if key != "" {
		hreq.Header.Set("Authorization", "Bearer "+key)
	}
	hreq.Header.Set("User-Agent", userAgent)
	resp, err := m.client.Do(hreq)
	if err != nil {
		f := retry.TransportFailure(p, m.url, m.cfg.BaseURL, err)
		return nil, &llm.Error{Code: f.Code, Msg: f.Message}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		f := m.httpFailure(resp, resp.Body, m.cfg.Model)
		return nil, &llm.Error{Code: f.Code, Msg: f.Message}
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&list); err != nil {
		return nil, &llm.Error{Code: llm.CodeMalformed, Msg: fmt.Sprintf("%s: bad model list: %v", p, err)}
	}
	ids := make([]string, 0, len(list.Data))
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	return ids, nil
}
