package mcptool_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) {
	if mode := fakeMode(); mode != "" {
		runFake(mode)
	}
	code := m.Run()
	if code == 0 {
		if err := proc.NoChildren(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeTools is how many tools the fake server lists.
const fakeTools = 15

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fake is the block of a fake server in mode.
func fake(mode string) mcptool.ServerConfig {
	return mcptool.ServerConfig{Command: os.Args[0], Env: map[string]string{"FAKE_MCP_MODE": mode}, StartTimeout: 10 * time.Second}
}

// switchable is the block of a fake server whose mode, read at each start,
// is the content of the returned file.
func switchable(t *testing.T, mode string) (mcptool.ServerConfig, func(mode string)) {
	file := filepath.Join(t.TempDir(), "mode")
	set := func(mode string) {
		if err := os.WriteFile(file, []byte(mode), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	set(mode)
	return mcptool.ServerConfig{Command: os.Args[0], Env: map[string]string{"FAKE_MCP_MODE_FILE": file}, StartTimeout: 10 * time.Second}, set
}

// newSet returns a started Set over servers, closed (and checked for
// leftover processes) when the test ends.
func newSet(t *testing.T, servers map[string]mcptool.ServerConfig, opts mcptool.Options) *mcptool.Set {
	t.Helper()
	opts.Log = quiet()
	if opts.StopGrace == 0 {
		opts.StopGrace = 500 * time.Millisecond
	}
	s, err := mcptool.New(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// mounted returns a scope over a registry holding the Set's tools, once
// listed.
func mounted(t *testing.T, s *mcptool.Set) *tool.Scope {
	t.Helper()
	reg := tool.NewRegistry()
	t.Cleanup(s.Mount(reg))
	s.Ready(context.Background())
	return reg.NewScope()
}

func call(t *testing.T, s *tool.Scope, name, args string) tool.Result {
	t.Helper()
	return s.Execute(context.Background(), tool.Call{ID: "c1", Name: name, Arguments: json.RawMessage(args)})
}

func text(r tool.Result) string { return content.JoinText(r.Content) }

func wantError(t *testing.T, r tool.Result, code string, parts ...string) {
	t.Helper()
	if !r.IsError || r.Code != code {
		t.Fatalf("result %+v, want an error with code %s", r, code)
	}
	for _, p := range parts {
		if !strings.Contains(text(r), p) {
			t.Errorf("error %q lacks %q", text(r), p)
		}
	}
}

func TestToolsAndResults(t *testing.T) {
	bus := event.New(quiet())
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{Events: bus})
	s := mounted(t, set)

	var names []string
	var weird content.ToolSpec
	for _, spec := range s.Specs() {
		if !strings.HasPrefix(spec.Name, "mcp__") {
			continue
		}
		names = append(names, spec.Name)
		if spec.Name == "mcp__fake__weird_name_with_spaces" {
			weird = spec
		}
	}
	want := []string{"mcp__fake__big", "mcp__fake__block", "mcp__fake__crash", "mcp__fake__echo", "mcp__fake__env", "mcp__fake__fail",
		"mcp__fake__grow", "mcp__fake__link", "mcp__fake__log", "mcp__fake__picture", "mcp__fake__pid", "mcp__fake__progress", "mcp__fake__roots", "mcp__fake__weather", "mcp__fake__weird_name_with_spaces"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	if len(weird.Description) > mcptool.MaxDescription+200 || !strings.Contains(weird.Description, "could not read this tool's input schema") {
		t.Errorf("weird tool's description (%d bytes) ends %q", len(weird.Description), weird.Description[len(weird.Description)-120:])
	}
	if string(weird.Parameters) != `{"type":"object"}` {
		t.Errorf("weird tool's parameters %s", weird.Parameters)
	}
	if !s.ConcurrencySafe("mcp__fake__echo") || s.ConcurrencySafe("mcp__fake__crash") {
		t.Error("readOnlyHint does not decide concurrency safety")
	}

	if r := call(t, s, "mcp__fake__echo", `{"message":"hi"}`); r.IsError || text(r) != "echo: hi" {
		t.Errorf("echo: %+v", r)
	}
	r := call(t, s, "mcp__fake__echo", `{"message":5}`)
	wantError(t, r, tool.CodeInvalidArgs)

	r = call(t, s, "mcp__fake__picture", `{}`)
	if r.IsError || len(r.Content) != 3 || r.Content[1].Type != content.TypeImage || r.Content[1].Image.MediaType != "image/png" ||
		r.Content[1].Image.Bytes != int64(len(png)) || !strings.HasPrefix(r.Content[1].Image.ID, "sha256:") ||
		text(r) != fmt.Sprintf("a dot:[image: image/png, %d bytes]", len(png)) {
		t.Errorf("picture: %+v", r)
	}

	r = call(t, s, "mcp__fake__weather", `{}`)
	if r.IsError || text(r) != `{"sky":"clear","temperature":21}` || string(r.Meta) != `{"structuredContent":{"sky":"clear","temperature":21}}` {
		t.Errorf("weather: %+v (meta %s)", r, r.Meta)
	}

	wantError(t, call(t, s, "mcp__fake__fail", `{}`), mcptool.CodeToolError, "Error: the disk is on fire")

	// The notifications come from a real process and may trail the
	// result: wait for the third on the bus, boundedly.
	var mu sync.Mutex
	var got []mcptool.Progress
	third := make(chan struct{})
	defer event.On(bus, func(p mcptool.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if got = append(got, p); len(got) == 3 {
			close(third)
		}
	})()
	if r := call(t, s, "mcp__fake__progress", `{}`); text(r) != "done" {
		t.Errorf("progress: %+v", r)
	}
	select {
	case <-third:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for three progress events")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, p := range got {
		if p.Server != "fake" || p.Tool != "mcp__fake__progress" || p.CallID != "c1" || p.Progress != float64(i+1) || p.Total != 3 ||
			p.Message != fmt.Sprintf("step %d", i+1) {
			t.Errorf("progress %d: %+v", i, p)
		}
	}
}

// A result longer than the tool result limit keeps its head and tail, and
// says what was cut and that dsh keeps no copy; its image stays.
func TestResultsAreCapped(t *testing.T) {
	for _, limit := range []int{0, 1000} {
		set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{OutputLimit: limit})
		r := call(t, mounted(t, set), "mcp__fake__big", `{}`)
		want := cmp.Or(limit, tool.DefaultOutputLimit)
		got := text(r)
		whole := 5 + 170000 + len("[image: image/png, 00 bytes]") + 5
		if r.IsError || len(got) > want+400 || !strings.HasPrefix(got, "HEAD 0123") || !strings.HasSuffix(got, "bytes] TAIL") ||
			!strings.Contains(got, fmt.Sprintf("[… %d of the result's %d bytes cut here (the tool result limit is %d bytes, tools.outputLimit); "+
				"dsh keeps no copy of the whole result", whole-want, whole, want)) {
			t.Errorf("limit %d: %d bytes: %.200q … %.200q", limit, len(got), got, got[max(len(got)-200, 0):])
		}
		if len(r.Content) != 2 || r.Content[1].Type != content.TypeImage {
			t.Errorf("limit %d: blocks %+v", limit, r.Content)
		}
	}
}

// A server with resources brings list_mcp_resources and read_mcp_resource:
// they list its resources and templates, read text (capped) and summarise
// binary content; a resource link in a tool's result names them. Without
// such a server they are not offered.
func TestResources(t *testing.T) {
	plain := mounted(t, newSet(t, map[string]mcptool.ServerConfig{"plain": fake("plain")}, mcptool.Options{}))
	for _, spec := range plain.Specs() {
		if !strings.HasPrefix(spec.Name, "mcp__") {
			t.Errorf("without resources, %s is offered", spec.Name)
		}
	}

	s := mounted(t, newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok"), "plain": fake("plain")}, mcptool.Options{OutputLimit: 2000}))
	r := call(t, s, mcptool.ListResourcesTool, `{}`)
	want := "server \"fake\": 2 resources\n- fake://dot.png  dot (image/png)\n- fake://notes  notes (text/plain): Long notes.\n" +
		"server \"fake\": 1 resource templates (fill the {…} parts to make a URI)\n- fake://page/{n}  page\n"
	if r.IsError || text(r) != want {
		t.Errorf("list: %+v\n%s", r, text(r))
	}
	wantError(t, call(t, s, mcptool.ListResourcesTool, `{"server":"nope"}`), tool.CodeInvalidArgs, `no MCP server "nope"; the servers with resources are "fake"`)

	r = call(t, s, "mcp__fake__link", `{}`)
	if want := `[resource link: notes fake://notes (read_mcp_resource reads it: server "fake", uri "fake://notes")]`; text(r) != want {
		t.Errorf("link: %q, want %q", text(r), want)
	}
	r = call(t, s, mcptool.ReadResourceTool, `{"server":"fake","uri":"fake://notes"}`)
	if got := text(r); r.IsError || len(got) > 2400 || !strings.HasPrefix(got, "BEGIN 0123") || !strings.HasSuffix(got, "def\n END") ||
		!strings.Contains(got, "of the resource's 170010 bytes cut here") {
		t.Errorf("read notes: %d bytes: %q", len(got), got)
	}
	r = call(t, s, mcptool.ReadResourceTool, `{"server":"fake","uri":"fake://dot.png"}`)
	if want := fmt.Sprintf("[binary resource: fake://dot.png (image/png), %d bytes; dsh does not show binary content]\n", len(png)); text(r) != want {
		t.Errorf("read dot: %q", text(r))
	}
	if r = call(t, s, mcptool.ReadResourceTool, `{"server":"fake","uri":"fake://page/7"}`); text(r) != "page fake://page/7" {
		t.Errorf("read page: %+v", r)
	}
	wantError(t, call(t, s, mcptool.ReadResourceTool, `{"server":"fake","uri":"fake://none"}`), mcptool.CodeProtocol, "fake://none")
	wantError(t, call(t, s, mcptool.ReadResourceTool, `{"server":"fake"}`), tool.CodeInvalidArgs)
}

// A server's logging notifications (info and above, which dsh asks for)
// reach the bus as mcp/log events.
func TestLogNotifications(t *testing.T) {
	bus := event.New(quiet())
	var mu sync.Mutex
	var got []mcptool.Log
	two := make(chan struct{})
	defer event.On(bus, func(l mcptool.Log) {
		mu.Lock()
		defer mu.Unlock()
		if got = append(got, l); len(got) == 2 {
			close(two)
		}
	})()
	s := mounted(t, newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{Events: bus}))
	if r := call(t, s, "mcp__fake__log", `{}`); text(r) != "logged" {
		t.Fatalf("log: %+v", r)
	}
	select {
	case <-two:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for two log events")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []mcptool.Log{{Server: "fake", Level: "warning", Logger: "disk", Message: "almost full"},
		{Server: "fake", Level: "error", Message: `{"free":0}`}}
	if !slices.Equal(got, want) {
		t.Errorf("logs %+v, want %+v", got, want)
	}
}

// A server that floods dsh with logging notifications has 100 relayed at
// once, then one a second.
func TestLogFloodIsBounded(t *testing.T) {
	bus := event.New(quiet())
	var mu sync.Mutex
	n := 0
	defer event.On(bus, func(mcptool.Log) {
		mu.Lock()
		defer mu.Unlock()
		n++
	})()
	s := mounted(t, newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{Events: bus}))
	if r := call(t, s, "mcp__fake__log", `{"flood":1000}`); text(r) != "logged" {
		t.Fatalf("log: %+v", r)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got := n
		mu.Unlock()
		if got >= 100 || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n < 100 || n > 103 {
		t.Errorf("%d of 1002 log notifications relayed", n)
	}
}

// Every call of every agent shares one connection: concurrent first calls
// start one process.
func TestOneConnectionPerServer(t *testing.T) {
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{})
	reg := tool.NewRegistry()
	defer set.Mount(reg)()
	// Mounting lists nothing; a first call starts the server, but only
	// listed tools exist, so list first from many goroutines at once.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { set.Ready(context.Background()) })
	}
	wg.Wait()
	pids := make([]string, 20)
	for i := range pids {
		wg.Go(func() { pids[i] = text(call(t, reg.NewScope(), "mcp__fake__pid", `{}`)) })
	}
	wg.Wait()
	if pids[0] == "" || slices.ContainsFunc(pids, func(p string) bool { return p != pids[0] }) {
		t.Errorf("calls answered by %v, want one process", pids)
	}
}

// The faults of a server process: it crashes mid-call, then exits at
// start, hangs on initialize, or answers garbage when restarted. Each is a
// clear tool error, nothing hangs, no process is left; once it behaves
// again, a call restarts it.
func TestServerFaults(t *testing.T) {
	cfg, mode := switchable(t, "ok")
	cfg.StartTimeout = time.Second
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": cfg}, mcptool.Options{RestartBackoff: time.Nanosecond, StopGrace: 200 * time.Millisecond})
	s := mounted(t, set)
	first := text(call(t, s, "mcp__fake__pid", `{}`))

	wantError(t, call(t, s, "mcp__fake__crash", `{}`), mcptool.CodeUnavailable,
		"MCP server fake", "exit status 2", "segmentation fault (not really)", "starts the server again on a later call")
	if err := proc.NoChildren(); err != nil {
		t.Fatalf("after the crash: %v", err)
	}

	for _, tc := range []struct {
		mode  string
		parts []string
	}{
		{"exit", []string{"the handshake (initialize) failed", "exit status 3", "bad configuration, giving up"}},
		{"hang", []string{"the handshake (initialize) did not finish within 1s (startTimeout)", "thinking about it"}},
		{"garbage", []string{"the handshake (initialize) failed"}},
	} {
		mode(tc.mode)
		wantError(t, call(t, s, "mcp__fake__echo", `{"message":"x"}`), mcptool.CodeUnavailable, tc.parts...)
		if err := proc.NoChildren(); err != nil {
			t.Fatalf("after %s: %v", tc.mode, err)
		}
	}

	mode("ok")
	if r := call(t, s, "mcp__fake__pid", `{}`); r.IsError || text(r) == first {
		t.Errorf("after recovery: %+v (first process %s)", r, first)
	}
}

// While a crashed server waits out its backoff, its tools fail at once
// with the reason, and nothing is started.
func TestBackoffAfterCrash(t *testing.T) {
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{RestartBackoff: time.Hour})
	s := mounted(t, set)
	wantError(t, call(t, s, "mcp__fake__crash", `{}`), mcptool.CodeUnavailable, "exit status 2")
	wantError(t, call(t, s, "mcp__fake__echo", `{"message":"x"}`), mcptool.CodeUnavailable,
		"unavailable: the server exited: exit status 2", "in 1h0m0s or later")
	if err := proc.NoChildren(); err != nil {
		t.Fatal(err)
	}
	st := set.Status()
	if len(st) != 1 || st[0].Err == nil || len(st[0].Tools) != fakeTools {
		t.Errorf("status %+v", st)
	}
}

// A server that fails its first start lists no tools; a later Ready (the
// next top-level agent) tries again once the backoff is over, and its
// tools then appear.
func TestFirstStartFails(t *testing.T) {
	cfg, mode := switchable(t, "exit")
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": cfg, "good": fake("ok")}, mcptool.Options{RestartBackoff: time.Nanosecond})
	reg := tool.NewRegistry()
	defer set.Mount(reg)()
	set.Ready(context.Background())
	st := set.Status()
	if len(st) != 2 || st[0].Name != "fake" || st[0].Err == nil || !strings.Contains(st[0].Err.Error(), "exit status 3") ||
		len(st[0].Tools) != 0 || st[0].Transport != "stdio: "+os.Args[0] || st[1].Err != nil || len(st[1].Tools) != fakeTools {
		t.Fatalf("status %+v", st)
	}
	if slices.ContainsFunc(reg.Names(), func(n string) bool { return strings.HasPrefix(n, "mcp__fake__") }) {
		t.Fatalf("tools of a failed server: %v", reg.Names())
	}
	mode("ok")
	set.Ready(context.Background())
	if !slices.Contains(reg.Names(), "mcp__fake__echo") {
		t.Errorf("after a successful retry: %v", reg.Names())
	}
}

// A cancelled call returns at once and tells the server; the connection
// stays up. Closing the Set ends a call in flight.
func TestCancelAndClose(t *testing.T) {
	bus := event.New(quiet())
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{Events: bus})
	s := mounted(t, set)
	blocking := make(chan struct{}, 2)
	defer event.On(bus, func(p mcptool.Progress) {
		if p.Tool == "mcp__fake__block" {
			blocking <- struct{}{}
		}
	})()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tool.Result)
	go func() {
		done <- s.Execute(ctx, tool.Call{ID: "c", Name: "mcp__fake__block", Arguments: json.RawMessage(`{}`)})
	}()
	<-blocking // the server runs the call
	cancel()
	r := <-done
	wantError(t, r, tool.CodeFailed, "context canceled")
	if r := call(t, s, "mcp__fake__echo", `{"message":"still up"}`); text(r) != "echo: still up" {
		t.Errorf("after a cancel: %+v", r)
	}

	go func() {
		done <- s.Execute(context.Background(), tool.Call{ID: "c", Name: "mcp__fake__block", Arguments: json.RawMessage(`{}`)})
	}()
	<-blocking
	if err := set.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantError(t, <-done, mcptool.CodeClosed)
	wantError(t, call(t, s, "mcp__fake__echo", `{"message":"x"}`), mcptool.CodeClosed, "shutting down")
}

// A call that outlives the server's callTimeout fails with MCP_TIMEOUT;
// the server goes on.
func TestCallTimeout(t *testing.T) {
	cfg := fake("ok")
	cfg.CallTimeout = 100 * time.Millisecond
	s := mounted(t, newSet(t, map[string]mcptool.ServerConfig{"fake": cfg}, mcptool.Options{}))
	wantError(t, call(t, s, "mcp__fake__block", `{}`), mcptool.CodeTimeout, "outlived the server's callTimeout (100ms)")
	if r := call(t, s, "mcp__fake__echo", `{"message":"still up"}`); text(r) != "echo: still up" {
		t.Errorf("after a timeout: %+v", r)
	}
}

// A stdio server sees dsh's environment without credentials, plus its env
// block (variables expanded) and passEnv.
func TestEnvironment(t *testing.T) {
	cfg := fake("ok")
	cfg.Env["GREETING"] = "${WORD:-hello} ${NAME}"
	cfg.PassEnv = []string{"PASSED_TOKEN"}
	getenv := map[string]string{"NAME": "dsh"}
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": cfg}, mcptool.Options{
		Getenv:  func(k string) string { return getenv[k] },
		BaseEnv: []string{"PATH=" + os.Getenv("PATH"), "GITHUB_TOKEN=secret", "PASSED_TOKEN=passed", "PLAIN=plain"}})
	s := mounted(t, set)
	for name, want := range map[string]string{"GREETING": `"hello dsh" true`, "GITHUB_TOKEN": `"" false`,
		"PASSED_TOKEN": `"passed" true`, "PLAIN": `"plain" true`} {
		if got := text(call(t, s, "mcp__fake__env", `{"name":"`+name+`"}`)); got != name+"="+want {
			t.Errorf("%s: got %s, want %s", name, got, want)
		}
	}
	// A variable the block needs and the environment lacks fails the start.
	delete(getenv, "NAME")
	bad := newSet(t, map[string]mcptool.ServerConfig{"fake": cfg}, mcptool.Options{Getenv: func(k string) string { return getenv[k] }})
	bad.Ready(context.Background())
	if st := bad.Status(); st[0].Err == nil || !strings.Contains(st[0].Err.Error(), "environment variable NAME is not set") {
		t.Errorf("status %+v", st)
	}
}

// Streamable HTTP and SSE servers get the configured headers, their
// values expanded from the environment.
func TestHTTPAndSSE(t *testing.T) {
	srv := fakeServer()
	auth := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	streamable := httptest.NewServer(auth(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	defer streamable.Close()
	sse := httptest.NewServer(auth(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	defer sse.Close()
	headers := map[string]string{"Authorization": "Bearer ${FAKE_TOKEN}"}
	set := newSet(t, map[string]mcptool.ServerConfig{
		"web":    {URL: streamable.URL, Headers: headers},
		"old":    {Type: mcptool.TypeSSE, URL: sse.URL, Headers: headers},
		"denied": {URL: streamable.URL},
	}, mcptool.Options{Getenv: func(k string) string { return map[string]string{"FAKE_TOKEN": "s3cret"}[k] }})
	s := mounted(t, set)
	for _, name := range []string{"mcp__web__echo", "mcp__old__echo"} {
		if r := call(t, s, name, `{"message":"over http"}`); text(r) != "echo: over http" {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if st := set.Status(); st[0].Name != "denied" || st[0].Err == nil || len(st[0].Tools) != 0 {
		t.Errorf("status %+v", st[0])
	}
	set.Close(context.Background())
	streamable.CloseClientConnections()
	sse.CloseClientConnections()
}

// A server name with spaces is kept: its tools carry it with _ for each
// space, as Claude Code names them; a name that would then collide with
// another server's gets a hash of itself, whatever the order, and the
// resource tools know it by both names.
func TestServerNamesWithSpaces(t *testing.T) {
	set := newSet(t, map[string]mcptool.ServerConfig{"GSD-2 Code": fake("ok"), "GSD-2_Code": fake("plain"), "my docs": fake("ok")},
		mcptool.Options{})
	s := mounted(t, set)
	if r := call(t, s, "mcp__my_docs__echo", `{"message":"hi"}`); r.IsError || text(r) != "echo: hi" {
		t.Errorf("echo: %+v", r)
	}
	if r := call(t, s, "mcp__GSD-2_Code__echo", `{"message":"plain"}`); r.IsError {
		t.Errorf("the plain name's echo: %+v", r)
	}
	var hashed []string
	for _, spec := range s.Specs() {
		if strings.HasSuffix(spec.Name, "__echo") {
			hashed = append(hashed, spec.Name)
		}
	}
	if want := []string{"mcp__GSD-2_Code-0e736b__echo", "mcp__GSD-2_Code__echo", "mcp__my_docs__echo"}; !slices.Equal(hashed, want) {
		t.Errorf("echo tools %v, want %v", hashed, want)
	}
	for _, name := range []string{"my docs", "my_docs"} {
		if r := call(t, s, mcptool.ReadResourceTool, fmt.Sprintf(`{"server":%q,"uri":"fake://page/1"}`, name)); r.IsError {
			t.Errorf("read from %q: %+v", name, r)
		}
	}
	if got := set.Names(); !slices.Equal(got, []string{"GSD-2 Code", "GSD-2_Code", "my docs"}) {
		t.Errorf("names %v", got)
	}
}

// A headersHelper's JSON headers go with the requests, over the block's
// own; it runs with dsh's environment minus credentials, and knows the
// server's name and URL. A helper that fails, or prints something else,
// makes the server unavailable with an error naming it and why.
func TestHeadersHelper(t *testing.T) {
	srv := fakeServer()
	var mu sync.Mutex
	seen := map[string]http.Header{}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	streamable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer streamable.Close()
	set := newSet(t, map[string]mcptool.ServerConfig{
		"my web": {URL: streamable.URL + "/ok", Headers: map[string]string{"Authorization": "Bearer static", "X-Static": "kept"},
			HeadersHelper: `printf '{"Authorization": "Bearer %s", "X-Server": "%s", "X-Secret": "%s", "X-Url": "%s"}' "$TOKEN_FILE_VALUE" ` +
				`"$CLAUDE_CODE_MCP_SERVER_NAME" "$DEEPSEEK_API_KEY" "$CLAUDE_CODE_MCP_SERVER_URL"`, PassEnv: []string{"TOKEN_FILE_VALUE"}},
		"failing": {URL: streamable.URL + "/failing", HeadersHelper: "echo no token for you >&2; exit 3"},
		"garbage": {URL: streamable.URL + "/garbage", HeadersHelper: "echo hello"},
	}, mcptool.Options{BaseEnv: []string{"PATH=" + os.Getenv("PATH"), "DEEPSEEK_API_KEY=sk-secret", "TOKEN_FILE_VALUE=dyn"}})
	s := mounted(t, set)
	if r := call(t, s, "mcp__my_web__echo", `{"message":"hi"}`); text(r) != "echo: hi" {
		t.Errorf("echo: %+v", r)
	}
	mu.Lock()
	h := seen["/ok"]
	mu.Unlock()
	if h.Get("Authorization") != "Bearer dyn" || h.Get("X-Static") != "kept" || h.Get("X-Server") != "my web" ||
		h.Get("X-Url") != streamable.URL+"/ok" || h.Get("X-Secret") != "" {
		t.Errorf("headers %v", h)
	}
	for _, st := range set.Status() {
		var want string
		switch st.Name {
		case "my web":
			continue
		case "failing":
			want = "MCP server failing: headersHelper failed: exit status 3; stderr: no token for you"
		case "garbage":
			want = `MCP server garbage: headersHelper must print a JSON object of header names to string values, printed "hello"`
		}
		if st.Err == nil || st.Err.Error() != want {
			t.Errorf("%s: %v, want %s", st.Name, st.Err, want)
		}
	}
	mu.Lock()
	if seen["/failing"] != nil || seen["/garbage"] != nil {
		t.Error("a server whose helper failed was reached")
	}
	mu.Unlock()
	set.Close(context.Background())
	streamable.CloseClientConnections()
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  mcptool.ServerConfig
		want string // "" for valid
	}{
		{"ok", mcptool.ServerConfig{Command: "srv"}, ""},
		{"ok-url", mcptool.ServerConfig{URL: "https://example.com/mcp", Headers: map[string]string{"A": "${B:-c}"}}, ""},
		{"GSD-2 Code", mcptool.ServerConfig{Command: "srv"}, ""},
		{"bad\nname", mcptool.ServerConfig{Command: "srv"}, "without control characters"},
		{"", mcptool.ServerConfig{Command: "srv"}, "1 to 64 bytes"},
		{strings.Repeat("x", 65), mcptool.ServerConfig{Command: "srv"}, "1 to 64 bytes"},
		{"a__b", mcptool.ServerConfig{Command: "srv"}, `must not contain "__"`},
		{"a  b", mcptool.ServerConfig{Command: "srv"}, `must not contain "__"`},
		{"none", mcptool.ServerConfig{}, "command: is required"},
		{"helper-stdio", mcptool.ServerConfig{Command: "srv", HeadersHelper: "x"}, "not a url, headers or a headersHelper"},
		{"pass-http", mcptool.ServerConfig{URL: "http://x", PassEnv: []string{"A"}}, "passEnv is for its headersHelper"},
		{"both", mcptool.ServerConfig{Command: "srv", URL: "http://x"}, "not a url"},
		{"type", mcptool.ServerConfig{Type: "ws", URL: "ws://x"}, `want stdio, http or sse, got "ws"`},
		{"scheme", mcptool.ServerConfig{URL: "ftp://x"}, "want an http:// or https:// URL"},
		{"http-cmd", mcptool.ServerConfig{Type: "http", URL: "http://x", Command: "c"}, "not a command"},
		{"neg", mcptool.ServerConfig{Command: "c", StartTimeout: -1}, "startTimeout: must not be negative"},
		{"ref", mcptool.ServerConfig{Command: "c", Args: []string{"${1BAD}"}}, "bad variable reference"},
		{"open", mcptool.ServerConfig{Command: "c", Env: map[string]string{"A": "${OPEN"}}, "unterminated"},
	} {
		err := tc.cfg.Validate(tc.name)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		var ce *mcptool.ConfigError
		if err != nil && (!errors.As(err, &ce) || ce.ErrorCode() != mcptool.CodeConfig) {
			t.Errorf("%s: %T", tc.name, err)
		}
	}
	missing := mcptool.ServerConfig{Command: "${BIN}", Args: []string{"${A:-x}", "${B}"}, Headers: map[string]string{"h": "${BIN}"}}.
		Missing(func(k string) (string, bool) { return "", k == "A" })
	if !slices.Equal(missing, []string{"BIN", "B"}) {
		t.Errorf("missing %v", missing)
	}
}

func TestToolName(t *testing.T) {
	long := strings.Repeat("x", 80)
	for in, want := range map[string]string{
		"echo":         "mcp__s__echo",
		"get-sum":      "mcp__s__get-sum",
		"a.b/c d":      "mcp__s__a_b_c_d",
		"résumé":       "mcp__s__r_sum_",
		long + "1":     "",
		long + "2":     "",
		"":             "mcp__s__",
		"ok_under_max": "mcp__s__ok_under_max",
	} {
		got := mcptool.ToolName("s", in)
		if len(got) > 64 || !regexpOK(got) {
			t.Errorf("ToolName(%q) = %q: not a name model APIs accept", in, got)
		}
		if want != "" && got != want {
			t.Errorf("ToolName(%q) = %q, want %q", in, got, want)
		}
	}
	if mcptool.ToolName("s", long+"1") == mcptool.ToolName("s", long+"2") {
		t.Error("cut names collide")
	}
}

func regexpOK(s string) bool {
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}
