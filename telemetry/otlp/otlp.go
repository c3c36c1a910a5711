// Package otlp turns on dsh's tracing from the standard OpenTelemetry
// environment: the OpenTelemetry SDK, batching spans to an OTLP exporter
// over HTTP (protobuf) or gRPC, flushed at shutdown.
//
// The exporter is this package's own (encode.go, export.go): the
// official ones link the generated OTLP protobuf packages and gRPC, whose
// initialisation cost every dsh process about 2 ms at start-up, traced or
// not (an ACP child is ready in about 9 ms). This one writes the same wire
// format with the standard library.
package otlp

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dsh-go/dsh/telemetry"
)

// Enabled reports whether the environment asks for traces: OTEL_SDK_DISABLED
// is not true, and OTEL_TRACES_EXPORTER is otlp, or unset with an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// set. It reads nothing else, so that a process without tracing pays no
// more than these lookups.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	exporters := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if exporters == "" {
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	}
	on := false
	for _, e := range strings.Split(exporters, ",") {
		switch e = strings.TrimSpace(e); e {
		case "otlp":
			on = true
		case "none", "":
		default:
			return false, fmt.Errorf("OTEL_TRACES_EXPORTER: dsh exports traces with otlp (or none), not %q", e)
		}
	}
	return on, nil
}

// Setup returns the tracer the environment configures, or nil when it
// configures none, and the shutdown that flushes the spans still
// buffered. The exporter follows the OTLP exporter variables (endpoint,
// headers, timeout, compression, insecure, certificates; each also in its
// _TRACES_ form);
// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL picks http/protobuf (the default) or
// grpc; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES describe the process
// (service.name defaults to dsh); OTEL_TRACES_SAMPLER samples; and
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true records prompts,
// answers and tool input and output in spans.
func Setup(ctx context.Context, getenv func(string) string, version string) (*telemetry.Tracer, func(context.Context) error, error) {
	none := func(context.Context) error { return nil }
	on, err := Enabled(getenv)
	if err != nil || !on {
		return nil, none, err
	}
	p := protocol(getenv)
	if p != "grpc" && p != "http/protobuf" {
		return nil, none, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: dsh exports grpc or http/protobuf, not %q", p)
	}
	exp, err := newExporter(getenv, p)
	if err != nil {
		return nil, none, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "dsh"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithProcessPID(), resource.WithTelemetrySDK())
	if err != nil {
		res = resource.Default() // a malformed OTEL_RESOURCE_ATTRIBUTES costs the attributes, not the traces
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	content := strings.EqualFold(strings.TrimSpace(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")), "true")
	return telemetry.New(tp, telemetry.Options{Content: content}), tp.Shutdown, nil
}

// protocol returns the OTLP protocol for traces.
func protocol(getenv func(string) string) string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(k)); p != "" {
			return p
		}
	}
	return "http/protobuf"
}
