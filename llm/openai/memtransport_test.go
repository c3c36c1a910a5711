package openai

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
)

// memTransport serves each request with a handler in this process, the
// response streaming through an io.Pipe. Unlike a loopback socket, every
// wait in the exchange is on channels, so a synctest bubble's fake clock
// covers it: an idle timer or a backoff fires when the bubble is blocked,
// not after real time. The handler's request context ends when the
// client's does or the client closes the body, as a server's would.
type memTransport http.HandlerFunc

func (h memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &memWriter{header: http.Header{}, body: pw, sent: make(chan struct{})}
	go func() {
		defer cancel()
		h(w, req.WithContext(ctx))
		if req.Body != nil {
			req.Body.Close()
		}
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })
	select {
	case <-w.sent:
		return &http.Response{StatusCode: w.status, Header: w.sentHeader, Body: &memBody{pr, cancel}, Request: req}, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// memWriter is the handler's side of a memTransport exchange.
type memWriter struct {
	header     http.Header
	body       *io.PipeWriter
	once       sync.Once
	sent       chan struct{} // closed once the status and sentHeader are set
	status     int
	sentHeader http.Header
}

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sentHeader = code, w.header.Clone()
		close(w.sent)
	})
}

func (w *memWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush makes the writer an http.Flusher; a pipe write is delivered as is.
func (w *memWriter) Flush() {}

// memBody is the client's side: closing it ends the handler's request.
type memBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *memBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// newMemModel is newModel over a memTransport, for tests in a bubble.
func newMemModel(t testing.TB, h http.HandlerFunc, mod func(*Config)) *Model {
	t.Helper()
	return modelOn(t, "http://model.test", &http.Client{Transport: memTransport(h)}, mod)
}
