package retry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/internal/httpfail"
	"github.com/dsh-go/dsh/telemetry"
)

// errIdle is the cancellation cause of a request whose idle timer fired.
var errIdle = errors.New("idle timeout")

// Request is one streamed model request of a route: what the route says
// itself (its headers, how it reads an error status and its stream).
type Request struct {
	Client      *http.Client
	URL         string
	BaseURL     string        // as configured: the hint of a refused loopback connection names it
	IdleTimeout time.Duration // bounds each wait for the response headers and for body data
	// New makes the POST of body to URL with the route's own headers
	// (key, version, user agent).
	New func(ctx context.Context, body io.Reader) (*http.Request, error)
	// HTTPFailure classifies an error status, reading a bounded part of body.
	HTTPFailure func(resp *http.Response, body io.Reader) *content.Failure
	// Decode yields the answer's chunks from the event stream r;
	// interrupted explains a failed read by abort, deadline or idle timeout.
	Decode func(r io.Reader, yield func(content.Chunk) bool, interrupted func() (content.Chunk, bool))
}

// Call streams one model call of a route to yield: the key read, the
// request's body encoded (encode returns it and the model it names), then
// Stream over Attempt with the route's part of each attempt (request).
// A missing key or a request that cannot be encoded ends the stream with
// an error finish at once.
func (p Policy) Call(ctx context.Context, req *llm.Request, log *slog.Logger, url string,
	encode func(*llm.Request) ([]byte, string, error), request func(key, model string) Request, yield func(content.Chunk) bool) {
	key, f := p.Key()
	if f != nil {
		yield(content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishError, Failure: f}})
		return
	}
	body, model, err := encode(req)
	if err != nil {
		yield(llm.FinishError(llm.CodeInvalidRequest, "%s: %v", p.Provider, err))
		return
	}
	log = log.With("provider", p.Provider, "model", model, "session", req.SessionID)
	r := request(key, model)
	p.Stream(ctx, req, log, url, func(ctx context.Context) *content.Failure { return p.Attempt(ctx, r, body, yield) }, yield)
}

// Attempt makes one request of body, for Stream. It streams the answer to
// its end itself and returns nil, or returns the failure of a request that
// yielded nothing: an error status, a refused connection, or a stream that
// broke, stalled or was ended by the server before its first chunk.
func (p Policy) Attempt(ctx context.Context, r Request, body []byte, yield func(content.Chunk) bool) *content.Failure {
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(r.IdleTimeout, func() { cancel(errIdle) })
	defer idle.Stop()
	interrupted := func() (content.Chunk, bool) {
		if ctx.Err() != nil {
			return p.Ended(ctx), true
		}
		if errors.Is(context.Cause(reqCtx), errIdle) {
			return llm.FinishError(llm.CodeTimeout, "%s: no data from the server for %v", p.Provider, r.IdleTimeout), true
		}
		return content.Chunk{}, false
	}
	hreq, err := r.New(reqCtx, bytes.NewReader(body))
	if err != nil {
		return &content.Failure{Code: llm.CodeTransport, Message: fmt.Sprintf("%s: %v", p.Provider, err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	for k, v := range telemetry.Carrier(reqCtx) { // the model call's span, for a gateway that traces
		hreq.Header.Set(k, v)
	}
	resp, err := r.Client.Do(hreq)
	idle.Stop()
	if err != nil {
		if c, ok := interrupted(); ok {
			if c.Finish.Kind == content.FinishAborted {
				yield(c)
				return nil
			}
			return c.Finish.Failure
		}
		return TransportFailure(p.Provider, r.URL, r.BaseURL, err)
	}
	defer resp.Body.Close()
	body2 := &idleReader{r: resp.Body, timer: idle, d: r.IdleTimeout}
	if resp.StatusCode/100 != 2 {
		f := r.HTTPFailure(resp, body2)
		if c, ok := interrupted(); ok && c.Finish.Kind == content.FinishAborted {
			yield(c)
			return nil
		}
		return f
	}
	// A transient failure before the first chunk is held back for a retry;
	// once anything was yielded, the stream's own finish stands.
	var held *content.Failure
	yielded := false
	r.Decode(body2, func(c content.Chunk) bool {
		if !yielded && c.Type == content.ChunkFinish && c.Finish.Kind == content.FinishError && Retryable(c.Finish.Failure) {
			held = c.Finish.Failure
			return false
		}
		yielded = true
		return yield(c)
	}, interrupted)
	return held
}

// TransportFailure describes a request to target that got no response. A
// refused connection to a loopback address means no server is running
// there: it fails at once, with a hint naming baseURL, instead of being
// retried.
func TransportFailure(provider, target, baseURL string, err error) *content.Failure {
	if errors.Is(err, syscall.ECONNREFUSED) {
		if u, perr := url.Parse(target); perr == nil && httpfail.IsLoopback(u.Hostname()) {
			return &content.Failure{Code: llm.CodeUnreachable,
				Message: fmt.Sprintf("%s: connection refused by %s: is the server at %s running?", provider, u.Host, baseURL)}
		}
	}
	return &content.Failure{Code: llm.CodeTransport, Message: fmt.Sprintf("%s: %v", provider, err)}
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
