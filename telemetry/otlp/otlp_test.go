package otlp

import (
	"compress/gzip"
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // the collector reads gzip as real ones do
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spans makes two finished spans, parent and child, with every kind of
// attribute, an event, a link and an error status.
func spans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	rec := recorder{add: func(s sdktrace.ReadOnlySpan) { got = append(got, s) }}
	res := resource.NewSchemaless(attribute.String("service.name", "dsh"), attribute.Int("process.pid", 42))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("github.com/dsh-go/dsh")
	ctx, parent := tr.Start(context.Background(), "turn", trace.WithSpanKind(trace.SpanKindInternal))
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	_, child := tr.Start(ctx, "chat m1", trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(trace.Link{SpanContext: linked}))
	child.SetAttributes(attribute.String("s", "ü"), attribute.Int64("i", -7), attribute.Float64("f", 1.5), attribute.Bool("b", true),
		attribute.StringSlice("ss", []string{"stop", "length"}), attribute.Int64Slice("is", []int64{1, math.MaxInt64}),
		attribute.Bool("false", false))
	child.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 1)))
	child.SetStatus(codes.Error, "model down")
	child.End()
	parent.End()
	return got
}

type recorder struct{ add func(sdktrace.ReadOnlySpan) }

func (r recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r recorder) OnEnd(s sdktrace.ReadOnlySpan)                   { r.add(s) }
func (r recorder) Shutdown(context.Context) error                  { return nil }
func (r recorder) ForceFlush(context.Context) error                { return nil }

// What encodeRequest writes is what the official OTLP protobuf types read.
func TestEncodingDecodesWithTheOfficialTypes(t *testing.T) {
	in := spans(t)
	var req collector.ExportTraceServiceRequest
	if err := proto.Unmarshal(encodeRequest(in), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.ResourceSpans) != 1 || len(req.ResourceSpans[0].ScopeSpans) != 1 {
		t.Fatalf("%d resource spans", len(req.ResourceSpans))
	}
	rs := req.ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		res[kv.Key] = kv.Value.String()
	}
	if !strings.Contains(res["service.name"], "dsh") || !strings.Contains(res["process.pid"], "42") {
		t.Errorf("resource %v", res)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != "github.com/dsh-go/dsh" || len(ss.Spans) != 2 {
		t.Fatalf("scope %v, %d spans", ss.Scope, len(ss.Spans))
	}
	var child, parent *tracepb.Span
	for _, s := range ss.Spans {
		if s.Name == "chat m1" {
			child = s
		} else {
			parent = s
		}
	}
	want := in[0] // the child ended first
	sc := want.SpanContext()
	tid, sid, psid := sc.TraceID(), sc.SpanID(), want.Parent().SpanID()
	switch {
	case string(child.TraceId) != string(tid[:]) || string(child.SpanId) != string(sid[:]) || string(child.ParentSpanId) != string(psid[:]):
		t.Errorf("ids %x %x %x", child.TraceId, child.SpanId, child.ParentSpanId)
	case string(parent.SpanId) != string(psid[:]) || len(parent.ParentSpanId) != 0:
		t.Errorf("parent ids %x %x", parent.SpanId, parent.ParentSpanId)
	case child.Kind != tracepb.Span_SPAN_KIND_CLIENT || parent.Kind != tracepb.Span_SPAN_KIND_INTERNAL:
		t.Errorf("kinds %v %v", child.Kind, parent.Kind)
	case child.StartTimeUnixNano != uint64(want.StartTime().UnixNano()) || child.EndTimeUnixNano != uint64(want.EndTime().UnixNano()):
		t.Errorf("times %d %d", child.StartTimeUnixNano, child.EndTimeUnixNano)
	case child.Status.Code != tracepb.Status_STATUS_CODE_ERROR || child.Status.Message != "model down":
		t.Errorf("status %v", child.Status)
	case parent.Status.Code != tracepb.Status_STATUS_CODE_UNSET:
		t.Errorf("parent status %v", parent.Status)
	case len(child.Events) != 1 || child.Events[0].Name != "retry" || child.Events[0].Attributes[0].Value.GetIntValue() != 1:
		t.Errorf("events %v", child.Events)
	case len(child.Links) != 1 || child.Links[0].TraceId[0] != 9 || child.Links[0].SpanId[0] != 8:
		t.Errorf("links %v", child.Links)
	case child.Flags&1 != 1 || child.Flags&0x100 == 0:
		t.Errorf("flags %x", child.Flags)
	}
	attrs := map[string]string{}
	for _, kv := range child.Attributes {
		attrs[kv.Key] = kv.Value.String()
	}
	for k, v := range map[string]string{"s": `string_value:"ü"`, "i": "int_value:-7", "f": "double_value:1.5", "b": "bool_value:true",
		"false": "bool_value:false", "ss": `values:{string_value:"stop"} values:{string_value:"length"}`,
		"is": "values:{int_value:1} values:{int_value:9223372036854775807}"} {
		if got := strings.Join(strings.Fields(attrs[k]), " "); !strings.Contains(got, v) {
			t.Errorf("attribute %s = %s, want %s", k, got, v)
		}
	}
}

// The HTTP exporter posts protobuf to the traces endpoint with the
// configured headers, gzipped when asked, and retries while the collector
// is unavailable.
func TestHTTPExport(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var got collector.ExportTraceServiceRequest
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			body, _ = gzip.NewReader(r.Body)
		}
		raw, _ := io.ReadAll(body)
		mu.Lock()
		defer mu.Unlock()
		header = r.Header.Clone()
		if r.URL.Path != "/base/v1/traces" || proto.Unmarshal(raw, &got) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL + "/base/", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, tenant = t1",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip"}
	e, err := newExporter(func(k string) string { return env[k] }, "http/protobuf")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	if err := e.ExportSpans(context.Background(), spans(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls.Load() != 2 || len(got.ResourceSpans) != 1 {
		t.Fatalf("%d calls, %d resource spans", calls.Load(), len(got.ResourceSpans))
	}
	if header.Get("Api-Key") != "a b" || header.Get("Tenant") != "t1" || header.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("headers %v", header)
	}
}

// A collector that refuses the export is an error naming its answer; one
// that stays unavailable is given up at the timeout.
func TestHTTPExportFailures(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "quota exceeded", http.StatusForbidden)
	}))
	defer refuse.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": refuse.URL}, "403 Forbidden: quota exceeded"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": down.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "300"}, "context deadline exceeded"},
	} {
		e, err := newExporter(func(k string) string { return c.env[k] }, "http/protobuf")
		if err != nil {
			t.Fatal(err)
		}
		err = e.ExportSpans(context.Background(), spans(t))
		e.Shutdown(context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want %q", err, c.want)
		}
	}
}

// traceService is an OTLP/gRPC collector that fails its first call.
type traceService struct {
	collector.UnimplementedTraceServiceServer
	calls atomic.Int32
	mu    sync.Mutex
	got   []*collector.ExportTraceServiceRequest
	md    metadata.MD
}

func (s *traceService) Export(ctx context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	if s.calls.Add(1) == 1 {
		return nil, status.Error(grpccodes.Unavailable, "warming up")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, req)
	s.md, _ = metadata.FromIncomingContext(ctx)
	return &collector.ExportTraceServiceResponse{}, nil
}

// The gRPC exporter speaks to a real gRPC server: cleartext HTTP/2,
// gzip, metadata from the headers variable, a retry on UNAVAILABLE; a
// permanent status is an error with its message.
func TestGRPCExport(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	svc := &traceService{}
	collector.RegisterTraceServiceServer(gs, svc)
	go gs.Serve(lis)
	defer gs.Stop()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": lis.Addr().String(), "OTEL_EXPORTER_OTLP_INSECURE": "true",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_HEADERS": "x-team=dsh"}
	e, err := newExporter(func(k string) string { return env[k] }, "grpc")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	if err := e.ExportSpans(context.Background(), spans(t)); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	if len(svc.got) != 1 || len(svc.got[0].ResourceSpans[0].ScopeSpans[0].Spans) != 2 || svc.md.Get("x-team")[0] != "dsh" {
		t.Errorf("received %v, metadata %v", svc.got, svc.md)
	}
	svc.mu.Unlock()

	gs2 := grpc.NewServer()
	collector.RegisterTraceServiceServer(gs2, collector.UnimplementedTraceServiceServer{})
	lis2, _ := net.Listen("tcp", "127.0.0.1:0")
	go gs2.Serve(lis2)
	defer gs2.Stop()
	env = map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://" + lis2.Addr().String()}
	e2, err := newExporter(func(k string) string { return env[k] }, "grpc")
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Shutdown(context.Background())
	if err := e2.ExportSpans(context.Background(), spans(t)); err == nil || !strings.Contains(err.Error(), "status 12") {
		t.Fatalf("an unimplemented service: %v", err)
	}
}

func TestSettings(t *testing.T) {
	for _, c := range []struct {
		env       map[string]string
		on        bool
		wantErr   string
		protocol  string
		wantURL   string
		configErr string
	}{
		{env: map[string]string{}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, wantURL: "http://c:4318/v1/traces"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c/x"}, on: true, wantURL: "https://c/x"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, wantURL: "http://localhost:4318/v1/traces"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true,
			protocol: "grpc", wantURL: "http://localhost:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, on: true,
			protocol: "grpc", wantURL: "https://c:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}},
		{env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, wantErr: `not "jaeger"`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, on: true, configErr: "want an http:// or https:// URL"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, on: true, configErr: "want milliseconds"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, on: true, configErr: "not key=value"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, on: true, configErr: "gzip or none"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent"}, on: true, configErr: "CERTIFICATE"},
	} {
		getenv := func(k string) string { return c.env[k] }
		on, err := Enabled(getenv)
		if on != c.on || (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%v: on %t, err %v", c.env, on, err)
		}
		if !on {
			continue
		}
		e, err := newExporter(getenv, protocol(getenv))
		if c.configErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.configErr) {
				t.Errorf("%v: err %v, want %q", c.env, err, c.configErr)
			}
			continue
		}
		if err != nil || e.url != c.wantURL || e.grpc != (c.protocol == "grpc") {
			t.Errorf("%v: url %q grpc %t err %v", c.env, e.url, e.grpc, err)
		}
	}
}

// Setup's shutdown flushes what the batcher holds; without configuration
// Setup makes nothing.
func TestSetupFlushesAtShutdown(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req collector.ExportTraceServiceRequest
		if proto.Unmarshal(raw, &req) == nil {
			got.Add(int32(len(req.ResourceSpans[0].ScopeSpans[0].Spans)))
		}
	}))
	defer srv.Close()
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}
	tr, shutdown, err := Setup(context.Background(), func(k string) string { return env[k] }, "test")
	if err != nil || tr == nil {
		t.Fatal(tr, err)
	}
	for range 3 {
		_, s := tr.Start(context.Background(), "x", trace.SpanKindInternal)
		s.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil || got.Load() != 3 {
		t.Fatalf("shutdown: %v; %d spans received", err, got.Load())
	}
	tr, shutdown, err = Setup(context.Background(), func(string) string { return "" }, "test")
	if tr != nil || err != nil || shutdown(context.Background()) != nil {
		t.Fatalf("no configuration: %v %v", tr, err)
	}
}
