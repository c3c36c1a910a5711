package agent

import (
	"context"
	"encoding/json"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool"
)

// traceState is where an agent's turn spans hang in a trace: under the
// span its creation ran in (a child's run, `dsh run`'s root, an ACP
// session's client), or under the span of the Run call whose message the
// turn takes (an ACP prompt). Unused when tracing is off.
type traceState struct {
	mu        sync.Mutex
	parent    trace.SpanContext
	runMsg    string // the message of the last Run that had a span
	runParent trace.SpanContext
}

// traceCreated notes the span the agent was created in.
func (a *Agent) traceCreated(ctx context.Context) {
	if a.reg.deps.Tracer != nil {
		a.trace = &traceState{parent: trace.SpanContextFromContext(ctx)}
	}
}

// traceRun notes the span of a Run call for the turn that takes msgID.
func (a *Agent) traceRun(ctx context.Context, msgID string) {
	if a.reg.deps.Tracer == nil {
		return
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		a.trace.mu.Lock()
		a.trace.runMsg, a.trace.runParent = msgID, sc
		a.trace.mu.Unlock()
	}
}

// traceTurn starts turn n's span.
func (a *Agent) traceTurn(ctx context.Context, n int, claimed []item) context.Context {
	t := a.reg.deps.Tracer
	if t == nil {
		return ctx
	}
	a.trace.mu.Lock()
	parent := a.trace.parent
	for _, it := range claimed {
		if it.msg.ID == a.trace.runMsg {
			parent, a.trace.runMsg = a.trace.runParent, ""
		}
	}
	a.trace.mu.Unlock()
	ctx = trace.ContextWithSpanContext(ctx, parent)
	ctx, _ = t.Start(ctx, "turn", trace.SpanKindInternal, telemetry.ConversationID.String(a.id), telemetry.Turn.Int(n),
		telemetry.Depth.Int(a.Depth()))
	return ctx
}

// endTurnSpan ends the turn span of ctx.
func endTurnSpan(ctx context.Context, end session.TurnEnd, usage content.Usage) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.TurnEnd.String(end.Reason.Kind))
	span.SetAttributes(telemetry.Usage(usage)...)
	if f := end.Reason.Error; f != nil {
		telemetry.Fail(span, f.Code, f.Message)
	}
	span.End()
}

// The ends of spans that were not started.
func noModelCallEnd(*content.Assembler) {}
func noToolCallEnd(tool.Result)         {}

// traceModelCall starts a model call's span; the returned func ends it
// with the assembled answer (nil when the call could not be logged).
func (a *Agent) traceModelCall(ctx context.Context, req *llm.Request, step int) (context.Context, func(*content.Assembler)) {
	t := a.reg.deps.Tracer
	if t == nil {
		return ctx, noModelCallEnd
	}
	attrs := []attribute.KeyValue{telemetry.OperationName.String(telemetry.OpChat), telemetry.ProviderName.String(req.Provider),
		telemetry.RequestModel.String(req.Model), telemetry.ConversationID.String(req.SessionID), telemetry.Step.Int(step)}
	if req.MaxTokens > 0 {
		attrs = append(attrs, telemetry.RequestMaxTokens.Int(req.MaxTokens))
	}
	if t.Content() {
		attrs = append(attrs, telemetry.SystemInstructions.String(jsonText([]part{{Type: "text", Content: req.System}})),
			telemetry.InputMessages.String(jsonText(messages(req.Messages))))
	}
	ctx, span := t.Start(ctx, "chat "+req.Model, trace.SpanKindClient, attrs...)
	return ctx, func(asm *content.Assembler) {
		defer span.End()
		if asm == nil {
			telemetry.Fail(span, CodeCheckpoint, "the model call could not be logged")
			return
		}
		fin := asm.Finish()
		if u := asm.Usage(); u != nil {
			span.SetAttributes(telemetry.Usage(*u)...)
		}
		span.SetAttributes(telemetry.FinishReasons.StringSlice([]string{finishReason(fin.Kind)}))
		if t.Content() {
			span.SetAttributes(telemetry.OutputMessages.String(jsonText([]message{{Role: "assistant",
				Parts: parts(asm.Blocks()), FinishReason: finishReason(fin.Kind)}})))
		}
		if f := fin.Failure; f != nil {
			telemetry.Fail(span, f.Code, f.Message)
		}
	}
}

// finishReason names a finish kind as the conventions do.
func finishReason(k content.FinishKind) string {
	switch k {
	case content.FinishStop:
		return "stop"
	case content.FinishToolCalls:
		return "tool_call"
	case content.FinishMaxTokens:
		return "length"
	}
	return string(k)
}

// traceToolCall starts a tool call's span; the returned func ends it with
// the result.
func (a *Agent) traceToolCall(ctx context.Context, call content.Block) (context.Context, func(tool.Result)) {
	t := a.reg.deps.Tracer
	if t == nil {
		return ctx, noToolCallEnd
	}
	attrs := []attribute.KeyValue{telemetry.OperationName.String(telemetry.OpExecuteTool), telemetry.ToolName.String(call.Name),
		telemetry.ToolCallID.String(call.ID), telemetry.ToolType.String("function")}
	if t.Content() {
		attrs = append(attrs, telemetry.ToolArguments.String(call.Arguments))
	}
	ctx, span := t.Start(ctx, "execute_tool "+call.Name, trace.SpanKindInternal, attrs...)
	return ctx, func(res tool.Result) {
		defer span.End()
		outcome := "ok"
		if res.IsError {
			outcome = res.Code
			telemetry.Fail(span, res.Code, content.JoinText(res.Content))
		}
		span.SetAttributes(telemetry.ToolOutcome.String(outcome))
		if t.Content() {
			span.SetAttributes(telemetry.ToolResult.String(content.JoinText(res.Content)))
		}
	}
}

// The shapes of the conventions' message content attributes.
type (
	message struct {
		Role         string `json:"role"`
		Parts        []part `json:"parts"`
		FinishReason string `json:"finish_reason,omitempty"`
	}
	part struct {
		Type      string `json:"type"`
		Content   string `json:"content,omitempty"`
		ID        string `json:"id,omitempty"`
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments,omitempty"`
		Response  string `json:"response,omitempty"`
	}
)

func messages(ms []content.Message) []message {
	out := make([]message, 0, len(ms))
	for _, m := range ms {
		role := string(m.Role)
		if m.Source.Kind == content.SourceTool {
			role = "tool"
		}
		out = append(out, message{Role: role, Parts: parts(m.Content)})
	}
	return out
}

func parts(blocks []content.Block) []part {
	out := make([]part, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case content.TypeText, content.TypeReasoning:
			out = append(out, part{Type: string(b.Type), Content: b.Text})
		case content.TypeToolCall:
			out = append(out, part{Type: "tool_call", ID: b.ID, Name: b.Name, Arguments: b.Arguments})
		case content.TypeToolResult:
			out = append(out, part{Type: "tool_call_response", ID: b.ToolCallID, Response: content.JoinText(b.Content)})
		}
	}
	return out
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
