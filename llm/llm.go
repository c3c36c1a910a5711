// Package llm is dsh's model seam: the Model interface every adapter
// implements, the request shape, failure codes, and a registry of adapters
// keyed by provider name.
package llm

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/dsh-go/dsh/content"
)

// Request is one model call.
type Request struct {
	Provider    string
	Model       string
	System      string
	Messages    []content.Message
	Tools       []content.ToolSpec
	MaxTokens   int      // 0: the adapter's default
	Temperature *float64 // nil: the endpoint's default
	SessionID   string   // the calling session, for logs and headers
	// OnRetry, when set, is called before the adapter waits to retry a
	// failed request.
	OnRetry func(Retry)
}

// Retry describes one retry an adapter is about to make.
type Retry struct {
	Attempt int // 1 for the first retry
	Max     int // the most retries the adapter makes (0 when unknown)
	Delay   time.Duration
	Failure *content.Failure
}

// Model streams a model's answer to a request. The sequence ends with
// exactly one finish chunk and nothing after it; failures are reported as a
// finish chunk of kind error (or aborted when ctx was cancelled), never by
// panicking. Stream must stop promptly when ctx is cancelled.
type Model interface {
	Stream(ctx context.Context, req *Request) iter.Seq[content.Chunk]
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req *Request) iter.Seq[content.Chunk]

// Stream implements Model.
func (f ModelFunc) Stream(ctx context.Context, req *Request) iter.Seq[content.Chunk] {
	return f(ctx, req)
}

// Failure codes shared by adapters.
const (
	CodeEmptyResponse   = "EMPTY_RESPONSE"
	CodeContextExceeded = "CONTEXT_WINDOW_EXCEEDED"
	CodeQuota           = "QUOTA"
	CodeAuth            = "AUTH"
	CodeRateLimit       = "RATE_LIMIT"
	CodeInvalidRequest  = "INVALID_REQUEST"
	CodeInvalidParams   = "INVALID_PARAMETERS"           // the endpoint refused a parameter's value (HTTP 422)
	CodeUnknownModel    = "UNKNOWN_MODEL"                // the endpoint does not serve the requested model
	CodeOverloaded      = "INSUFFICIENT_SYSTEM_RESOURCE" // the endpoint ended a stream for lack of capacity; transient
	CodeServer          = "SERVER"
	CodeTransport       = "TRANSPORT"
	CodeUnreachable     = "CONNECTION_REFUSED" // nothing listens at a loopback endpoint; not retried
	CodeAborted         = "ABORTED"
	CodeTimeout         = "TIMEOUT"
	CodeStreamClosed    = "STREAM_CLOSED"
	CodeMalformed       = "MALFORMED_RESPONSE"
	CodeMissingKey      = "MISSING_CREDENTIAL"
	CodeInvalidKey      = "INVALID_CREDENTIAL"
	CodeNoAdapter       = "NO_ADAPTER"
	CodeDuplicate       = "DUPLICATE_ADAPTER"
	CodeInvalidAdapter  = "INVALID_ADAPTER"
	CodeUnknown         = "UNKNOWN"
)

// Error is a registry failure with a stable code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return "llm: " + e.Msg }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// Is matches another *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// FinishError returns a terminal finish chunk reporting a failure.
func FinishError(code, format string, args ...any) content.Chunk {
	return content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishError,
		Failure: &content.Failure{Code: code, Message: fmt.Sprintf(format, args...)}}}
}

// FinishAborted returns the terminal chunk of a stream stopped by its caller.
func FinishAborted(cause error) content.Chunk {
	msg := "request aborted"
	if cause != nil {
		msg = "request aborted: " + cause.Error()
	}
	return content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishAborted,
		Failure: &content.Failure{Code: CodeAborted, Message: msg}}}
}

// Registry maps provider names to models. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	models  map[string]*registration
	order   []string
	windows map[string]int // provider → context window (see SetContextWindow)
}

// registration is one Register call; its address identifies it for the
// disposer (models themselves may not be comparable).
type registration struct{ model Model }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{models: map[string]*registration{}} }

// Register makes m serve provider and returns its disposer. A provider
// served already is refused.
func (r *Registry) Register(provider string, m Model) (dispose func(), err error) {
	if provider == "" || m == nil {
		return nil, &Error{Code: CodeInvalidAdapter, Msg: "register: provider name and model are required"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.models[provider]; dup {
		return nil, &Error{Code: CodeDuplicate, Msg: fmt.Sprintf("provider %q is already registered", provider)}
	}
	reg := &registration{model: m}
	r.models[provider] = reg
	r.order = append(r.order, provider)
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.models[provider] == reg {
				delete(r.models, provider)
				r.order = slices.DeleteFunc(r.order, func(p string) bool { return p == provider })
			}
		})
	}, nil
}

// Providers returns the registered provider names in registration order.
func (r *Registry) Providers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// Get returns the model serving provider.
func (r *Registry) Get(provider string) (Model, error) {
	r.mu.RLock()
	reg, ok := r.models[provider]
	r.mu.RUnlock()
	if !ok {
		return nil, &Error{Code: CodeNoAdapter, Msg: fmt.Sprintf("no model adapter for provider %q (registered: %v)", provider, r.Providers())}
	}
	return reg.model, nil
}

// Stream routes req to its provider's model and guarantees a well-formed
// stream: exactly one finish chunk, last. An unknown provider, a stream that
// ends without finish or a model that panics is reported as a finish chunk
// too; a cancelled ctx turns the finish into aborted.
func (r *Registry) Stream(ctx context.Context, req *Request) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) {
		m, err := r.Get(req.Provider)
		if err != nil {
			noModel(ctx, err, yield)
			return
		}
		s := &relay{ctx: ctx, yield: yield}
		defer s.end(req.Provider)
		m.Stream(ctx, req)(s.chunk)
	}
}

// noModel reports that no model serves the request's provider.
func noModel(ctx context.Context, err error, yield func(content.Chunk) bool) {
	var le *Error
	errors.As(err, &le)
	s := relay{ctx: ctx, yield: yield}
	s.finish(FinishError(le.Code, "%s", le.Msg))
}

// relay passes a model's chunks on to the consumer of a Registry's stream.
// Its state is on the heap and its work in its methods, so that the frame
// under a consumer parked in the model's call stays small (see agent's
// loop), 32 bytes.
type relay struct {
	ctx        context.Context
	yield      func(content.Chunk) bool
	finished   bool // the consumer has seen the finish, or stopped the stream
	inConsumer bool // yield is running
}

// chunk passes c on, and reports whether the model may go on.
func (s *relay) chunk(c content.Chunk) bool {
	if s.finished {
		return false // a model that goes on after being told to stop is not heard
	}
	if c.Type == content.ChunkFinish {
		s.finish(c)
		return false
	}
	s.inConsumer = true
	ok := s.yield(c)
	s.inConsumer = false
	if !ok {
		s.finished = true
	}
	return ok
}

// finish passes on the stream's one finish chunk: aborted when ctx was
// cancelled.
func (s *relay) finish(c content.Chunk) {
	if c.Finish == nil {
		c.Finish = &content.Finish{Kind: content.FinishStop}
	}
	if s.ctx.Err() != nil && c.Finish.Kind != content.FinishAborted {
		c = FinishAborted(context.Cause(s.ctx))
	}
	s.finished = true
	s.yield(c)
}

// end runs when the model's stream returns or panics: it finishes a stream
// that ended without a finish chunk, and turns the model's panic into one.
// A panic of the consumer propagates. provider names the model's.
func (s *relay) end(provider string) {
	if s.finished {
		return
	}
	if p := recover(); p != nil {
		if s.inConsumer {
			panic(p)
		}
		s.finish(FinishError(CodeUnknown, "model %s panicked: %v", provider, p))
		return
	}
	s.finish(content.Chunk{Type: content.ChunkFinish})
}
