package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/mcpserver"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func lastPrompt(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Source.Kind == content.SourceUser {
			_, task, _ := prompt.SplitChildTask(content.JoinText(m.Content))
			return task
		}
	}
	return ""
}

// child answers a child's request by its prompt: "hang" streams and
// waits to be cancelled; "fail" fails; "look" reads a file first;
// anything else is echoed.
func child(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	var e scripted.Entry
	switch p := lastPrompt(req); {
	case strings.Contains(req.System, "You judge."): // the judge type's child
		e = scripted.Text("judged: " + p)
	case p == "hang":
		e = scripted.Hang("thinking")
	case p == "fail":
		e = scripted.Fail("SERVER", "the model is down")
	case p == "look" && req.Messages[len(req.Messages)-1].Source.Kind != content.SourceTool:
		e = scripted.ToolCalls("", scripted.Call{ID: "r1", Name: "read", Arguments: `{}`})
	default:
		e = scripted.Text("child: " + p)
	}
	return scripted.New(e).Stream(ctx, req)
}

// serve runs an MCP server over a runtime with a spawn provider and an
// SDK client connected to it in memory; tune adjusts the server's options
// and the client's.
func serve(t *testing.T, onProgress func(*mcp.ProgressNotificationClientRequest), tune ...func(*setup)) (*mcp.ClientSession, *dsh.Runtime) {
	t.Helper()
	return serveWith(t, dsh.Options{}, onProgress, tune...)
}

// serveWith is serve over a runtime made with opts.
func serveWith(t *testing.T, opts dsh.Options, onProgress func(*mcp.ProgressNotificationClientRequest), tune ...func(*setup)) (*mcp.ClientSession, *dsh.Runtime) {
	t.Helper()
	opts.Logger = quiet()
	rt, err := dsh.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	rt.LLM.Register("test", llm.ModelFunc(child))
	rt.Tools.Register(tool.Definition{Name: "read", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("contents"), nil
	}})
	p, _ := inproc.NewSpawn(rt.Agents)
	rt.Subagents.Register(p)
	if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{}); err != nil {
		t.Fatal(err)
	}
	su := &setup{t: t, rt: rt, inst: subagenttool.Config{Provider: "spawn", ToolName: "delegate"},
		deps: subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events, Log: quiet()},
		server: mcpserver.Options{Agents: rt.Agents, Subagents: rt.Subagents, Tools: rt.Tools, Events: rt.Events,
			AgentOptions: agent.Options{Provider: "test"}, Cwd: t.TempDir(), Log: quiet()},
		client: mcp.ClientOptions{Logger: quiet(),
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				if onProgress != nil {
					onProgress(r)
				}
			}}}
	for _, fn := range tune {
		fn(su)
	}
	if _, err := subagenttool.Mount(su.deps, su.inst); err != nil {
		t.Fatal(err)
	}
	su.server.Instances = []subagenttool.Config{su.inst}
	srv, err := mcpserver.New(su.server)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &su.client).Connect(context.Background(), ct, &su.session)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		cancel()
		if err := srv.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if n := len(rt.Agents.List()); n != 0 {
			t.Errorf("%d agents left after the session ended", n)
		}
		rt.Close(context.Background())
	})
	return cs, rt
}

// setup is what serve's tune functions adjust: the delegate tool's
// instance and dependencies, the server's options and the client's.
type setup struct {
	t       *testing.T
	rt      *dsh.Runtime
	inst    subagenttool.Config
	deps    subagenttool.Deps
	server  mcpserver.Options
	client  mcp.ClientOptions
	session mcp.ClientSessionOptions
}

func callDelegate(ctx context.Context, cs *mcp.ClientSession, args string, token any) (*mcp.CallToolResult, error) {
	p := &mcp.CallToolParams{Name: "delegate", Arguments: json.RawMessage(args)}
	if token != nil {
		p.SetProgressToken(token)
	}
	return cs.CallTool(ctx, p)
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func TestToolsListed(t *testing.T) {
	cs, _ := serve(t, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if tl.Name == "delegate" && !strings.Contains(tl.Description, "run_in_background") {
			t.Errorf("description %q", tl.Description)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"delegate", "task_kill", "task_list", "task_output"}) {
		t.Errorf("tools %v", names)
	}
}

// A foreground delegation reports the child's turn and tool calls as
// progress and answers with its output, stop reason and usage. In a
// bubble over in-memory transports, so that late notifications are
// awaited by Wait.
func TestForegroundWithProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var progress []string
		var last float64
		cs, _ := serve(t, func(r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if r.Params.ProgressToken != "tok" || r.Params.Progress <= last {
				t.Errorf("progress %+v after %v", r.Params, last)
			}
			last = r.Params.Progress
			progress = append(progress, r.Params.Message)
		})
		res, err := callDelegate(context.Background(), cs, `{"description":"peek","prompt":"look"}`, "tok")
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || textOf(res) != "child: look" {
			t.Fatalf("result %+v", res)
		}
		var out mcpserver.Outcome
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &out)
		if out.Output != "child: look" || out.StopReason != subagent.Completed || out.Usage["test/"].Input == 0 {
			t.Errorf("structured %s", raw)
		}
		// The client handles notifications apart from results: the last may
		// come after the result, and has once the bubble is blocked.
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"turn 1 started", "calling read", "a tool call finished", "turn 1 ended: completed"}; !slices.Equal(progress, want) {
			t.Fatalf("progress %q, want %q", progress, want)
		}
	})
}

func TestForegroundFailure(t *testing.T) {
	cs, _ := serve(t, nil)
	res, err := callDelegate(context.Background(), cs, `{"description":"x","prompt":"fail"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(textOf(res), "subagent run failed") || !strings.Contains(string(raw), `"stopReason":"error"`) {
		t.Errorf("result %+v %s", res, raw)
	}
	res, err = callDelegate(context.Background(), cs, `{"description":"x","prompt":" "}`, nil)
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "prompt is empty") {
		t.Errorf("an empty prompt: %+v %v", res, err)
	}
}

// MCP's cancellation aborts the child; the session goes on.
func TestCancel(t *testing.T) {
	started := make(chan struct{}, 1)
	cs, rt := serve(t, func(r *mcp.ProgressNotificationClientRequest) {
		if r.Params.Message == "turn 1 started" {
			started <- struct{}{}
		}
	})
	ended := make(chan subagent.Ended, 1)
	defer event.On(rt.Events, func(e subagent.Ended) { ended <- e })()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := callDelegate(ctx, cs, `{"description":"wait","prompt":"hang"}`, "tok")
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Error("the cancelled call returned a result")
	}
	if e := <-ended; e.StopReason != subagent.Aborted {
		t.Errorf("the child ended %s", e.StopReason)
	}
	res, err := callDelegate(context.Background(), cs, `{"description":"x","prompt":"again"}`, nil)
	if err != nil || textOf(res) != "child: again" {
		t.Errorf("after a cancel: %+v %v", res, err)
	}
}

// The background form returns a task id at once; task_output collects it.
func TestBackground(t *testing.T) {
	cs, _ := serve(t, nil)
	res, err := callDelegate(context.Background(), cs, `{"description":"bg","prompt":"later","run_in_background":true}`, nil)
	if err != nil || res.IsError || !strings.HasPrefix(textOf(res), "started background subagent task ") {
		t.Fatalf("start: %+v %v", res, err)
	}
	id := strings.TrimPrefix(textOf(res), "started background subagent task ")
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_output",
			Arguments: map[string]any{"task_id": id, "wait": true, "timeout_ms": 5000}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(textOf(out), "child: later") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task_output: %s", textOf(out))
		}
	}
	list, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_list", Arguments: map[string]any{}})
	if err != nil || !strings.Contains(textOf(list), id) {
		t.Errorf("task_list: %+v %v", list, err)
	}
}

// A foreground call for an agent type runs a child of that type (the
// subagent tool applies it), not a plain one.
func TestForegroundTypedCall(t *testing.T) {
	cs, _ := serve(t, nil, func(su *setup) {
		dir := su.t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "judge.md"), []byte("---\nname: judge\ndescription: judges\n---\nYou judge.\n"), 0o644); err != nil {
			su.t.Fatal(err)
		}
		caps := map[string]subagent.Capabilities{}
		for _, n := range su.rt.Subagents.Names() {
			p, _ := su.rt.Subagents.Provider(n)
			caps[n] = p.Capabilities()
		}
		catalog, _, err := agentdef.Load(agentdef.Options{Dirs: []agentdef.Dir{{Path: dir, Scope: "project"}}, Routes: []string{"test"},
			Tools: append(su.rt.Tools.Names(), "delegate"), Providers: caps})
		if err != nil {
			su.t.Fatal(err)
		}
		on := true
		su.deps.Types, su.inst.SubagentTypes = catalog, &on
	})
	res, err := callDelegate(context.Background(), cs, `{"description":"j","prompt":"the patch","subagent_type":"judge"}`, nil)
	if err != nil || res.IsError || textOf(res) != "judged: the patch" {
		t.Fatalf("typed call: %+v, %v (%q)", res, err, textOf(res))
	}
}

// A foreground call runs the parent's SubagentStart and SubagentStop
// hooks around its child, as the subagent tool does: directly, and in
// rounds (a client that can be asked, on protocol 2026-07-28).
func TestForegroundCallRunsSubagentHooks(t *testing.T) {
	for name, tune := range map[string]func(*setup){"direct": func(*setup) {}, "rounds": (&askingUser{}).client} {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "hooks.jsonl")
			record := []hook.Command{{Command: "cat >> " + log + "; echo >> " + log}}
			hooks, err := hook.New(hook.Config{hook.SubagentStart: {{Hooks: record}}, hook.SubagentStop: {{Hooks: record}}}, "test", quiet())
			if err != nil {
				t.Fatal(err)
			}
			cs, _ := serveWith(t, dsh.Options{Hooks: hooks}, nil, tune)
			if res := mustDelegate(t, cs, `{"description":"sum","prompt":"add it up"}`); textOf(res) != "child: add it up" {
				t.Fatalf("result %q", textOf(res))
			}
			raw, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			var events []hook.Input
			for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
				var in hook.Input
				if err := json.Unmarshal([]byte(line), &in); err != nil {
					t.Fatalf("hook input %q: %v", line, err)
				}
				events = append(events, in)
			}
			if len(events) != 2 || events[0].Event != hook.SubagentStart || events[0].Description != "sum" || events[0].Prompt != "add it up" ||
				events[1].Event != hook.SubagentStop || events[1].StopReason != "completed" || events[1].Output != "child: add it up" {
				t.Fatalf("hook runs %+v", events)
			}
		})
	}
}

// A SubagentStart hook that blocks refuses a foreground call: no child.
func TestForegroundCallBlockedBySubagentStart(t *testing.T) {
	hooks, err := hook.New(hook.Config{hook.SubagentStart: {{Hooks: []hook.Command{{Command: "echo not now >&2; exit 2"}}}}}, "test", quiet())
	if err != nil {
		t.Fatal(err)
	}
	cs, rt := serveWith(t, dsh.Options{Hooks: hooks}, nil)
	started := 0
	defer event.On(rt.Events, func(subagent.Started) { started++ })()
	res, err := callDelegate(context.Background(), cs, `{"description":"sum","prompt":"add it up"}`, nil)
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "not now") || started != 0 {
		t.Fatalf("blocked call: %+v, %v (%q), %d children", res, err, textOf(res), started)
	}
}

func mustDelegate(t *testing.T, cs *mcp.ClientSession, args string) *mcp.CallToolResult {
	t.Helper()
	res, err := callDelegate(context.Background(), cs, args, nil)
	if err != nil || res.IsError {
		t.Fatalf("delegate: %+v, %v", res, err)
	}
	return res
}

// The session's agent only hosts tool calls: a background child's end
// opens no turn of its own (no model call for a notice nobody reads); the
// client collects the outcome with task_output.
func TestBackgroundEndOpensNoTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, rt := serve(t, nil)
		res, err := callDelegate(context.Background(), cs, `{"description":"bg","prompt":"later","run_in_background":true}`, nil)
		if err != nil || res.IsError {
			t.Fatalf("start: %+v %v", res, err)
		}
		synctest.Wait() // the child ran, its task settled, and a woken agent would have taken its turn
		for _, a := range rt.Agents.List() {
			if a.Owner() == nil && a.Session().LastTurn() != 0 {
				t.Fatalf("the session's agent ran %d turns", a.Session().LastTurn())
			}
		}
		out, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_output",
			Arguments: map[string]any{"task_id": strings.TrimPrefix(textOf(res), "started background subagent task ")}})
		if err != nil || !strings.HasPrefix(textOf(out), "child: later") {
			t.Fatalf("task_output: %+v %v", out, err)
		}
	})
}

// The subagent tools declare an output schema, and their results'
// structured content validates against it: a foreground run, a failed
// one, and a background start (which names its task); the task tools,
// whose results carry none, declare none.
func TestOutputSchema(t *testing.T) {
	cs, _ := serve(t, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema *jsonschema.Resolved
	for _, tl := range res.Tools {
		switch {
		case tl.Name == "delegate" && tl.OutputSchema != nil:
			raw, _ := json.Marshal(tl.OutputSchema)
			var s jsonschema.Schema
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			if schema, err = s.Resolve(nil); err != nil {
				t.Fatalf("the output schema %s does not resolve: %v", raw, err)
			}
		case tl.Name != "delegate" && tl.OutputSchema != nil:
			t.Errorf("%s declares an output schema", tl.Name)
		}
	}
	if schema == nil {
		t.Fatal("delegate declares no output schema")
	}
	for _, tc := range []struct{ args, want string }{
		{`{"description":"x","prompt":"hi"}`, `"stopReason":"completed"`},
		{`{"description":"x","prompt":"fail"}`, `"stopReason":"error"`},
		{`{"description":"bg","prompt":"later","run_in_background":true}`, `"taskId":"`},
	} {
		res, err := callDelegate(context.Background(), cs, tc.args, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var v any
		json.Unmarshal(raw, &v)
		if err := schema.Validate(v); err != nil || !strings.Contains(string(raw), tc.want) {
			t.Errorf("%s: structured content %s (%v), want %s", tc.args, raw, err, tc.want)
		}
	}
}
