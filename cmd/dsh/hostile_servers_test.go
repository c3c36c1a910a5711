package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/session/jsonl"
)

// bearerAuth adds an Authorization header to every request.
type bearerAuth struct {
	token string
	next  http.RoundTripper
}

func (b bearerAuth) RoundTrip(r *http.Request) (*http.Response, error) {
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
			HTTPClient: &http.Client{Transport: bearerAuth{token, http.DefaultTransport}}}, nil)
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

// rawClient speaks raw JSON-RPC lines to a `dsh mcp` process over stdio.
type rawClient struct {
	t     *testing.T
	stdin io.WriteCloser
	out   chan map[string]json.RawMessage
}

func (c *rawClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// response waits for the response whose id is id (raw JSON), skipping
// notifications.
func (c *rawClient) response(id string) map[string]json.RawMessage {
	c.t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-c.out:
			if !ok {
				c.t.Fatalf("dsh mcp ended its output while waiting for the response to %s", id)
			}
			if _, isRequest := m["method"]; !isRequest && string(m["id"]) == id {
				return m
			}
		case <-timeout:
			c.t.Fatalf("no response to %s", id)
		}
	}
}

// N9: `dsh mcp` over stdio ended on the first malformed line, and a call in
// flight got no answer. Now each line in the report's table gets a JSON-RPC
// error (-32700 or -32600, naming the problem), a 12 MiB frame is refused
// naming its size without reaching the model, and the server goes on: a
// ping is answered, and the foreground call and the background child
// started before the bad lines finish.
func TestDshMCPStdioAnswersBadLines(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 2)
	var longest atomic.Int64
	model := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		longest.Store(max(longest.Load(), int64(len(r.Body))))
		if strings.HasPrefix(r.LastUser, "slow") {
			started <- r.LastUser
			<-release
		}
		return llmtest.Reply{Text: "child: " + r.LastUser}
	})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the model server's cleanup waits for its handlers
	home := t.TempDir()
	cmd := exec.Command(dshBinary, "mcp", "--cwd", t.TempDir())
	cmd.Env = mcpEnv(home, model.URL)
	stderr := &lines{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	c := &rawClient{t: t, stdin: stdin, out: make(chan map[string]json.RawMessage, 64)}
	go func() {
		defer close(c.out)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("dsh mcp wrote %q: %v", sc.Text(), err)
				continue
			}
			c.out <- m
		}
	}()

	c.send(initialize)
	c.response("1")
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"subagent","arguments":{"description":"fg","prompt":"slow fg"}}}`)
	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"subagent","arguments":{"description":"bg","prompt":"slow bg","run_in_background":true}}}`)
	if r := c.response("3"); !strings.Contains(string(r["result"]), "started background subagent task") {
		t.Fatalf("background start: %s\n%s", r["result"], stderr.String())
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(60 * time.Second):
			t.Fatalf("the children did not reach the model\n%s", stderr.String())
		}
	}

	big := `{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"subagent","arguments":{"description":"big","prompt":"` +
		strings.Repeat("x", 12<<20) + `"}}}`
	for _, tc := range []struct {
		line, id string
		code     int
		says     string
	}{
		{"not json", "null", -32700, "invalid JSON"},
		{"[1,2]", "null", -32600, "batches are not supported"},
		{`{"jsonrpc":"2.0"}`, "null", -32600, "needs a method or an id"},
		{"\xff\xfe", "null", -32700, "invalid UTF-8"},
		{strings.Repeat("[", 100000), "null", -32700, "invalid JSON"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", -32600, `"id" must be a string or a number`},
		{`{"jsonrpc":"1.0","id":9,"method":"ping"}`, "9", -32600, `"jsonrpc" must be "2.0"`},
		{`{"jsonrpc":"2.0","id":10,"method":`, "null", -32700, "invalid JSON"},
		{big, "50", -32600, fmt.Sprintf("frame of %d bytes is over the limit of %d bytes", len(big), 8<<20)},
	} {
		c.send(tc.line)
		r := c.response(tc.id)
		var e struct {
			Code    int
			Message string
		}
		if err := json.Unmarshal(r["error"], &e); err != nil || e.Code != tc.code || !strings.Contains(e.Message, tc.says) {
			t.Errorf("%.40q: %s, want code %d saying %q", tc.line, r["error"], tc.code, tc.says)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":11,"method":"ping"}`)
	if r := c.response("11"); string(r["result"]) != "{}" {
		t.Errorf("ping after the bad lines: %v", r)
	}
	releaseOnce()
	if r := c.response("2"); !strings.Contains(string(r["result"]), "child: slow fg") {
		t.Errorf("the call in flight: %s %s", r["result"], r["error"])
	}
	c.send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"subagent-1","wait":true,"timeout_ms":30000}}}`)
	if r := c.response("12"); !strings.Contains(string(r["result"]), "child: slow bg") {
		t.Errorf("the background child: %s %s", r["result"], r["error"])
	}
	if n := longest.Load(); n > 1<<20 {
		t.Errorf("a request of %d bytes reached the model", n)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("dsh mcp: %v\n%s", err, stderr.String())
	}
	if err := proc.NoChildren(); err != nil {
		t.Error(err)
	}
}

// N14: a FIFO named session.jsonl in the store hung `dsh sessions list`,
// `dsh sessions show` and `dsh run --continue`. Now each skips or refuses
// it at once: list shows the real session only, show and --resume find no
// session in the FIFO, and --continue goes on with the real one.
func TestSessionStoreFIFO(t *testing.T) {
	model := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "answered " + r.LastUser} })
	home, project := t.TempDir(), t.TempDir()
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, dshBinary, args...)
		cmd.Dir, cmd.Env = project, mcpEnv(home, model.URL)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("dsh %s hangs", strings.Join(args, " "))
		}
		return string(out), err
	}
	if out, err := run("run", "first"); err != nil || !strings.Contains(out, "answered first") {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	id := "cccccccc-1111-2222-3333-444444444444"
	fifo := filepath.Join(home, "sessions", jsonl.ProjectKey(project), jsonl.EncodeID(id), jsonl.FileName)
	os.MkdirAll(filepath.Dir(fifo), 0o700)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run("sessions", "list"); err != nil || strings.Contains(out, "cccccccc") || !strings.Contains(out, "first") {
		t.Errorf("sessions list: %v\n%s", err, out)
	}
	if out, err := run("sessions", "show", "cccccccc"); err == nil || !strings.Contains(out, `no session "cccccccc"`) {
		t.Errorf("sessions show: %v\n%s", err, out)
	}
	if out, err := run("run", "--resume", id, "x"); err == nil || !strings.Contains(out, "no stored session has an id starting with") {
		t.Errorf("run --resume of the FIFO's id: %v\n%s", err, out)
	}
	if out, err := run("run", "--continue", "again"); err != nil || !strings.Contains(out, "answered again") {
		t.Errorf("run --continue: %v\n%s", err, out)
	}
}

// N18: `--resume ""` (an unset shell variable) started a new session, and
// `dsh sessions show ""` showed a session by the empty prefix. Both are
// errors naming the problem now.
func TestEmptySessionID(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": "http://127.0.0.1:1"}
	for _, args := range [][]string{{"run", "--resume", "", "hi"}, {"run", "-r", "", "hi"}, {"chat", "--resume", ""}} {
		if _, _, err := runCLI(t, env, args...); err == nil || !strings.Contains(err.Error(), "--resume: the session id is empty") {
			t.Errorf("dsh %q: %v", args, err)
		}
	}
	if _, _, err := runCLI(t, env, "sessions", "show", ""); err == nil || !strings.Contains(err.Error(), "the session id is empty") {
		t.Errorf("dsh sessions show \"\": %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "sessions")); len(entries) > 0 {
		t.Errorf("a session was stored: %v", entries)
	}
}
