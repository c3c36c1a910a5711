package claudecode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/claudecode"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) != "" {
		os.Exit(fakeClaude())
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fakeConfig runs this test binary as a fake claude.
func fakeConfig() claudecode.Config {
	return claudecode.Config{Options: childproc.Options{Command: os.Args[0], Env: map[string]string{fakeEnv: "1", "GORACE": "atexit_sleep_ms=0"},
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 10 * time.Second, CancelGrace: 2 * time.Second, EOFGrace: 300 * time.Millisecond, TermGrace: 300 * time.Millisecond}}}
}

func newProvider(t *testing.T, cfg claudecode.Config) *claudecode.Provider {
	t.Helper()
	p, err := claudecode.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func noChildren() error { return proc.NoChildren() }

// checkNoChildren fails the test if a child process of the test remains
// once it has ended.
func checkNoChildren(t *testing.T) {
	t.Cleanup(func() {
		if err := noChildren(); err != nil {
			t.Error(err)
		}
	})
}

// recorder collects progress.
type recorder struct {
	mu sync.Mutex
	ps []subagent.Progress
}

func (r *recorder) add(p subagent.Progress) {
	r.mu.Lock()
	r.ps = append(r.ps, p)
	r.mu.Unlock()
}

func (r *recorder) all() []subagent.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ps)
}

func startWith(t *testing.T, p *claudecode.Provider, ctx context.Context, prompt string, progress func(subagent.Progress)) subagent.Run {
	t.Helper()
	run, err := p.Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt(prompt), Parent: subagenttest.ParentAgent(t), Depth: 1, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Dispose(context.Background()) })
	return run
}

func start(t *testing.T, p *claudecode.Provider, ctx context.Context, prompt string) subagent.Run {
	t.Helper()
	return startWith(t, p, ctx, prompt, nil)
}

// runToEnd starts prompt, waits for the result and disposes the run.
func runToEnd(t *testing.T, cfg claudecode.Config, prompt string) subagent.Result {
	t.Helper()
	run := start(t, newProvider(t, cfg), context.Background(), prompt)
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	return res
}

func TestConformance(t *testing.T) {
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return newProvider(t, fakeConfig()), subagenttest.ParentAgent(t)
		},
		Leftovers: noChildren,
	})
}

func TestAnswer(t *testing.T) {
	checkNoChildren(t)
	var rec recorder
	run := startWith(t, newProvider(t, fakeConfig()), context.Background(), "hello child", rec.add)
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "done: hello child" || res.Diagnostic != "" {
		t.Fatalf("result %+v", res)
	}
	want := map[string]content.Usage{"claude-code/fake-model": {Input: 11, Output: 5, CacheRead: 3, CacheWrite: 2, Reasoning: 1}}
	if !mapsEqual(res.Usage, want) {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if !strings.HasPrefix(run.ID(), "claude-") || run.ID() == "claude-fake-session" || run.LocalAgent() != nil {
		t.Errorf("run id %q, local agent %v", run.ID(), run.LocalAgent())
	}
	if res.CostUSD != 0.0125 {
		t.Errorf("cost %v", res.CostUSD)
	}
	kinds := []subagent.ProgressKind{}
	for _, p := range rec.all() {
		kinds = append(kinds, p.Kind)
	}
	if want := []subagent.ProgressKind{subagent.ProgressTurnStart, subagent.ProgressText, subagent.ProgressTurnEnd}; !slices.Equal(kinds, want) {
		t.Errorf("progress %v, want %v", kinds, want)
	}
}

func mapsEqual(a, b map[string]content.Usage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestUsageWithoutModelUsageFallsBackToInitModel(t *testing.T) {
	checkNoChildren(t)
	res := runToEnd(t, fakeConfig(), scenarioNoUsage)
	want := map[string]content.Usage{"claude-code/fake-model": {Input: 5, Output: 2}}
	if res.StopReason != subagent.Completed || !mapsEqual(res.Usage, want) {
		t.Fatalf("result %+v", res)
	}
}

// fakeInfo is what the args scenario reports.
type fakeInfo struct {
	Args            []string `json:"args"`
	ConfigDir       string   `json:"configDir"`
	ConfigDirExists bool     `json:"configDirExists"`
	Cwd             string   `json:"cwd"`
	Env             []string `json:"env"`
}

func argsRun(t *testing.T, cfg claudecode.Config, a *agent.Agent) fakeInfo {
	t.Helper()
	run, err := newProvider(t, cfg).Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt(scenarioArgs), Parent: a, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	var info fakeInfo
	if err := json.Unmarshal([]byte(content.JoinText(res.Output)), &info); err != nil {
		t.Fatalf("result %+v: %v", res, err)
	}
	return info
}

func TestCommandLineEnvAndConfigDir(t *testing.T) {
	checkNoChildren(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("SOME_API_TOKEN", "secret")
	a := subagenttest.ParentAgent(t)

	cfg := fakeConfig()
	info := argsRun(t, cfg, a)
	want := []string{"-p", "--output-format", "stream-json", "--input-format", "stream-json", "--verbose",
		"--permission-mode", "dontAsk", "--permission-prompt-tool", "stdio", "--no-session-persistence",
		"--disallowedTools", "AskUserQuestion"}
	if !slices.Equal(info.Args, want) {
		t.Errorf("args %q\nwant %q", info.Args, want)
	}
	if info.Cwd != a.Cwd() {
		t.Errorf("cwd %q, want the parent's %q", info.Cwd, a.Cwd())
	}
	if !info.ConfigDirExists || filepath.Dir(info.ConfigDir) != tmp {
		t.Errorf("config dir %q (exists %v), want a fresh one in %s", info.ConfigDir, info.ConfigDirExists, tmp)
	}
	if _, err := os.Stat(info.ConfigDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the per-run config dir survives Dispose: %v", err)
	}
	if slices.ContainsFunc(info.Env, func(kv string) bool { return strings.HasPrefix(kv, "SOME_API_TOKEN=") }) {
		t.Error("a secret reached the child")
	}

	cwd, configDir := t.TempDir(), t.TempDir()
	cfg.Cwd, cfg.ConfigDir, cfg.Model, cfg.PermissionMode = cwd, configDir, "opus", "plan"
	cfg.AllowedTools, cfg.DisallowedTools, cfg.MaxTurns = []string{"Read", "Bash(git *)"}, []string{"WebFetch"}, 3
	cfg.Args, cfg.PassEnv, cfg.Env["EXTRA"] = []string{"--bare"}, []string{"SOME_API_TOKEN"}, "x"
	info = argsRun(t, cfg, a)
	want = []string{"-p", "--output-format", "stream-json", "--input-format", "stream-json", "--verbose",
		"--permission-mode", "plan", "--permission-prompt-tool", "stdio", // sessions are kept in a configured dir
		"--model", "opus", "--allowedTools", "Read,Bash(git *)", "--disallowedTools", "WebFetch,AskUserQuestion,ExitPlanMode",
		"--max-turns", "3", "--bare"}
	if !slices.Equal(info.Args, want) {
		t.Errorf("args %q\nwant %q", info.Args, want)
	}
	if info.Cwd != cwd || info.ConfigDir != configDir {
		t.Errorf("cwd %q, config dir %q", info.Cwd, info.ConfigDir)
	}
	if _, err := os.Stat(configDir); err != nil {
		t.Errorf("a configured config dir was removed: %v", err)
	}
	for _, kv := range []string{"SOME_API_TOKEN=secret", "EXTRA=x"} {
		if !slices.Contains(info.Env, kv) {
			t.Errorf("the child lacks %s", kv)
		}
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestResultMapping(t *testing.T) {
	checkNoChildren(t)
	for _, tc := range []struct {
		prompt  string
		stop    subagent.StopReason
		output  string
		diagHas []string
	}{
		{scenario401, subagent.Failed, "", []string{`claude result "success" with is_error`, "API status 401", "Invalid API key", "exit status 1", "cost $0"}},
		{scenarioBlank, subagent.Failed, "", []string{"the result text is blank", "exit status 0"}},
		{scenarioMaxTurns, subagent.Failed, "trying", []string{`"error_max_turns"`, "Reached maximum number of turns (1)", "terminal_reason max_turns"}},
		{scenarioDuringExecution, subagent.Failed, "", []string{`"error_during_execution"`, "something broke"}},
		{scenarioMaxTokens, subagent.MaxTokens, "a very long answer, cut", []string{"api_error max_output_tokens"}},
	} {
		t.Run(strings.TrimPrefix(tc.prompt, "scenario: "), func(t *testing.T) {
			res := runToEnd(t, fakeConfig(), tc.prompt)
			if res.StopReason != tc.stop || content.JoinText(res.Output) != tc.output {
				t.Fatalf("result %+v", res)
			}
			for _, s := range tc.diagHas {
				if !strings.Contains(res.Diagnostic, s) {
					t.Errorf("diagnostic %q lacks %q", res.Diagnostic, s)
				}
			}
		})
	}
}

func TestPermissionRequests(t *testing.T) {
	checkNoChildren(t)
	denyWrite := permission.Rules{Tools: map[string]permission.Decision{"write_file": permission.Deny}}
	for _, tc := range []struct {
		name, permission string
		rules            permission.Rules
		allowed          bool
	}{
		{"default policy allows", "", permission.Rules{}, true},
		{"policy allows", claudecode.PermissionPolicy, permission.Rules{}, true},
		{"policy denies Write", claudecode.PermissionPolicy, denyWrite, false},
		{"deny", claudecode.PermissionDeny, permission.Rules{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fakeConfig()
			cfg.Permission = tc.permission
			var rec recorder
			req := subagent.StartRequest{Prompt: subagenttest.Prompt(scenarioTool), Parent: subagenttest.PolicyParent(t, tc.rules, nil),
				Depth: 1, Progress: rec.add}
			run, err := newProvider(t, cfg).Start(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			res := subagenttest.Wait(t, run)
			subagenttest.Dispose(t, run)
			want := "permission: deny"
			if tc.allowed {
				want = "permission: allow"
			}
			if res.StopReason != subagent.Completed || content.JoinText(res.Output) != want {
				t.Fatalf("result %+v, want output %q", res, want)
			}
			var call, result bool
			for _, p := range rec.all() {
				switch {
				case p.Kind == subagent.ProgressToolCall && p.Tool == "Write" && p.CallID == "toolu_01":
					call = true
				case p.Kind == subagent.ProgressToolResult && p.CallID == "toolu_01" && p.IsError == !tc.allowed:
					result = true
				}
			}
			if !call || !result {
				t.Errorf("progress %+v lacks the tool call or its result", rec.all())
			}
		})
	}
}

func TestInterruptHonoured(t *testing.T) {
	checkNoChildren(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := start(t, newProvider(t, fakeConfig()), ctx, scenarioHang)
	cancel()
	res := subagenttest.Wait(t, run)
	if res.StopReason != subagent.Aborted || content.JoinText(res.Output) != "working…" {
		t.Fatalf("result %+v", res)
	}
	if u := res.Usage["claude-code/fake-model"]; u.Input != 11 {
		t.Errorf("usage %+v", res.Usage)
	}
	subagenttest.Dispose(t, run)
}

func TestInterruptIgnoredIsAbortedAfterGrace(t *testing.T) {
	checkNoChildren(t)
	cfg := fakeConfig()
	cfg.CancelGrace = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := start(t, newProvider(t, cfg), ctx, scenarioIgnore)
	began := time.Now()
	cancel()
	res := subagenttest.Wait(t, run)
	if res.StopReason != subagent.Aborted || content.JoinText(res.Output) != "working…" {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(began); d < cfg.CancelGrace {
		t.Errorf("settled after %s, before the grace", d)
	}
	// The child ignored the interrupt, EOF and SIGTERM: it was killed
	// before the run settled.
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
	subagenttest.Dispose(t, run)
}

func TestCrashMidTurnIsFailed(t *testing.T) {
	checkNoChildren(t)
	res := runToEnd(t, fakeConfig(), scenarioCrash)
	if res.StopReason != subagent.Failed || content.JoinText(res.Output) != "partial work" {
		t.Fatalf("result %+v", res)
	}
	for _, s := range []string{"claude exited during the turn", "exit status 7", "fatal: boom"} {
		if !strings.Contains(res.Diagnostic, s) {
			t.Errorf("diagnostic %q lacks %q", res.Diagnostic, s)
		}
	}
}

func TestUnknownMessagesAreTolerated(t *testing.T) {
	checkNoChildren(t)
	var rec recorder
	run := startWith(t, newProvider(t, fakeConfig()), context.Background(), scenarioUnknown, rec.add)
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "tolerated" {
		t.Fatalf("result %+v", res)
	}
	for _, p := range rec.all() {
		if p.Kind == subagent.ProgressText && p.Text != "tolerated" {
			t.Errorf("unexpected progress %+v", p)
		}
	}
}

func TestOverlongLineFailsTheRun(t *testing.T) {
	checkNoChildren(t)
	p := newProvider(t, fakeConfig())
	claudecode.SetMaxLine(p, 1024)
	run := start(t, p, context.Background(), scenarioLongLine)
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "a line exceeds 1024 bytes") {
		t.Fatalf("result %+v", res)
	}
}

func TestSilentChildFailsStartAfterReadyTimeout(t *testing.T) {
	checkNoChildren(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cfg := fakeConfig()
	cfg.ReadyTimeout = 500 * time.Millisecond
	began := time.Now()
	_, err := newProvider(t, cfg).Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt(scenarioSilent), Parent: subagenttest.ParentAgent(t), Depth: 1})
	var startErr *childproc.StartError
	var timeout *childproc.ReadyTimeoutError
	if !errors.As(err, &startErr) || startErr.Stage != "ready" || !errors.As(err, &timeout) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(began); d < cfg.ReadyTimeout {
		t.Errorf("failed after %s", d)
	}
	if !strings.Contains(startErr.Diagnostic, "killed by signal KILL") { // it ignored SIGTERM
		t.Errorf("diagnostic %q", startErr.Diagnostic)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestExitBeforeReadyFailsStart(t *testing.T) {
	checkNoChildren(t)
	_, err := newProvider(t, fakeConfig()).Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt(scenarioExit), Parent: subagenttest.ParentAgent(t), Depth: 1})
	var exit *childproc.ExitError
	if !errors.As(err, &exit) || !strings.Contains(exit.Diagnostic, "exit status 3") || !strings.Contains(exit.Diagnostic, "fatal: cannot start") {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelBeforeReadyReapsTheChild(t *testing.T) {
	checkNoChildren(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the fake runs: Start waits for its init then. A real
		// process: poll for it on the real clock, boundedly.
		for deadline := time.Now().Add(10 * time.Second); len(proc.Children(os.Getpid())) == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	_, err := newProvider(t, fakeConfig()).Start(ctx, subagent.StartRequest{Prompt: subagenttest.Prompt(scenarioSilent), Parent: subagenttest.ParentAgent(t), Depth: 1})
	if !errors.Is(err, subagent.ErrAbortedBeforeReady) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

func TestStartErrors(t *testing.T) {
	checkNoChildren(t)
	p := newProvider(t, fakeConfig())
	if _, err := p.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x")}); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Errorf("no parent: %v", err)
	}
	if _, err := p.Start(context.Background(), subagent.StartRequest{Parent: subagenttest.ParentAgent(t), Depth: 1}); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Errorf("no prompt: %v", err)
	}
	missing := newProvider(t, claudecode.Config{Options: childproc.Options{Command: "/no/such/claude"}})
	_, err := missing.Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: subagenttest.ParentAgent(t), Depth: 1})
	var startErr *childproc.StartError
	if !errors.As(err, &startErr) || startErr.Stage != "spawn" {
		t.Errorf("missing command: %v", err)
	}
}

func TestConfig(t *testing.T) {
	p := newProvider(t, claudecode.Config{})
	if p.Name() != "claude-code" || p.Capabilities() != (subagent.Capabilities{}) || p.InheritsParentContext() {
		t.Errorf("provider %s %+v %v", p.Name(), p.Capabilities(), p.InheritsParentContext())
	}
	if p := newProvider(t, claudecode.Config{Options: childproc.Options{Name: "cc"}}); p.Name() != "cc" {
		t.Errorf("name %q", p.Name())
	}
	for field, cfg := range map[string]claudecode.Config{
		"permissionMode":  {PermissionMode: "yolo"},
		"permission":      {Permission: "maybe"},
		"maxTurns":        {MaxTurns: -1},
		"readyTimeout":    {Options: childproc.Options{ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: -time.Second}}},
		"cancelGrace":     {Options: childproc.Options{ChildTimeouts: subagent.ChildTimeouts{CancelGrace: -time.Second}}},
		"eofGrace":        {Options: childproc.Options{ChildTimeouts: subagent.ChildTimeouts{EOFGrace: -time.Second}}},
		"termGrace":       {Options: childproc.Options{ChildTimeouts: subagent.ChildTimeouts{TermGrace: -time.Second}}},
		"cwd":             {Options: childproc.Options{Cwd: "/no/such/dir"}},
		"env":             {Options: childproc.Options{Env: map[string]string{"CLAUDE_CONFIG_DIR": "/x"}}},
		"allowedTools":    {AllowedTools: []string{"Read,Write"}},
		"disallowedTools": {DisallowedTools: []string{" "}},
	} {
		_, err := claudecode.New(cfg)
		var cfgErr *claudecode.ConfigError
		if !errors.As(err, &cfgErr) || cfgErr.Field != field {
			t.Errorf("%s: err = %v", field, err)
		}
	}
}
