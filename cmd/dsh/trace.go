package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/otlp"
)

// flushTimeout bounds how long dsh waits at exit for buffered spans to
// reach the collector: a collector that is down delays an exit by no more.
const flushTimeout = 2 * time.Second

// tracing turns on tracing in cfg when the OTEL_* environment asks for it
// (see telemetry/otlp), and returns what flushes the spans at exit. A
// configuration it cannot use is a warning: tracing stays off, the command
// runs.
func (c *cli) tracing(ctx context.Context, cfg *config.Config) (flush func()) {
	t, shutdown, err := otlp.Setup(ctx, c.getenv, version)
	if err != nil {
		fmt.Fprintln(c.stderr, "dsh: warning: tracing is off:", err)
		return func() {}
	}
	cfg.Tracer = t
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			fmt.Fprintln(c.stderr, "dsh: warning: tracing: some spans were not exported:", err)
		}
	}
}

// rootSpan starts the span a top-level run's turns hang under, continuing
// the trace of a TRACEPARENT the process was started with. Without tracing
// it is a span that records nothing.
func (c *cli) rootSpan(ctx context.Context, rt *dsh.Runtime) (context.Context, trace.Span) {
	if rt.Tracer == nil {
		return rt.Tracer.Start(ctx, "", trace.SpanKindInternal)
	}
	return rt.Tracer.Start(telemetry.FromEnv(ctx, c.getenv), "invoke_agent dsh", trace.SpanKindInternal,
		telemetry.OperationName.String(telemetry.OpInvokeAgent), telemetry.AgentName.String("dsh"))
}
