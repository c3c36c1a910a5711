// Package telemetry is dsh's tracing: OpenTelemetry spans for turns, model
// calls, tool calls and child runs, named and attributed after the GenAI
// semantic conventions, and the trace context that links a child in
// another process (an ACP agent, Codex, Claude Code) to the span that
// started it. A nil *Tracer traces nothing and costs nothing; package
// telemetry/otlp builds one from the standard OTEL_* variables. This
// package depends on the OpenTelemetry API only.
package telemetry

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-go/dsh/content"
)

// Attribute keys: the GenAI semantic conventions' (semconv 1.37 and
// later), then dsh's own.
const (
	OperationName      = attribute.Key("gen_ai.operation.name")
	ProviderName       = attribute.Key("gen_ai.provider.name")
	RequestModel       = attribute.Key("gen_ai.request.model")
	RequestMaxTokens   = attribute.Key("gen_ai.request.max_tokens")
	ConversationID     = attribute.Key("gen_ai.conversation.id")
	AgentName          = attribute.Key("gen_ai.agent.name")
	AgentID            = attribute.Key("gen_ai.agent.id")
	UsageInputTokens   = attribute.Key("gen_ai.usage.input_tokens") // cached input included
	UsageOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	UsageCachedTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	FinishReasons      = attribute.Key("gen_ai.response.finish_reasons")
	ToolName           = attribute.Key("gen_ai.tool.name")
	ToolCallID         = attribute.Key("gen_ai.tool.call.id")
	ToolType           = attribute.Key("gen_ai.tool.type")
	ToolArguments      = attribute.Key("gen_ai.tool.call.arguments") // content: opt-in
	ToolResult         = attribute.Key("gen_ai.tool.call.result")    // content: opt-in
	InputMessages      = attribute.Key("gen_ai.input.messages")      // content: opt-in
	OutputMessages     = attribute.Key("gen_ai.output.messages")     // content: opt-in
	SystemInstructions = attribute.Key("gen_ai.system_instructions") // content: opt-in
	ErrorType          = attribute.Key("error.type")

	Turn             = attribute.Key("dsh.turn")
	Step             = attribute.Key("dsh.step")
	TurnEnd          = attribute.Key("dsh.turn.end")
	Depth            = attribute.Key("dsh.agent.depth")
	SubagentProvider = attribute.Key("dsh.subagent.provider")
	RunID            = attribute.Key("dsh.subagent.run_id")
	StopReason       = attribute.Key("dsh.subagent.stop_reason")
	CostUSD          = attribute.Key("dsh.subagent.cost_usd")
	ToolOutcome      = attribute.Key("dsh.tool.outcome") // ok, or the error code
)

// The operation names of the GenAI conventions dsh's spans use.
const (
	OpChat        = "chat"
	OpExecuteTool = "execute_tool"
	OpInvokeAgent = "invoke_agent"
)

// Tracer makes dsh's spans. A nil *Tracer makes none: every method is safe
// to call on it and returns at once.
type Tracer struct {
	tracer  trace.Tracer
	content bool
}

// Options configure a Tracer.
type Options struct {
	// Content records prompts, answers, tool arguments and tool results in
	// spans. Off by default: they may hold secrets.
	Content bool
}

// New returns a tracer over tp.
func New(tp trace.TracerProvider, opts Options) *Tracer {
	return &Tracer{tracer: tp.Tracer("github.com/dsh-go/dsh"), content: opts.Content}
}

// Content reports whether spans record content.
func (t *Tracer) Content() bool { return t != nil && t.content }

// Start starts a span as a child of ctx's; with a nil tracer it returns
// ctx and a span that records nothing.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background()) // the API's no-op span
	}
	return t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Usage returns the usage attributes of u: input tokens counting the
// cached ones, as the conventions do.
func Usage(u content.Usage) []attribute.KeyValue {
	return []attribute.KeyValue{UsageInputTokens.Int64(u.Input + u.CacheRead), UsageOutputTokens.Int64(u.Output),
		UsageCachedTokens.Int64(u.CacheRead)}
}

// Fail marks span failed with code (error.type) and message.
func Fail(span trace.Span, code, msg string) {
	span.SetAttributes(ErrorType.String(code))
	span.SetStatus(codes.Error, msg)
}

// FailErr marks span failed with err, its code (error.type) the error's
// stable code when it has one (an ErrorCode method), else "error".
func FailErr(span trace.Span, err error) {
	code := "error"
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) {
		code = coded.ErrorCode()
	}
	Fail(span, code, err.Error())
}

// Continue returns ctx carrying the span of from (when it has one), so that
// work that outlives a call (a background child) continues its trace.
func Continue(ctx, from context.Context) context.Context {
	sc := trace.SpanContextFromContext(from)
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

// The W3C trace context: what crosses a process boundary.
var w3c propagation.TraceContext

// mapCarrier adapts a map to propagation.TextMapCarrier.
type mapCarrier map[string]string

func (c mapCarrier) Get(k string) string { return c[k] }
func (c mapCarrier) Set(k, v string)     { c[k] = v }
func (c mapCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Carrier returns the W3C trace context of ctx's span (traceparent and, if
// any, tracestate), or nil when ctx has no span to continue.
func Carrier(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := mapCarrier{}
	w3c.Inject(ctx, c)
	return c
}

// WithCarrier returns ctx continuing the trace a carrier names (as a remote
// parent); ctx itself when the carrier names none or is malformed.
func WithCarrier(ctx context.Context, carrier map[string]string) context.Context {
	if carrier["traceparent"] == "" {
		return ctx
	}
	return w3c.Extract(ctx, mapCarrier(carrier))
}

// SetMeta puts a carrier's keys at the root of an ACP `_meta` object, where
// the protocol reserves traceparent and tracestate for the W3C trace
// context, allocating meta when nil. A nil carrier leaves meta as it is.
func SetMeta(meta map[string]any, carrier map[string]string) map[string]any {
	if len(carrier) == 0 {
		return meta
	}
	if meta == nil {
		meta = make(map[string]any, len(carrier)+1)
	}
	for k, v := range carrier {
		meta[k] = v
	}
	return meta
}

// FromMeta returns ctx continuing the trace an ACP `_meta` object names.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta["traceparent"].(string)
	if tp == "" {
		return ctx
	}
	ts, _ := meta["tracestate"].(string)
	return WithCarrier(ctx, map[string]string{"traceparent": tp, "tracestate": ts})
}

// Env returns ctx's trace context as environment entries for a child
// process (TRACEPARENT=…, TRACESTATE=…: OpenTelemetry's environment
// carrier), none when ctx has no span.
func Env(ctx context.Context) []string {
	var env []string
	for k, v := range Carrier(ctx) {
		env = append(env, strings.ToUpper(k)+"="+v)
	}
	return env
}

// FromEnv returns ctx continuing the trace getenv's TRACEPARENT (and
// TRACESTATE) name, as a process started inside a trace should.
func FromEnv(ctx context.Context, getenv func(string) string) context.Context {
	return WithCarrier(ctx, map[string]string{"traceparent": getenv("TRACEPARENT"), "tracestate": getenv("TRACESTATE")})
}
