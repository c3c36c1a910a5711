package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-go/dsh/telemetry"
)

// FuzzFromMeta reads a traceparent and tracestate an ACP peer sent: either
// nothing is continued, or a valid remote span context whose traceparent,
// written back, is read again as the same one. Never a panic.
func FuzzFromMeta(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE")
	f.Add("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=1,b=2")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "=")
	f.Fuzz(func(t *testing.T, traceparent, tracestate string) {
		ctx := telemetry.FromMeta(context.Background(), map[string]any{"traceparent": traceparent, "tracestate": tracestate})
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() {
			return
		}
		if !sc.IsRemote() {
			t.Fatalf("%q: a span context from a peer is not remote", traceparent)
		}
		back := telemetry.Carrier(ctx)
		again := trace.SpanContextFromContext(telemetry.WithCarrier(context.Background(), back))
		if again.TraceID() != sc.TraceID() || again.SpanID() != sc.SpanID() || again.TraceFlags() != sc.TraceFlags() {
			t.Fatalf("%q → %v → %v", traceparent, back, again)
		}
	})
}
