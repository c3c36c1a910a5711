package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// otlpReceiver is an OTLP/HTTP trace endpoint on loopback that decodes
// what it receives.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	pid           int64
	service       string
	name          string
	trace, parent string
	id            string
	attrs         map[string]string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	var msg collector.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(raw, &msg)
	}
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		var pid int64
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			switch kv.Key {
			case "process.pid":
				pid = kv.Value.GetIntValue()
			case "service.name":
				service = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, receivedSpan{pid: pid, service: service, name: s.Name, id: hex.EncodeToString(s.SpanId),
					trace: hex.EncodeToString(s.TraceId), parent: hex.EncodeToString(s.ParentSpanId), attrs: attrs(s)})
			}
		}
	}
	r.mu.Unlock()
	resp, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

func attrs(s *tracepb.Span) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		v := kv.Value.GetStringValue()
		if v == "" {
			v = strings.Trim(kv.Value.String(), " ")
		}
		out[kv.Key] = v
	}
	return out
}

// A real dsh run and its command: self child export their spans over
// OTLP/HTTP to the endpoint OTEL_EXPORTER_OTLP_ENDPOINT names, in one trace:
// the child's turn hangs under the parent's run of it. The model requests
// carry the trace context too. Without the variable nothing is traced or
// propagated.
func TestRunAndSelfChildExportOneTrace(t *testing.T) {
	var mu sync.Mutex
	var traceparents []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
		switch {
		case r.LastUser == "Say hello.":
			return llmtest.Reply{Text: "hello"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent_isolated", Arguments: `{"description":"greet","prompt":"Say hello."}`}}
		}
		return llmtest.Reply{Text: "The child said " + r.ToolResults[0]}
	})
	recv := &otlpReceiver{}
	collectorSrv := httptest.NewServer(recv)
	defer collectorSrv.Close()

	run := func(env map[string]string) {
		t.Helper()
		home := t.TempDir()
		if err := os.WriteFile(home+"/dsh.yaml", []byte(selfConfig), 0o600); err != nil {
			t.Fatal(err)
		}
		base := map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "DSH_HOME": home,
			"DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
		for k, v := range env {
			base[k] = v
		}
		if out, err := dshProcess(base, "run", "--cwd", t.TempDir(), "Delegate a greeting.").CombinedOutput(); err != nil {
			t.Fatalf("dsh run: %v\n%s", err, out)
		}
	}

	run(nil)
	mu.Lock()
	for _, tp := range traceparents {
		if tp != "" {
			t.Errorf("tracing off, a model request carried traceparent %q", tp)
		}
	}
	traceparents = nil
	mu.Unlock()

	run(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collectorSrv.URL, "OTEL_SERVICE_NAME": "dsh-test"})
	recv.mu.Lock()
	spans := recv.spans
	recv.mu.Unlock()
	byPID := map[int64][]receivedSpan{}
	byID := map[string]receivedSpan{}
	for _, s := range spans {
		byPID[s.pid] = append(byPID[s.pid], s)
		byID[s.id] = s
		if s.service != "dsh-test" {
			t.Errorf("span %q from service %q", s.name, s.service)
		}
	}
	if len(byPID) != 2 {
		t.Fatalf("spans from %d processes, want the run's and its child's: %+v", len(byPID), spans)
	}
	traceID := spans[0].trace
	for _, s := range spans {
		if s.trace != traceID {
			t.Errorf("span %q (pid %d) is in trace %s, want %s", s.name, s.pid, s.trace, traceID)
		}
	}
	var run0, childTurn receivedSpan
	for _, s := range spans {
		switch {
		case s.name == "invoke_agent isolated":
			run0 = s
		case s.name == "turn" && byID[s.parent].name == "invoke_agent isolated":
			childTurn = s
		}
	}
	if run0.id == "" || childTurn.id == "" {
		t.Fatalf("no child run span, or no child turn under it: %+v", spans)
	}
	if childTurn.pid == run0.pid {
		t.Fatalf("the child's turn was traced by the parent's process")
	}
	if childTurn.attrs["dsh.agent.depth"] != "int_value:1" {
		t.Errorf("child turn attributes %v", childTurn.attrs)
	}
	chats := 0
	for _, s := range byPID[childTurn.pid] {
		if strings.HasPrefix(s.name, "chat ") && s.parent == childTurn.id {
			chats++
		}
	}
	if chats != 1 {
		t.Errorf("%d model calls traced under the child's turn, want 1", chats)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(traceparents) != 3 {
		t.Fatalf("%d model requests, want 3", len(traceparents))
	}
	for _, tp := range traceparents {
		if parts := strings.Split(tp, "-"); len(parts) != 4 || parts[1] != traceID {
			t.Errorf("a model request carried traceparent %q, want one of trace %s", tp, traceID)
		}
	}
}

// grpcReceiver is an OTLP/gRPC trace service counting what it receives.
type grpcReceiver struct {
	collector.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (g *grpcReceiver) Export(_ context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				g.names = append(g.names, s.Name)
			}
		}
	}
	return &collector.ExportTraceServiceResponse{}, nil
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports over gRPC; spans are flushed
// before dsh exits.
func TestRunExportsOverGRPC(t *testing.T) {
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hi"} })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	recv := &grpcReceiver{}
	collector.RegisterTraceServiceServer(gs, recv)
	go gs.Serve(lis)
	defer gs.Stop()
	home := t.TempDir()
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test",
		"DEEPSEEK_BASE_URL": srv.URL, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String(), "OTEL_EXPORTER_OTLP_INSECURE": "true"}
	if out, err := dshProcess(env, "run", "--cwd", t.TempDir(), "hi").CombinedOutput(); err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	slices.Sort(recv.names)
	if want := []string{"chat deepseek-flash", "invoke_agent dsh", "turn"}; !slices.Equal(recv.names, want) {
		t.Fatalf("received spans %v, want %v", recv.names, want)
	}
}

// A tracing configuration dsh cannot use is a warning, not a failure.
func TestUnusableTracingConfigurationWarns(t *testing.T) {
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hi"} })
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL,
		"OTEL_TRACES_EXPORTER": "zipkin"}
	out, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "hi")
	if err != nil || strings.TrimSpace(out) != "hi" || !strings.Contains(errOut, `tracing is off: OTEL_TRACES_EXPORTER: dsh exports traces with otlp (or none), not "zipkin"`) {
		t.Fatalf("run: %v\nstdout %q\nstderr %s", err, out, errOut)
	}
}

// A collector that is down costs the run nothing but a warning: the turn
// completes, the exit waits for the spans at most flushTimeout.
func TestRunWithACollectorDown(t *testing.T) {
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hi"} })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + lis.Addr().String()
	lis.Close() // nothing listens there now
	home := t.TempDir()
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test",
		"DEEPSEEK_BASE_URL": srv.URL, "OTEL_EXPORTER_OTLP_ENDPOINT": down}
	cmd := dshProcess(env, "run", "--cwd", t.TempDir(), "hi")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || strings.TrimSpace(stdout.String()) != "hi" {
		t.Fatalf("dsh run: %v\nstdout %q\nstderr %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "dsh: warning: tracing: some spans were not exported") {
		t.Fatalf("no warning about the lost spans:\n%s", stderr.String())
	}
}
