package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/internal/proc"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// listening is a `dsh mcp --listen` process and what it said on stderr
// before it served.
type listening struct {
	cmd    *exec.Cmd
	said   []string // stderr lines up to the one that says where it serves
	where  string   // the URL, or the socket's path
	stderr *lines
}

// startListening starts `dsh mcp --listen listen` with args and waits
// until it serves.
func startListening(t *testing.T, home, listen string, args ...string) *listening {
	t.Helper()
	cmd := exec.Command(dshBinary, append([]string{"mcp", "--listen", listen, "--cwd", t.TempDir()}, args...)...)
	cmd.Env = mcpEnv(home, childModel(t))
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &listening{cmd: cmd, stderr: &lines{}}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(pipe)
	for l.where == "" && sc.Scan() {
		line := sc.Text()
		l.said = append(l.said, line)
		if _, url, ok := strings.Cut(line, "serving MCP at "); ok {
			l.where = url
		} else if _, rest, ok := strings.Cut(line, "serving MCP on the Unix socket "); ok {
			l.where, _, _ = strings.Cut(rest, " (")
		}
	}
	if l.where == "" {
		cmd.Wait()
		t.Fatalf("dsh mcp --listen %s did not serve:\n%s", listen, strings.Join(l.said, "\n"))
	}
	go io.Copy(l.stderr, pipe)
	return l
}

// stop ends the server with SIGTERM and checks that it exits cleanly.
func (l *listening) stop(t *testing.T) {
	t.Helper()
	l.cmd.Process.Signal(syscall.SIGTERM)
	if err := l.cmd.Wait(); err != nil {
		t.Errorf("dsh mcp --listen: %v\n%s", err, l.stderr.String())
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// initialize is a raw MCP initialize request.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"nobody","version":"1"}}}`

// post sends body to url with the Authorization header auth (none when
// empty) and returns the status.
func post(t *testing.T, client *http.Client, url, auth, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// N5: `dsh mcp --listen` served every local user. Now a client needs the
// bearer token dsh generated (mode 0600 in $DSH_HOME, printed once): no
// token and a wrong one get 401 before MCP sees the request; the right one
// delegates. A second start reuses the token without printing it, and a
// token file others can read is refused.
func TestDshMCPListenNeedsTheToken(t *testing.T) {
	home := t.TempDir()
	l := startListening(t, home, "127.0.0.1:0")
	file := filepath.Join(home, "mcp-token")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	said := strings.Join(l.said, "\n")
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 || len(token) < 32 ||
		!strings.Contains(said, "generated a bearer token (shown this once, kept in "+file+"): "+token) ||
		!strings.Contains(said, `"Authorization: Bearer <token>"`) {
		t.Fatalf("token %q in %s (%v), said:\n%s", token, file, fi.Mode(), said)
	}
	for _, auth := range []string{"", "Bearer " + strings.Repeat("0", len(token)), "Basic " + token, token} {
		if code := post(t, http.DefaultClient, l.where, auth, initialize); code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, code)
		}
	}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "nobody", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: l.where}, nil); err == nil {
		t.Error("a client without the token connected")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "owner", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: l.where,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	if res, err := delegate(context.Background(), cs, "with the token"); err != nil || mcpText(res) != "child: with the token" {
		t.Errorf("delegate: %+v %v", res, err)
	}
	cs.Close()
	l.stop(t)

	again := startListening(t, home, "127.0.0.1:0")
	if said := strings.Join(again.said, "\n"); strings.Contains(said, token) || !strings.Contains(said, "with the token in "+file) {
		t.Errorf("second start said:\n%s", said)
	}
	again.stop(t)

	os.Chmod(file, 0o644)
	_, _, err = runCLI(t, map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "k"}, "mcp", "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "has mode 0644") {
		t.Errorf("a token file others can read: %v", err)
	}
	other := filepath.Join(t.TempDir(), "tok")
	_, _, err = runCLI(t, map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "k"}, "mcp", "--token-file", other)
	if err == nil || !strings.Contains(err.Error(), "--token-file is for --listen") {
		t.Errorf("--token-file over stdio: %v", err)
	}
}

// `dsh mcp --listen unix:PATH` serves a socket only its owner can open
// (mode 0600, made so before it is reachable), without a token, and
// removes it on exit.
func TestDshMCPListenUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "mcp.sock")
	l := startListening(t, t.TempDir(), "unix:"+sock)
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 || l.where != sock {
		t.Fatalf("socket %s: %v %v (served at %q)", sock, fi.Mode(), err, l.where)
	}
	if entries, _ := os.ReadDir(filepath.Dir(sock)); len(entries) != 1 {
		t.Errorf("left beside the socket: %v", entries)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "owner", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://localhost/mcp", HTTPClient: client}, nil)
	if err != nil {
		t.Fatalf("connect over the socket: %v", err)
	}
	if res, err := delegate(context.Background(), cs, "over a socket"); err != nil || mcpText(res) != "child: over a socket" {
		t.Errorf("delegate: %+v %v", res, err)
	}
	cs.Close()
	l.stop(t)
	if _, err := os.Lstat(sock); err == nil {
		t.Error("the socket is left after exit")
	}
	if _, _, err := runCLI(t, map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "k"}, "mcp", "--listen", "unix:"+filepath.Dir(sock)); err == nil ||
		!strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("a directory as the socket: %v", err)
	}
}
