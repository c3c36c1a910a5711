// Package retry is what every model route's adapter shares around its
// requests: the API key read from its variable, and a model call retried
// with backoff within one deadline.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
)

// Policy is a route's key variable and retry settings.
type Policy struct {
	Provider       string              // the route's name, as failures name it
	APIKeyEnv      string              // the key's variable; "" for a keyless endpoint
	Getenv         func(string) string // reads it
	RequestTimeout time.Duration       // bounds a whole call, retries included (models[].requestTimeout)
	MaxRetries     int                 // retries of a request that failed before any output
	InitialBackoff time.Duration       // the first retry's delay, doubled each time
	MaxBackoff     time.Duration       // the longest delay, and the longest Retry-After waited for
}

// errDeadline is the cause of a call that outlived RequestTimeout.
var errDeadline = errors.New("request deadline")

// Key reads the API key: "" for a keyless endpoint, else a failure when
// the variable is unset or malformed.
func (p Policy) Key() (string, *content.Failure) {
	if p.APIKeyEnv == "" {
		return "", nil
	}
	key := strings.TrimSpace(p.Getenv(p.APIKeyEnv))
	switch {
	case key == "":
		return "", &content.Failure{Code: llm.CodeMissingKey, Message: fmt.Sprintf("%s: %s is not set", p.Provider, p.APIKeyEnv)}
	case strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r > '~' }):
		return "", &content.Failure{Code: llm.CodeInvalidKey, Message: fmt.Sprintf("%s: %s holds spaces or non-printable characters", p.Provider, p.APIKeyEnv)}
	}
	return key, nil
}

// Stream runs attempt, with ctx bounded by RequestTimeout, until it
// returns nil (it streamed the answer itself); a transient failure before
// any output is retried with backoff, and every other ending (a lasting
// failure, retries or deadline spent, the caller's abort) is yielded as
// one finish chunk. url and log name the call in the debug log.
func (p Policy) Stream(ctx context.Context, req *llm.Request, log *slog.Logger, url string,
	attempt func(ctx context.Context) *content.Failure, yield func(content.Chunk) bool) {
	ctx, cancel := context.WithTimeoutCause(ctx, p.RequestTimeout, errDeadline)
	defer cancel()
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			yield(p.Ended(ctx))
			return
		}
		log.Debug("llm request", "url", url, "attempt", n+1)
		f := attempt(ctx)
		if f == nil {
			return
		}
		delay, ok := p.Backoff(n+1, f)
		if !Retryable(f) || !ok || n >= p.MaxRetries || ctx.Err() != nil {
			log.Debug("llm request failed", "code", f.Code, "status", f.Status, "request_id", f.RequestID)
			if ctx.Err() != nil {
				yield(p.Ended(ctx))
				return
			}
			yield(content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishError, Failure: f}})
			return
		}
		log.Debug("llm request failed; retrying", "code", f.Code, "status", f.Status, "retry", n+1, "delay", delay)
		if req.OnRetry != nil {
			req.OnRetry(llm.Retry{Attempt: n + 1, Max: p.MaxRetries, Delay: delay, Failure: f})
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			yield(p.Ended(ctx))
			return
		case <-t.C:
		}
	}
}

// Retryable reports whether a failure that produced no output is transient.
func Retryable(f *content.Failure) bool {
	switch f.Code {
	case llm.CodeRateLimit, llm.CodeServer, llm.CodeTransport, llm.CodeOverloaded, llm.CodeStreamClosed, llm.CodeTimeout:
		return true
	}
	return false
}

// Ended is the finish of a call whose ctx (one Stream gave its attempt) is done: the deadline's timeout,
// else the caller's abort.
func (p Policy) Ended(ctx context.Context) content.Chunk {
	if errors.Is(context.Cause(ctx), errDeadline) {
		return llm.FinishError(llm.CodeTimeout, "%s: no complete answer within %v (models[].requestTimeout)", p.Provider, p.RequestTimeout)
	}
	return llm.FinishAborted(context.Cause(ctx))
}

// Backoff returns the delay before retry n (1-based), or false when the
// endpoint asks for a longer wait than MaxBackoff.
func (p Policy) Backoff(n int, f *content.Failure) (time.Duration, bool) {
	if f.RetryAfterMs > 0 {
		d := time.Duration(f.RetryAfterMs) * time.Millisecond
		return d, d <= p.MaxBackoff
	}
	d := p.InitialBackoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	return min(time.Duration(float64(d)*(0.9+0.2*rand.Float64())), p.MaxBackoff), true
}

// Settings are a route's timeouts and retries, as its Config holds them.
type Settings struct {
	IdleTimeout    time.Duration // default 5m
	RequestTimeout time.Duration // default 30m
	MaxRetries     int           // default 5; negative: none
	InitialBackoff time.Duration // default 500ms
	MaxBackoff     time.Duration // default 10s
}

// Defaults returns s with every unset setting (zero, or negative for a
// duration) at its default, and a negative MaxRetries as 0.
func Defaults(s Settings) Settings {
	orDefault := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	s.IdleTimeout = orDefault(s.IdleTimeout, 5*time.Minute)
	s.RequestTimeout = orDefault(s.RequestTimeout, 30*time.Minute)
	s.InitialBackoff = orDefault(s.InitialBackoff, 500*time.Millisecond)
	s.MaxBackoff = orDefault(s.MaxBackoff, 10*time.Second)
	switch {
	case s.MaxRetries == 0:
		s.MaxRetries = 5
	case s.MaxRetries < 0:
		s.MaxRetries = 0
	}
	return s
}
