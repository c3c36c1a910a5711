// Package anthropic is an llm.Model adapter for Anthropic's Messages API:
// streaming, tool use, extended thinking (thinking blocks, with their
// signatures, are sent back as the API requires) and prompt caching, with
// cache_control breakpoints placed so that a parent agent and its children
// share the cached prefix (see breakpoints).
//
// It is hand-written over net/http, as package openai is, rather than
// built on github.com/anthropics/anthropic-sdk-go: dsh needs an idle
// timeout on every read of the stream, retries that stop once output was
// yielded, and failure codes and hints that are the same on every route;
// the SDK brings its own retry loop and error types, which would be
// switched off or translated back, for a protocol of a few event types.
package anthropic

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
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/internal/httpfail"
	"github.com/dsh-go/dsh/llm/internal/retry"
)

// Version is the anthropic-version header the adapter speaks.
const Version = "2023-06-01"

// DefaultMaxTokens is max_tokens when neither the request nor the
// configuration sets it.
const DefaultMaxTokens = 16384

// Values of Config.Thinking.
const (
	ThinkingEnabled  = "enabled"
	ThinkingDisabled = "disabled"
)

// Config configures a Model. Zero values take the defaults noted per field.
type Config struct {
	Provider       string        // route name used in messages and logs; default "anthropic"
	BaseURL        string        // endpoint root, such as https://api.anthropic.com; "v1/messages" is joined to it
	APIKeyEnv      string        // environment variable holding the key, sent as x-api-key, read per request
	Model          string        // model used when Request.Model is empty
	MaxTokens      int           // max_tokens when Request.MaxTokens is 0; default DefaultMaxTokens
	IdleTimeout    time.Duration // bounds each wait for the response headers and for body data; default 5m
	RequestTimeout time.Duration // bounds a whole model call, retries included; default 30m
	// Thinking turns extended thinking on (ThinkingEnabled) or off (the
	// default). With it on, the model's thinking blocks stream as
	// reasoning and are sent back with their signatures.
	Thinking string
	// ThinkingBudget is budget_tokens with thinking on: at least 1024 and
	// below max_tokens; default half of max_tokens.
	ThinkingBudget int
	MaxRetries     int                 // retries of a request failing before any output; default 5, -1 disables
	InitialBackoff time.Duration       // first retry delay; default 500ms
	MaxBackoff     time.Duration       // retry delay cap; default 10s
	HTTPClient     *http.Client        // default: a client on http.DefaultTransport
	Getenv         func(string) string // default os.Getenv
	Logger         *slog.Logger        // default: discard
}

// Model streams messages from one endpoint. It implements llm.Model and is
// safe for concurrent use.
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
	cfg.Provider = cmp.Or(cfg.Provider, "anthropic")
	if cfg.BaseURL == "" {
		return nil, fmt.Errorf("anthropic: %s: BaseURL is required", cfg.Provider)
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: %s: BaseURL %q is not an http(s) URL", cfg.Provider, cfg.BaseURL)
	}
	switch cfg.Thinking {
	case "", ThinkingEnabled, ThinkingDisabled:
	default:
		return nil, fmt.Errorf("anthropic: %s: thinking %q: want %s or %s", cfg.Provider, cfg.Thinking, ThinkingEnabled, ThinkingDisabled)
	}
	cfg.MaxTokens = cmp.Or(cfg.MaxTokens, DefaultMaxTokens)
	if cfg.ThinkingBudget != 0 && (cfg.ThinkingBudget < 1024 || cfg.ThinkingBudget >= cfg.MaxTokens) {
		return nil, fmt.Errorf("anthropic: %s: thinking budget %d: want at least 1024 and below max tokens (%d)", cfg.Provider, cfg.ThinkingBudget, cfg.MaxTokens)
	}
	d := retry.Defaults(retry.Settings{IdleTimeout: cfg.IdleTimeout, RequestTimeout: cfg.RequestTimeout,
		MaxRetries: cfg.MaxRetries, InitialBackoff: cfg.InitialBackoff, MaxBackoff: cfg.MaxBackoff})
	cfg.IdleTimeout, cfg.RequestTimeout, cfg.MaxRetries = d.IdleTimeout, d.RequestTimeout, d.MaxRetries
	cfg.InitialBackoff, cfg.MaxBackoff = d.InitialBackoff, d.MaxBackoff
	m := &Model{cfg: cfg, url: u.JoinPath("v1/messages").String(), client: cfg.HTTPClient, log: cfg.Logger}
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

// Stream implements llm.Model. Rate limits, overload, server and transport
// errors and streams that fail before yielding anything are retried with
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

// newRequest builds a request to path (joined to the base URL's) with the
// key and the API version.
func (m *Model) newRequest(ctx context.Context, method, target, key string, body io.Reader) (*http.Request, error) {
	hreq, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	if key != "" {
		hreq.Header.Set("X-Api-Key", key)
	}
	hreq.Header.Set("Anthropic-Version", Version)
	hreq.Header.Set("User-Agent", userAgent)
	return hreq, nil
}

// request is this route's part of a streamed request (see retry.Request).
func (m *Model) request(key, model string) retry.Request {
	return retry.Request{Client: m.client, URL: m.url, BaseURL: m.cfg.BaseURL, IdleTimeout: m.cfg.IdleTimeout,
		New: func(ctx context.Context, body io.Reader) (*http.Request, error) {
			return m.newRequest(ctx, http.MethodPost, m.url, key, body)
		},
		HTTPFailure: func(resp *http.Response, body io.Reader) *content.Failure { return m.httpFailure(resp, body, model) },
		Decode: func(r io.Reader, yield func(content.Chunk) bool, interrupted func() (content.Chunk, bool)) {
			decode(r, m.cfg.Provider, yield, interrupted)
		},
	}
}

// httpFailure classifies an error response as every route does (see
// package httpfail); Anthropic's 529 is an overload, retried.
func (m *Model) httpFailure(resp *http.Response, body io.Reader, model string) *content.Failure {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	text := httpfail.Text(raw)
	code := httpfail.Classify(resp.StatusCode, text)
	if resp.StatusCode == 529 {
		code = llm.CodeOverloaded
	}
	f := &content.Failure{
		Code:      code,
		Message:   httpfail.Message(httpfail.Route{Name: m.cfg.Provider, KeyEnv: m.cfg.APIKeyEnv, BaseURL: m.cfg.BaseURL}, resp, text, code, model),
		Status:    resp.StatusCode,
		RequestID: cmp.Or(resp.Header.Get("Request-Id"), resp.Header.Get("X-Request-Id")),
	}
	f.RetryAfterMs = httpfail.RetryAfterMs(resp.Header)
	return f
}

// ListModels returns the ids of the models the endpoint serves (GET
// v1/models), for diagnostics such as `dsh doctor`.
func (m *Model) ListModels(ctx context.Context) ([]string, error) {
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
	q := u.JoinPath("v1/models")
	q.RawQuery = "limit=1000"
	hreq, err := m.newRequest(ctx, http.MethodGet, q.String(), key, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.client.Do(hreq)
	if err != nil {
		f := retry.TransportFailure(m.cfg.Provider, m.url, m.cfg.BaseURL, err)
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
		return nil, &llm.Error{Code: llm.CodeMalformed, Msg: fmt.Sprintf("%s: bad model list: %v", m.cfg.Provider, err)}
	}
	ids := make([]string, 0, len(list.Data))
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	return ids, nil
}
