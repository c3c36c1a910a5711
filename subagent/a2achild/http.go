package a2achild

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// httpClient is one run's HTTP connections: closed with the run, so that
// none outlives it.
type httpClient struct{ tr *http.Transport }

func newHTTP() *httpClient {
	return &httpClient{tr: http.DefaultTransport.(*http.Transport).Clone()}
}

// plain is the client for the public card: no credential.
func (h *httpClient) plain() *http.Client { return &http.Client{Transport: h.tr} }

// authed is the client for the agent's endpoint: it sends the credential
// as ep says, follows no redirect (a redirect could carry the credential
// elsewhere), and bounds every response that is not an event stream.
func (h *httpClient) authed(ep endpoint, token string) *http.Client {
	return &http.Client{
		Transport: &authTransport{next: h.tr, header: ep.header, value: ep.prefix + token, set: token != ""},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the agent's endpoint redirected: refusing to follow")
		},
	}
}

func (h *httpClient) close() { h.tr.CloseIdleConnections() }

type authTransport struct {
	next          http.RoundTripper
	header, value string
	set           bool
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.set {
		req = req.Clone(req.Context())
		req.Header.Set(t.header, t.value)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: MaxResponse}
	}
	return resp, nil
}

// boundedBody fails a read past its bound instead of buffering on.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the agent's response is larger than %d bytes", MaxResponse)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
