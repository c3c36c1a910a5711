package acpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

// raw is a client that speaks raw frames to a server.
type raw struct {
	t  *testing.T
	in io.Writer
	sc *bufio.Scanner
}

// frame is a decoded server frame.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data"`
	} `json:"error"`
}

func rawClient(t *testing.T, opts acpserver.Options, model llm.Model) *raw {
	t.Helper()
	srv := start(t, opts, model)
	// Runs before start's cleanup closes the client's input: whatever the
	// server still writes is drained until it closes its output.
	t.Cleanup(func() { go io.Copy(io.Discard, srv.out) })
	sc := bufio.NewScanner(srv.out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &raw{t: t, in: srv.in, sc: sc}
}

func (c *raw) send(f string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, f+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *raw) next() frame {
	c.t.Helper()
	if !c.sc.Scan() {
		c.t.Fatalf("the server's output ended: %v", c.sc.Err())
	}
	var f frame
	if err := json.Unmarshal(c.sc.Bytes(), &f); err != nil {
		c.t.Fatalf("server frame %q: %v", c.sc.Text(), err)
	}
	return f
}

// response reads frames until the response with id, and returns it with
// the frames before it.
func (c *raw) response(id string) (frame, []frame) {
	c.t.Helper()
	var before []frame
	for {
		f := c.next()
		if string(f.ID) == id && f.Method == "" {
			return f, before
		}
		before = append(before, f)
	}
}

// wantError checks that f is an error with code whose message or data
// mentions substr.
func wantError(t *testing.T, f frame, code int, substr string) {
	t.Helper()
	if f.Error == nil || f.Error.Code != code || !strings.Contains(fmt.Sprint(f.Error.Message, f.Error.Data), substr) {
		t.Fatalf("got %+v (error %+v), want error %d mentioning %q", f, f.Error, code, substr)
	}
}

func request(id int, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

const initialize = `{"protocolVersion":1,"clientCapabilities":{}}`

func newSessionParams(t *testing.T) string {
	return fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, t.TempDir())
}

// A frame over the limit, larger even than the SDK's own 10 MiB limit that
// used to end `dsh acp` silently, gets an error reply naming its id, and the
// connection goes on.
func TestOverLimitFrameIsAnsweredAndServingGoesOn(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxFrame int
		limit    string
	}{
		{"default limit", 0, fmt.Sprint(acpserver.DefaultMaxFrame)},
		{"limit clamped below the SDK's", 1 << 30, "10484736"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := rawClient(t, acpserver.Options{MaxFrame: c.maxFrame}, scripted.New())
			cl.send(request(1, "initialize", initialize))
			cl.response("1")
			huge := strings.Repeat("A", 12<<20)
			cl.send(request(2, "session/prompt", `{"sessionId":"x","prompt":[{"type":"text","text":"`+huge+`"}]}`))
			f, _ := cl.response("2")
			wantError(t, f, -32600, "over the limit of "+c.limit+" bytes")
			// Without a visible id (params first), the reply has id null.
			cl.send(`{"params":{"text":"` + huge + `"},"jsonrpc":"2.0","id":3,"method":"session/new"}`)
			f = cl.next()
			if string(f.ID) != "null" {
				t.Fatalf("reply to an over-limit frame without a visible id: %+v", f)
			}
			wantError(t, f, -32600, "over the limit")
			cl.send(request(4, "session/new", newSessionParams(t)))
			if f, _ := cl.response("4"); f.Error != nil || !strings.Contains(string(f.Result), "sessionId") {
				t.Fatalf("session/new after the over-limit frames: %+v", f)
			}
		})
	}
}

// Invalid JSON gets -32700, a valid JSON value that is not a message -32600,
// a request before initialize an error, and nothing ends the connection.
func TestMalformedAndEarlyFrames(t *testing.T) {
	cl := rawClient(t, acpserver.Options{}, scripted.New())
	cl.send(request(1, "session/new", newSessionParams(t)))
	f, _ := cl.response("1")
	wantError(t, f, -32600, "session/new before initialize")
	cl.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}`) // dropped, unanswered
	cl.send("not json")
	f = cl.next()
	if string(f.ID) != "null" {
		t.Fatalf("parse error reply %+v", f)
	}
	wantError(t, f, -32700, "invalid JSON")
	cl.send(request(2, "initialize", initialize))
	if f, _ := cl.response("2"); f.Error != nil {
		t.Fatalf("initialize: %+v", f.Error)
	}
	for _, c := range []struct {
		frame, id string
		code      int
		substr    string
	}{
		{`[1,2]`, "null", -32600, "batches are not supported"},
		{`{"jsonrpc":"2.0","id":3,"method":7}`, "3", -32600, "not a JSON-RPC message"},
		{`{}`, "null", -32600, "needs a method or an id"},
		{`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":`, "null", -32700, "invalid JSON"},
	} {
		cl.send(c.frame)
		f := cl.next()
		if string(f.ID) != c.id {
			t.Fatalf("%s: reply id %s, want %s", c.frame, f.ID, c.id)
		}
		wantError(t, f, c.code, c.substr)
	}
	cl.send(`{"jsonrpc":"2.0","method":"unknown/notification"}`) // dropped, unanswered
	cl.send(request(5, "session/new", newSessionParams(t)))
	if f := cl.next(); string(f.ID) != "5" || f.Error != nil {
		t.Fatalf("session/new: %+v", f)
	}
}

// gated is a model whose first call waits until release is closed (or its
// context ends); every call answers "answer <n>".
func gated(started chan<- struct{}, release <-chan struct{}) llm.Model {
	var calls atomic.Int32
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		n := calls.Add(1)
		if n == 1 {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return scripted.New(scripted.Text(fmt.Sprintf("answer %d", n))).Stream(ctx, req)
	})
}

// A second prompt on a busy session is refused, and the first goes on to
// its normal end; the session takes prompts again afterwards.
func TestSecondPromptLeavesTheFirstAlone(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	rec := &recorder{}
	conn, _ := connect(t, acpserver.Options{}, gated(started, release), rec)
	id := newSession(t, conn)
	first := make(chan acpsdk.PromptResponse, 1)
	go func() {
		r, err := prompt(conn, id, "one")
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	<-started
	_, err := prompt(conn, id, "two")
	if err == nil || !strings.Contains(err.Error(), "already in flight") {
		t.Fatalf("second prompt: %v", err)
	}
	close(release)
	if r := <-first; r.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("first prompt = %+v, want end_turn", r)
	}
	if r, err := prompt(conn, id, "three"); err != nil || r.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("third prompt = %+v, %v", r, err)
	}
	if msg, _, _ := rec.texts(); msg != "answer 1answer 2" {
		t.Fatalf("messages %q", msg)
	}
}

// A turn woken between prompts by a background task's completion notice
// streams to the client like a prompted one, its notice included. In a
// bubble: Wait returns once the woken turn is over.
func TestWokenTurnReachesTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		release := make(chan struct{})
		conn, srv := connect(t, acpserver.Options{}, scripted.New(
			scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "start_job", Arguments: `{}`}),
			scripted.Text("started"),
			scripted.Text("the job said 42")), rec)
		rt := srv.rt
		if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{}); err != nil {
			t.Fatal(err)
		}
		rt.Tools.Register(tool.Definition{Name: "start_job", Execute: func(_ context.Context, call tool.Call) (tool.Result, error) {
			id, err := rt.Tasks.Start(task.Spec{Kind: "job", Label: "answer", Owner: call.Caller.(*agent.Agent),
				Run: func(ctx context.Context, done func(task.Outcome)) {
					go func() {
						select {
						case <-release:
							done(task.Outcome{Status: task.Completed, Output: "42"})
						case <-ctx.Done():
							done(task.Outcome{Status: task.Killed})
						}
					}()
				}})
			return tool.TextResult("started " + id), err
		}})
		id := newSession(t, conn)
		if r, err := prompt(conn, id, "start the job"); err != nil || r.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("prompt = %+v, %v", r, err)
		}
		close(release)
		synctest.Wait() // the woken turn has ended and reached the client
		if msg, _, _ := rec.texts(); msg != "startedthe job said 42" {
			t.Fatalf("messages %q", msg)
		}
		if users := rec.userTexts(); len(users) != 1 || !strings.Contains(users[0], "background task job-1") {
			t.Fatalf("user message chunks %q, want the completion notice only", users)
		}
	})
}

// A connection holds at most MaxSessions sessions; session/close frees one.
func TestSessionCapAndClose(t *testing.T) {
	conn, srv := connect(t, acpserver.Options{MaxSessions: 2}, scripted.New(), &recorder{})
	a := newSession(t, conn)
	newSession(t, conn)
	_, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{}})
	if err == nil || !strings.Contains(err.Error(), "already holds 2 sessions, the limit") {
		t.Fatalf("third session: %v", err)
	}
	if _, err := conn.CloseSession(context.Background(), acpsdk.CloseSessionRequest{SessionId: a}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.rt.Agents.List()); n != 1 {
		t.Fatalf("%d agents after closing one of two sessions", n)
	}
	if _, err := conn.CloseSession(context.Background(), acpsdk.CloseSessionRequest{SessionId: a}); err == nil {
		t.Fatal("closing a closed session succeeded")
	}
	if _, err := prompt(conn, a, "hi"); err == nil {
		t.Fatal("a prompt to a closed session succeeded")
	}
	newSession(t, conn)
}

// silent is a client that never answers permission requests.
type silent struct{ recorder }

func (s *silent) RequestPermission(ctx context.Context, _ acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	<-ctx.Done() // the server's $/cancel_request
	return acpsdk.RequestPermissionResponse{}, ctx.Err()
}

// A permission request the client never answers is denied after
// PermissionTimeout (the default, on the bubble's clock), not before, and
// the turn goes on.
func TestUnansweredPermissionIsDenied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &silent{}
		model := scripted.New(scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}), scripted.Text("no answer"))
		conn, srv := connect(t, acpserver.Options{}, model, rec)
		id := newSession(t, conn)
		asked := time.Now()
		if r, err := prompt(conn, id, "go"); err != nil || r.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("prompt = %+v, %v", r, err)
		}
		if waited := time.Since(asked); waited < acpserver.DefaultPermissionTimeout {
			t.Errorf("denied after %v, before the timeout (%v)", waited, acpserver.DefaultPermissionTimeout)
		}
		if msg, _, tools := rec.texts(); msg != "no answer" || strings.Join(tools, ",") != "call bash: ls,update failed" {
			t.Fatalf("message %q, tools %v", msg, tools)
		}
		a, _ := srv.rt.Agents.Get(string(id))
		var result string
		for _, e := range a.Session().Events() {
			if r, ok := e.Data.(session.ToolResult); ok {
				result = content.JoinText(r.Message.Content[0].Content)
			}
		}
		if !strings.Contains(result, "bash was not approved: the permission request failed: the client did not answer within 5m0s") {
			t.Fatalf("tool result %q", result)
		}
	})
}

// A response to a permission request that is over the limit fails that
// request at once (denied) instead of leaving it waiting.
func TestOverLimitResponseFailsTheRequest(t *testing.T) {
	model := scripted.New(scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}), scripted.Text("went on"))
	cl := rawClient(t, acpserver.Options{MaxFrame: 4096}, model)
	cl.send(request(1, "initialize", initialize))
	cl.response("1")
	cl.send(request(2, "session/new", newSessionParams(t)))
	f, _ := cl.response("2")
	var s struct{ SessionID string }
	json.Unmarshal(f.Result, &s)
	cl.send(request(3, "session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}`, s.SessionID)))
	for {
		f := cl.next()
		if f.Method == "session/request_permission" {
			cl.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"},"_meta":{"pad":%q}}}`,
				f.ID, strings.Repeat("x", 8000)))
			break
		}
	}
	f, before := cl.response("3")
	if f.Error != nil || !strings.Contains(string(f.Result), "end_turn") {
		t.Fatalf("prompt: %+v", f)
	}
	failed := false
	for _, n := range before {
		failed = failed || strings.Contains(string(n.Params), `"status":"failed"`)
	}
	if !failed {
		t.Fatal("the tool call was not refused")
	}
}

// Serve reports a failed input instead of returning as if the client had
// left, and returns nil when the input simply ends.
func TestServeReportsInputFailure(t *testing.T) {
	rt, err := dsh.New(dsh.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	opts := acpserver.Options{Agents: rt.Agents, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err = acpserver.Serve(context.Background(), opts, iotest.ErrReader(errors.New("stdin broke")), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stdin broke") {
		t.Fatalf("Serve on a failing input: %v", err)
	}
	if err := acpserver.Serve(context.Background(), opts, strings.NewReader(request(1, "initialize", initialize)+"\n"), io.Discard); err != nil {
		t.Fatalf("Serve on an input that ends: %v", err)
	}
}

// A warm `dsh acp` process (a parent's pool) serves child after child on
// one connection: each session/close drops the session's agent and all
// that follows it (updates, observers, captures), so fifty children in
// turn leave neither an agent nor a goroutine behind.
func TestClosedSessionsLeaveNothing(t *testing.T) {
	conn, srv := connect(t, acpserver.Options{}, scripted.Repeat(scripted.Text("done")), &recorder{})
	closeOne := func() {
		resp, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{},
			Meta: acpmeta.Set(nil, acpmeta.Session{ParentSession: "parent-1", Depth: 1,
				OutputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)})})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := prompt(conn, resp.SessionId, "task"); err != nil || r.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("prompt = %+v, %v", r, err)
		}
		if _, err := conn.CloseSession(context.Background(), acpsdk.CloseSessionRequest{SessionId: resp.SessionId}); err != nil {
			t.Fatal(err)
		}
	}
	closeOne() // the first session starts what the connection keeps
	before := runtime.NumGoroutine()
	for range 50 {
		closeOne()
	}
	if n := len(srv.rt.Agents.List()); n != 0 {
		t.Fatalf("%d agents left after 51 sessions were closed", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines grew from %d to %d over 50 closed sessions", before, after)
	}
}
