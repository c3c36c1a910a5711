package codex_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// fakeConfig runs this test binary as a fake app-server in mode, logging
// what it receives to the returned file.
func fakeConfig(t *testing.T, mode string) (codex.Config, string) {
	log := filepath.Join(t.TempDir(), "received.jsonl")
	return codex.Config{Options: childproc.Options{Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env: map[string]string{fakeEnv: mode, fakeLogEnv: log, "GORACE": "atexit_sleep_ms=0"},
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 5 * time.Second, CancelGrace: 300 * time.Millisecond,
			EOFGrace: 200 * time.Millisecond, TermGrace: 200 * time.Millisecond}}}, log
}

func newProvider(t *testing.T, cfg codex.Config) *codex.Provider {
	t.Helper()
	p, err := codex.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(t *testing.T, prompt string) subagent.StartRequest {
	return subagent.StartRequest{Prompt: subagenttest.Prompt(prompt), Parent: subagenttest.ParentAgent(t), Depth: 1}
}

func start(t *testing.T, p *codex.Provider, ctx context.Context, req subagent.StartRequest) subagent.Run {
	t.Helper()
	run, err := p.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// runFake runs prompt to its end against a fake in the scripted mode and
// disposes of it, returning the result and the fake's log.
func runFake(t *testing.T, cfg codex.Config, log, prompt string) (subagent.Result, []map[string]json.RawMessage) {
	t.Helper()
	run := start(t, newProvider(t, cfg), context.Background(), request(t, prompt))
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
	return res, readLog(t, log)
}

func readLog(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.RawMessage
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// received returns the params of the first logged message with method.
func received(t *testing.T, log []map[string]json.RawMessage, method string) map[string]any {
	t.Helper()
	for _, m := range log {
		var name string
		json.Unmarshal(m["method"], &name)
		if name == method {
			var p map[string]any
			json.Unmarshal(m["params"], &p)
			return p
		}
	}
	t.Fatalf("the fake never received %s", method)
	return nil
}

// responses returns the raw lines of the logged responses to the fake's
// server requests, in order.
func responses(log []map[string]json.RawMessage) []string {
	var out []string
	for _, m := range log {
		if _, ok := m["method"]; !ok && m["id"] != nil {
			b, _ := json.Marshal(m)
			out = append(out, string(b))
		}
	}
	return out
}

func TestFinalAnswerWinsOverCommentaryAndNullPhase(t *testing.T) {
	cfg, log := fakeConfig(t, "scripted")
	cfg.Model = "gpt-test"
	cfg.Config = map[string]any{"model_reasoning_effort": "low"}
	var mu sync.Mutex
	var progress []subagent.Progress
	req := request(t, scComplete)
	req.Progress = func(p subagent.Progress) {
		mu.Lock()
		progress = append(progress, p)
		mu.Unlock()
	}
	run := start(t, newProvider(t, cfg), context.Background(), req)
	if !strings.HasPrefix(run.ID(), "codex-") || run.ID() == "codex-"+fakeThread || run.LocalAgent() != nil {
		t.Fatalf("run id %q, local agent %v", run.ID(), run.LocalAgent())
	}
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != completeAnswer {
		t.Fatalf("result %+v", res)
	}
	want := content.Usage{Input: 60, CacheRead: 40, Output: 20, Reasoning: 5}
	if len(res.Usage) != 1 || res.Usage["codex/gpt-test"] != want {
		t.Fatalf("usage %+v, want codex/gpt-test: %+v", res.Usage, want)
	}

	mu.Lock()
	var kinds, text []string
	for _, p := range progress {
		kinds = append(kinds, string(p.Kind))
		if p.Kind == subagent.ProgressText {
			text = append(text, p.Text)
		}
		if p.Kind == subagent.ProgressToolCall && (p.Tool != "commandExecution" || p.CallID != "cmd-1") {
			t.Errorf("tool call progress %+v", p)
		}
	}
	mu.Unlock()
	if got := strings.Join(kinds, ","); got != "turn-start,tool-call,tool-result,text,text,text,turn-end" {
		t.Errorf("progress kinds %s", got)
	}
	if got := strings.Join(text, ""); !strings.HasPrefix(got, completeAnswer) || strings.Contains(got, "Let me look") {
		t.Errorf("progress text %q: want the answer's deltas and no commentary", got)
	}

	// The handshake and turn as the fake saw them.
	lg := readLog(t, log)
	env := map[string]any{}
	json.Unmarshal(lg[0]["env"], &env)
	home, _ := env["CODEX_HOME"].(string)
	if home == "" || env["homeExists"] != true || env["cwd"] != req.Parent.Cwd() {
		t.Errorf("child env %v (parent cwd %s)", env, req.Parent.Cwd())
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("temporary CODEX_HOME %s survived Dispose (%v)", home, err)
	}
	for _, m := range lg {
		if _, ok := m["jsonrpc"]; ok {
			t.Errorf("sent a jsonrpc member: %v", m)
		}
	}
	if ci := received(t, lg, "initialize")["clientInfo"].(map[string]any); ci["name"] != "dsh" {
		t.Errorf("clientInfo %v", ci)
	}
	received(t, lg, "initialized")
	ts := received(t, lg, "thread/start")
	if ts["ephemeral"] != true || ts["cwd"] != req.Parent.Cwd() || ts["approvalPolicy"] != "untrusted" || ts["model"] != "gpt-test" ||
		ts["sandbox"] != "workspace-write" || ts["config"].(map[string]any)["model_reasoning_effort"] != "low" {
		t.Errorf("thread/start params %v", ts)
	}
	tu := received(t, lg, "turn/start")
	if b, _ := json.Marshal(tu); string(b) != `{"input":[{"text":"`+scComplete+`","text_elements":[],"type":"text"}],"threadId":"`+fakeThread+`"}` {
		t.Errorf("turn/start params %s", b)
	}
}

func TestNullPhaseFallback(t *testing.T) {
	cfg, log := fakeConfig(t, "scripted")
	res, _ := runFake(t, cfg, log, scNullPhase)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != nullAnswer {
		t.Fatalf("result %+v", res)
	}
	if res.Usage != nil {
		t.Errorf("usage %v without a usage notification", res.Usage)
	}
}

func TestBlankAnswerFails(t *testing.T) {
	cfg, log := fakeConfig(t, "scripted")
	res, _ := runFake(t, cfg, log, scBlank)
	if res.StopReason != subagent.Failed || len(res.Output) != 0 || !strings.Contains(res.Diagnostic, "without a final answer") {
		t.Fatalf("result %+v", res)
	}
}

func TestApprovalRequestsAnsweredPerMode(t *testing.T) {
	for _, tc := range []struct {
		mode, decision, permissions string
		thread                      map[string]any
	}{
		{"", "accept", `{"network":{"enabled":true}}`, map[string]any{"approvalPolicy": "untrusted", "sandbox": "workspace-write", "approvalsReviewer": nil}},
		{codex.PermissionNever, "decline", `{}`, map[string]any{"approvalPolicy": "never", "sandbox": nil, "approvalsReviewer": nil}},
		{codex.PermissionApproveForMe, "accept", `{"network":{"enabled":true}}`,
			map[string]any{"approvalPolicy": "on-request", "sandbox": "workspace-write", "approvalsReviewer": "auto_review"}},
		{codex.PermissionBypass, "accept", `{"network":{"enabled":true}}`,
			map[string]any{"approvalPolicy": "never", "sandbox": "danger-full-access", "approvalsReviewer": nil}},
	} {
		t.Run(tc.decision+"/"+tc.mode, func(t *testing.T) {
			cfg, log := fakeConfig(t, "scripted")
			cfg.PermissionMode = tc.mode
			res, lg := runFake(t, cfg, log, scApprovals)
			if res.StopReason != subagent.Completed {
				t.Fatalf("result %+v", res)
			}
			want := []string{
				`{"id":0,"result":{"decision":"` + tc.decision + `"}}`,
				`{"id":1,"result":{"decision":"` + tc.decision + `"}}`,
				`{"id":2,"result":{"permissions":` + tc.permissions + `,"scope":"turn"}}`,
				`{"id":3,"result":{"answers":{}}}`,
				`{"id":4,"result":{"_meta":null,"action":"decline","content":null}}`,
			}
			if got := responses(lg); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("the fake received\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			ts := received(t, lg, "thread/start")
			for k, v := range tc.thread {
				if ts[k] != v {
					t.Errorf("thread/start %s = %v, want %v", k, ts[k], v)
				}
			}
		})
	}
}

// In the default mode, as in approve-for-me, the parent's permission
// policy decides Codex's approvals: a denied command is declined without
// asking, a file change the policy asks about goes to the tree's asker,
// naming the child.
func TestApprovalsFollowTheParentsPolicy(t *testing.T) {
	for _, mode := range []string{"", codex.PermissionApproveForMe} {
		t.Run(cmp.Or(mode, "default"), func(t *testing.T) {
			cfg, log := fakeConfig(t, "scripted")
			cfg.PermissionMode = mode
			var asked []string
			rules := permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Deny, "edit_file": permission.Ask}}
			parent := subagenttest.PolicyParent(t, rules, permission.AskerFunc(func(_ context.Context, r permission.Request) (permission.Answer, error) {
				asked = append(asked, r.Who()+": "+r.Tool)
				return permission.AllowOnce, nil
			}))
			run := start(t, newProvider(t, cfg), context.Background(),
				subagent.StartRequest{Label: "fix", Prompt: subagenttest.Prompt(scApprovals), Parent: parent, Depth: 1})
			res := subagenttest.Wait(t, run)
			subagenttest.Dispose(t, run)
			checkNoChildren(t)
			if res.StopReason != subagent.Completed {
				t.Fatalf("result %+v", res)
			}
			got := responses(readLog(t, log))
			if len(got) < 3 || got[0] != `{"id":0,"result":{"decision":"decline"}}` || got[1] != `{"id":1,"result":{"decision":"accept"}}` ||
				got[2] != `{"id":2,"result":{"permissions":{"network":{"enabled":true}},"scope":"turn"}}` {
				t.Errorf("the fake received %q", got)
			}
			if strings.Join(asked, ",") != "codex · fix: edit_file" {
				t.Errorf("asked %q", asked)
			}
		})
	}
}

func TestUnknownServerRequestFails(t *testing.T) {
	cfg, log := fakeConfig(t, "scripted")
	run := start(t, newProvider(t, cfg), context.Background(), request(t, scUnknownRequest))
	res := subagenttest.Wait(t, run)
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, `"item/tool/call"`) {
		t.Fatalf("result %+v", res)
	}
	// Until it is disposed, the failed run stops Codex working.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), `"turn/interrupt"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fake never received turn/interrupt")
		}
	}
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
	if got := responses(readLog(t, log)); len(got) != 1 || !strings.Contains(got[0], `"code":-32601`) {
		t.Errorf("the fake received %v, want a method-not-found error", got)
	}
}

func TestContextWindowExceededIsMaxTokens(t *testing.T) {
	cfg, log := fakeConfig(t, "scripted")
	res, _ := runFake(t, cfg, log, scContextWindow)
	if res.StopReason != subagent.MaxTokens || !strings.Contains(res.Diagnostic, "contextWindowExceeded") {
		t.Fatalf("result %+v", res)
	}
}

func TestTurnFailureCarriesCategoryAndMessage(t *testing.T) {
	for prompt, want := range map[string][]string{
		scFail:       {"category badRequest", "the model rejects this request", "request id req-7"},
		scFailObject: {"category responseTooManyFailedAttempts (HTTP 500)", "stream disconnected before completion"},
	} {
		t.Run(prompt, func(t *testing.T) {
			cfg, log := fakeConfig(t, "scripted")
			res, _ := runFake(t, cfg, log, prompt)
			if res.StopReason != subagent.Failed {
				t.Fatalf("result %+v", res)
			}
			for _, w := range want {
				if !strings.Contains(res.Diagnostic, w) {
					t.Errorf("diagnostic %q lacks %q", res.Diagnostic, w)
				}
			}
		})
	}
}

func TestInterruptHonouredIsAborted(t *testing.T) {
	cfg, log := fakeConfig(t, "scripted")
	cfg.CancelGrace = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := start(t, newProvider(t, cfg), ctx, request(t, scHang))
	t0 := time.Now()
	cancel()
	res := subagenttest.Wait(t, run)
	if res.StopReason != subagent.Aborted || time.Since(t0) > 8*time.Second {
		t.Fatalf("result %+v after %s", res, time.Since(t0))
	}
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
	if p := received(t, readLog(t, log), "turn/interrupt"); p["threadId"] != fakeThread || p["turnId"] != fakeTurn {
		t.Errorf("turn/interrupt params %v", p)
	}
}

func TestInterruptIgnoredIsAbortedAfterGrace(t *testing.T) {
	cfg, _ := fakeConfig(t, "scripted")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := start(t, newProvider(t, cfg), ctx, request(t, scIgnore))
	t0 := time.Now()
	cancel()
	res := subagenttest.Wait(t, run)
	elapsed := time.Since(t0)
	// The run settles only once the process is gone (ignoring EOF and
	// SIGTERM, it takes SIGKILL).
	if err := noChildren(); err != nil {
		t.Error(err)
	}
	if res.StopReason != subagent.Aborted || elapsed < cfg.CancelGrace || elapsed > 15*time.Second {
		t.Fatalf("result %+v after %s", res, elapsed)
	}
	subagenttest.Dispose(t, run)
}

func TestChildNotReadingStdinCannotBlockCancel(t *testing.T) {
	cfg, _ := fakeConfig(t, "deaf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A prompt larger than a pipe buffer: writing turn/start blocks.
	run := start(t, newProvider(t, cfg), ctx, request(t, strings.Repeat("x", 1<<20)))
	time.Sleep(100 * time.Millisecond) // a real pipe: let the write fill it and block (nothing signals that); cancel must work either way
	t0 := time.Now()
	cancel()
	res := subagenttest.Wait(t, run)
	if elapsed := time.Since(t0); res.StopReason != subagent.Aborted || elapsed > 15*time.Second {
		t.Fatalf("result %+v after %s", res, elapsed)
	}
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
}

func TestCrashMidTurnFails(t *testing.T) {
	cfg, log := fakeConfig(t, "scripted")
	res, _ := runFake(t, cfg, log, scCrash)
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "exit status 3") ||
		!strings.Contains(res.Diagnostic, "panicked: boom") || content.JoinText(res.Output) != crashPartial {
		t.Fatalf("result %+v", res)
	}
	if len(res.Diagnostic) > subagent.MaxDiagnostic {
		t.Errorf("diagnostic of %d bytes", len(res.Diagnostic))
	}
}

func TestUnreadableOutputFails(t *testing.T) {
	for prompt, want := range map[string]string{scHugeLine: "exceeds 1048576 bytes", scGarbage: "not a JSON object"} {
		t.Run(prompt, func(t *testing.T) {
			cfg, _ := fakeConfig(t, "scripted")
			p := newProvider(t, cfg)
			codex.SetMaxLine(p, 1<<20)
			run := start(t, p, context.Background(), request(t, prompt))
			res := subagenttest.Wait(t, run)
			subagenttest.Dispose(t, run)
			checkNoChildren(t)
			if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, want) {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestNeverReadyTimesOut(t *testing.T) {
	cfg, _ := fakeConfig(t, "silent")
	cfg.ReadyTimeout = 500 * time.Millisecond
	t0 := time.Now()
	_, err := newProvider(t, cfg).Start(context.Background(), request(t, "x"))
	elapsed := time.Since(t0)
	var timeout *childproc.ReadyTimeoutError
	var se *childproc.StartError
	if !errors.As(err, &timeout) || !errors.As(err, &se) || se.Stage != "handshake" {
		t.Fatalf("err = %v", err)
	}
	if elapsed < cfg.ReadyTimeout || elapsed > cfg.ReadyTimeout+10*time.Second {
		t.Errorf("Start failed after %s", elapsed)
	}
	checkNoChildren(t)
}

func TestCancelBeforeReadyReapsTheProcess(t *testing.T) {
	cfg, _ := fakeConfig(t, "silent")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := newProvider(t, cfg).Start(ctx, request(t, "x"))
	if !errors.Is(err, subagent.ErrAbortedBeforeReady) {
		t.Fatalf("err = %v", err)
	}
	checkNoChildren(t)
}

func TestStartFailures(t *testing.T) {
	t.Run("exit", func(t *testing.T) {
		cfg, _ := fakeConfig(t, "exit")
		_, err := newProvider(t, cfg).Start(context.Background(), request(t, "x"))
		var exit *childproc.ExitError
		if !errors.As(err, &exit) || !strings.Contains(err.Error(), "exit status 2") || !strings.Contains(err.Error(), "cannot load config.toml") {
			t.Fatalf("err = %v", err)
		}
		checkNoChildren(t)
	})
	t.Run("thread rejected", func(t *testing.T) {
		cfg, _ := fakeConfig(t, "reject-thread")
		_, err := newProvider(t, cfg).Start(context.Background(), request(t, "x"))
		var rpc *codex.RPCError
		if !errors.As(err, &rpc) || rpc.Method != "thread/start" || rpc.Code != -32600 {
			t.Fatalf("err = %v", err)
		}
		checkNoChildren(t)
	})
	t.Run("missing program", func(t *testing.T) {
		p := newProvider(t, codex.Config{Options: childproc.Options{Command: "/no/such/codex"}})
		_, err := p.Start(context.Background(), request(t, "x"))
		var se *childproc.StartError
		if !errors.As(err, &se) || se.Stage != "spawn" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("parent cwd gone", func(t *testing.T) {
		cfg, log := fakeConfig(t, "scripted")
		req := request(t, "x")
		if err := os.Remove(req.Parent.Cwd()); err != nil {
			t.Fatal(err)
		}
		_, err := newProvider(t, cfg).Start(context.Background(), req)
		var se *childproc.StartError
		if !errors.As(err, &se) || se.Stage != "cwd" {
			t.Fatalf("err = %v", err)
		}
		if _, err := os.Stat(log); !os.IsNotExist(err) {
			t.Error("the fake was spawned")
		}
	})
	t.Run("no parent, no text, cancelled", func(t *testing.T) {
		cfg, log := fakeConfig(t, "scripted")
		p := newProvider(t, cfg)
		if _, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x")}); err == nil {
			t.Error("started without a parent")
		}
		if _, err := p.Start(context.Background(), subagent.StartRequest{Parent: subagenttest.ParentAgent(t)}); err == nil {
			t.Error("started without a prompt")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.Start(ctx, request(t, "x")); !errors.Is(err, subagent.ErrAbortedBeforeReady) {
			t.Errorf("cancelled start: %v", err)
		}
		if _, err := os.Stat(log); !os.IsNotExist(err) {
			t.Error("the fake was spawned")
		}
	})
}

func TestConfiguredCodexHomeAndScrubbedEnv(t *testing.T) {
	t.Setenv("CODEX_TEST_SECRET_TOKEN", "leak")
	home := t.TempDir()
	cwd := t.TempDir()
	cfg, log := fakeConfig(t, "scripted")
	cfg.CodexHome, cfg.Cwd = home, cwd
	res, lg := runFake(t, cfg, log, "hello")
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "echo: hello" {
		t.Fatalf("result %+v", res)
	}
	env := map[string]any{}
	json.Unmarshal(lg[0]["env"], &env)
	if env["CODEX_HOME"] != home || env["secret"] != "" || env["cwd"] != cwd {
		t.Errorf("child env %v", env)
	}
	if _, err := os.Stat(home); err != nil {
		t.Errorf("configured CODEX_HOME removed: %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []codex.Config{
		{PermissionMode: "sometimes"},
		{Options: childproc.Options{Cwd: "/no/such/dir"}},
		{Options: childproc.Options{ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: -time.Second}}},
		{Options: childproc.Options{Env: map[string]string{"CODEX_HOME": "/tmp"}}},
		{Options: childproc.Options{Env: map[string]string{"A=B": "x"}}},
		{Config: map[string]any{"bad": make(chan int)}},
	} {
		var ce *codex.ConfigError
		if _, err := codex.New(cfg); !errors.As(err, &ce) {
			t.Errorf("config %+v: err = %v", cfg, err)
		}
	}
	p, err := codex.New(codex.Config{})
	if err != nil || p.Name() != "codex" || p.Capabilities() != (subagent.Capabilities{}) || p.InheritsParentContext() {
		t.Fatalf("defaults: %v %v", p, err)
	}
}

func TestConformance(t *testing.T) {
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			cfg, _ := fakeConfig(t, "scripted")
			return newProvider(t, cfg), subagenttest.ParentAgent(t)
		},
		Leftovers: noChildren,
	})
}
