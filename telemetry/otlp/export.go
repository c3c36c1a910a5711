package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP endpoint: over HTTP as protobuf, or as
// gRPC's unary TraceService/Export call over HTTP/2.
type exporter struct {
	client  *http.Client
	url     string
	grpc    bool
	headers http.Header
	gzip    bool
	timeout time.Duration
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// settings reads the OTLP exporter variables for traces: the
// OTEL_EXPORTER_OTLP_TRACES_* one when set, else the OTEL_EXPORTER_OTLP_*
// one.
type settings func(name string) string

func (s settings) get(name string) string {
	if v := strings.TrimSpace(s("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
		return v
	}
	return strings.TrimSpace(s("OTEL_EXPORTER_OTLP_" + name))
}

// newExporter configures an exporter for protocol ("grpc" or
// "http/protobuf") from the environment, as the OTLP exporter
// specification says: endpoint, headers, timeout, compression, insecure
// and certificates.
func newExporter(getenv func(string) string, protocol string) (*exporter, error) {
	env := settings(getenv)
	e := &exporter{grpc: protocol == "grpc", headers: http.Header{}, timeout: 10 * time.Second}
	endpoint, err := e.endpoint(getenv)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL", endpoint)
	}
	e.url = endpoint
	if e.grpc {
		e.url = strings.TrimSuffix(endpoint, "/") + "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	}
	if h := env.get("HEADERS"); h != "" {
		for _, kv := range strings.Split(h, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %q is not key=value", kv)
			}
			if dv, err := url.PathUnescape(v); err == nil {
				v = dv
			}
			e.headers.Add(k, v)
		}
	}
	if t := env.get("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT: want milliseconds, got %q", t)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := env.get("COMPRESSION"); c {
	case "gzip":
		e.gzip = true
	case "", "none":
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION: want gzip or none, got %q", c)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tr.TLSClientConfig, err = tlsConfig(env); err != nil {
		return nil, err
	}
	if e.grpc { // gRPC is HTTP/2 only: with TLS (ALPN h2), or cleartext with prior knowledge
		p := new(http.Protocols)
		if u.Scheme == "http" {
			p.SetUnencryptedHTTP2(true)
		} else {
			p.SetHTTP2(true)
		}
		tr.Protocols = p
	}
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// endpoint returns the URL spans are sent to: the traces endpoint as it
// is, else the generic one (plus /v1/traces over HTTP), else the default
// collector's. A gRPC endpoint without a scheme is https, or http when
// OTEL_EXPORTER_OTLP_INSECURE is true.
func (e *exporter) endpoint(getenv func(string) string) (string, error) {
	traces, generic := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")), strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	var ep string
	switch {
	case traces != "":
		ep = traces
	case generic != "" && e.grpc:
		ep = generic
	case generic != "":
		ep = strings.TrimSuffix(generic, "/") + "/v1/traces"
	case e.grpc:
		ep = "http://localhost:4317"
	default:
		ep = "http://localhost:4318/v1/traces"
	}
	if e.grpc && !strings.Contains(ep, "://") {
		scheme := "https://"
		if strings.EqualFold(settings(getenv).get("INSECURE"), "true") {
			scheme = "http://"
		}
		ep = scheme + ep
	}
	return ep, nil
}

// tlsConfig reads the certificate variables: a CA to trust, and a client
// certificate and key.
func tlsConfig(env settings) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := env.get("CERTIFICATE"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: no certificate in %s", ca)
		}
		cfg.RootCAs = pool
	}
	cert, key := env.get("CLIENT_CERTIFICATE"), env.get("CLIENT_KEY")
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE/CLIENT_KEY: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// ExportSpans implements sdktrace.SpanExporter: one request, retried with
// backoff while the collector says it is busy, within the timeout.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body := encodeRequest(spans)
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	if e.grpc {
		frame := make([]byte, 5, 5+len(body))
		if e.gzip {
			frame[0] = 1
		}
		binary.BigEndian.PutUint32(frame[1:], uint32(len(body)))
		body = append(frame, body...)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay *= 2 {
		retry, err := e.send(ctx, body)
		if err == nil || !retry {
			return err
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", context.Cause(ctx), err)
		}
	}
}

// send makes one request and reports whether a failure may be retried.
func (e *exporter) send(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	for k, vs := range e.headers {
		req.Header[k] = vs
	}
	if e.grpc {
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		if e.gzip {
			req.Header.Set("Grpc-Encoding", "gzip")
		}
	} else {
		req.Header.Set("Content-Type", "application/x-protobuf")
		if e.gzip {
			req.Header.Set("Content-Encoding", "gzip")
		}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return true, fmt.Errorf("OTLP export to %s: %w", e.url, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if e.grpc {
		return grpcStatus(resp)
	}
	switch {
	case resp.StatusCode/100 == 2:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return true, fmt.Errorf("OTLP export to %s: %s", e.url, resp.Status)
	}
	return false, fmt.Errorf("OTLP export to %s: %s: %s", e.url, resp.Status, bytes.TrimSpace(answer))
}

// grpcStatus reads a gRPC call's outcome from its trailers (or headers,
// for a trailers-only answer).
func grpcStatus(resp *http.Response) (retry bool, err error) {
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode == http.StatusServiceUnavailable, fmt.Errorf("OTLP gRPC export: HTTP %s", resp.Status)
	}
	status, msg := resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
	if status == "" {
		status, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	code, err := strconv.Atoi(status)
	switch {
	case err != nil:
		return false, errors.New("OTLP gRPC export: the answer has no grpc-status")
	case code == 0:
		return false, nil
	}
	if m, err := url.PathUnescape(msg); err == nil {
		msg = m
	}
	switch code {
	case 1, 4, 10, 11, 14, 15: // cancelled, deadline exceeded, aborted, out of range, unavailable, data loss
		retry = true
	}
	return retry, fmt.Errorf("OTLP gRPC export: status %d: %s", code, msg)
}

// Shutdown implements sdktrace.SpanExporter.
func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}
