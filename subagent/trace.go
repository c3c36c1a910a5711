package subagent

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/telemetry"
)

// runSpan starts the span of a child run (invoke_agent, in the GenAI
// conventions' terms) as a child of ctx's span: the tool call that
// delegates. The provider's Start gets the returned ctx, so that the child
// (its turns, in process or in another) continues the trace under it.
func (s *Service) runSpan(ctx context.Context, info RunInfo, depth int) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, nil
	}
	return s.tracer.Start(ctx, "invoke_agent "+info.Provider, trace.SpanKindInternal,
		telemetry.OperationName.String(telemetry.OpInvokeAgent), telemetry.AgentName.String(ChildLabel(info.Provider, info.Label)),
		telemetry.SubagentProvider.String(info.Provider), telemetry.RunID.String(info.RunID), telemetry.Depth.Int(depth))
}

// endRunSpan ends a run's span with how it ended.
func endRunSpan(span trace.Span, end Ended) {
	if !span.IsRecording() {
		return
	}
	var total content.Usage
	for _, u := range end.Usage {
		total = total.Add(u)
	}
	span.SetAttributes(telemetry.StopReason.String(string(end.StopReason)))
	span.SetAttributes(telemetry.Usage(total)...)
	if end.CostUSD > 0 {
		span.SetAttributes(telemetry.CostUSD.Float64(end.CostUSD))
	}
	if end.StopReason != Completed {
		telemetry.Fail(span, string(end.StopReason), end.Diagnostic)
	}
	span.End()
}

// traceSpan returns the run's span, or one that records nothing.
func (t *tracker) traceSpan() trace.Span {
	if t.span == nil {
		return trace.SpanFromContext(context.Background())
	}
	return t.span
}
