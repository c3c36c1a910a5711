package hook_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/internal/proc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// set compiles one group of commands for ev.
func set(t *testing.T, ev hook.Event, matcher string, cmds ...hook.Command) *hook.Set {
	t.Helper()
	s, warnings, err := hook.NewSettings(hook.Config{ev: {{Matcher: matcher, Hooks: cmds}}}, "test", nil)
	if err != nil || len(warnings) > 0 {
		t.Fatal(err, warnings)
	}
	return s
}

func cmd(line string) hook.Command { return hook.Command{Command: line} }

func noChildren(t *testing.T) {
	t.Helper()
	if err := proc.NoChildren(); err != nil {
		t.Fatal(err)
	}
}

func TestExitTwoBlocksWithStderrAsReason(t *testing.T) {
	s := set(t, hook.PreToolUse, "Bash", cmd(`echo "no rm -rf here" >&2; exit 2`))
	err := s.Run(t.Context(), hook.Input{Event: hook.PreToolUse, Cwd: t.TempDir(), ToolName: "bash"})
	var b *hook.Blocked
	if !errors.As(err, &b) || b.Reason != "no rm -rf here\n" || b.ErrorCode() != hook.CodeBlocked {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "blocked by a PreToolUse hook") || !strings.Contains(err.Error(), "no rm -rf here") {
		t.Errorf("message %q", err)
	}
	noChildren(t)
}

func TestOtherExitsContinue(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "second-ran")
	s := set(t, hook.PreToolUse, "", cmd("echo broken >&2; exit 1"), cmd("exit 0"), cmd("touch "+marker))
	if err := s.Run(t.Context(), hook.Input{Event: hook.PreToolUse, Cwd: dir, ToolName: "read_file"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the hooks after a failing one did not run: %v", err)
	}
}

func TestABlockStopsTheHooksAfterIt(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	s := set(t, hook.PreToolUse, "", cmd("exit 2"), cmd("touch "+marker))
	if err := s.Run(t.Context(), hook.Input{Event: hook.PreToolUse, Cwd: dir, ToolName: "bash"}); err == nil {
		t.Fatal("not blocked")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook after the block ran")
	}
}

// The event arrives as JSON on stdin, in Claude Code's field names; the
// hook runs in the agent's cwd with the scrubbed environment.
func TestInputEnvironmentAndCwd(t *testing.T) {
	t.Setenv("HOOK_TEST_API_TOKEN", "secret-value")
	t.Setenv("HOOK_TEST_PLAIN", "visible")
	dir := t.TempDir()
	s := set(t, hook.PostToolUse, "Edit|Write",
		cmd(`cat > input.json; env > env.txt; pwd > pwd.txt`))
	in := hook.Input{Event: hook.PostToolUse, SessionID: "s1", Cwd: dir, Agent: []string{"spawn · fix"}, ToolName: "write_file",
		ToolUseID: "c1", ToolInput: json.RawMessage(`{"path":"a.txt"}`), ToolResponse: &hook.ToolResponse{Content: "wrote 3 bytes"}}
	if err := s.Run(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("stdin is not JSON: %s", raw)
	}
	for k, want := range map[string]any{"hook_event_name": "PostToolUse", "session_id": "s1", "cwd": dir, "tool_name": "Write",
		"tool_use_id": "c1", "duration_ms": 0.0} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (input %s)", k, got[k], want, raw)
		}
	}
	if ti, _ := got["tool_input"].(map[string]any); ti["file_path"] != filepath.Join(dir, "a.txt") || ti["path"] != nil {
		t.Errorf("tool_input = %v", got["tool_input"])
	}
	if tr, _ := got["tool_response"].(map[string]any); tr["filePath"] != filepath.Join(dir, "a.txt") {
		t.Errorf("tool_response = %v", got["tool_response"])
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	if strings.Contains(string(env), "secret-value") || !strings.Contains(string(env), "HOOK_TEST_PLAIN=visible") ||
		!strings.Contains(string(env), "CLAUDE_PROJECT_DIR="+dir) {
		t.Errorf("environment:\n%s", env)
	}
	if pwd, _ := os.ReadFile(filepath.Join(dir, "pwd.txt")); strings.TrimSpace(string(pwd)) != dir {
		t.Errorf("cwd %q, want %q", pwd, dir)
	}
}

func TestMatchers(t *testing.T) {
	tests := []struct {
		matcher string
		in      hook.Input
		runs    bool
	}{
		{"", hook.Input{Event: hook.PreToolUse, ToolName: "grep"}, true},
		{"*", hook.Input{Event: hook.PreToolUse, ToolName: "grep"}, true},
		{"bash", hook.Input{Event: hook.PreToolUse, ToolName: "bash"}, true},
		{"Bash", hook.Input{Event: hook.PreToolUse, ToolName: "bash"}, true},
		{"Edit|Write", hook.Input{Event: hook.PreToolUse, ToolName: "edit_file"}, true},
		{"Edit|Write", hook.Input{Event: hook.PreToolUse, ToolName: "read_file"}, false},
		{"bas", hook.Input{Event: hook.PreToolUse, ToolName: "bash"}, false}, // anchored
		{"mcp__.*", hook.Input{Event: hook.PreToolUse, ToolName: "mcp__github__list"}, true},
		{"explore", hook.Input{Event: hook.SubagentStart, AgentType: "explore"}, true},
		{"explore", hook.Input{Event: hook.SubagentStart, AgentType: "general"}, false},
		{"explore", hook.Input{Event: hook.PostToolUse, ToolName: "bash"}, false}, // another event's hook
	}
	for _, tt := range tests {
		ev := hook.PreToolUse
		if tt.in.Event == hook.SubagentStart {
			ev = hook.SubagentStart
		}
		s := set(t, ev, tt.matcher, cmd("exit 2"))
		tt.in.Cwd = t.TempDir()
		if err := s.Run(t.Context(), tt.in); (err != nil) != tt.runs {
			t.Errorf("matcher %q on %+v: ran = %v, want %v", tt.matcher, tt.in, err != nil, tt.runs)
		}
	}
}

// A hook past its timeout is killed with its whole process group; for a
// PreToolUse hook the call is then refused, for PostToolUse it goes on.
func TestTimeout(t *testing.T) {
	dir := t.TempDir()
	slow := hook.Command{Command: "sleep 30 & sleep 30", Timeout: 0.2}
	err := set(t, hook.PreToolUse, "", slow).Run(t.Context(), hook.Input{Event: hook.PreToolUse, Cwd: dir, ToolName: "bash"})
	var b *hook.Blocked
	if !errors.As(err, &b) || !strings.Contains(b.Reason, "did not finish within its timeout (200ms)") {
		t.Fatalf("err = %v", err)
	}
	noChildren(t)
	if err := set(t, hook.PostToolUse, "", slow).Run(t.Context(), hook.Input{Event: hook.PostToolUse, Cwd: dir, ToolName: "bash"}); err != nil {
		t.Fatalf("a PostToolUse timeout blocked: %v", err)
	}
	noChildren(t)
}

func TestCancelKillsTheHook(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancelCause(t.Context())
	started := filepath.Join(dir, "started")
	s := set(t, hook.PreToolUse, "", cmd("touch "+started+"; sleep 30"))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, hook.Input{Event: hook.PreToolUse, Cwd: dir, ToolName: "bash"}) }()
	// A real process makes the file: poll for it on the real clock, boundedly.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel(errors.New("the hook never started"))
			t.Fatal("the hook never started")
		}
	}
	stop := errors.New("stop")
	cancel(stop)
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("err = %v", err)
	}
	noChildren(t)
}

// A hook that floods stdout and stderr and never reads stdin is bounded:
// the reason keeps the last 4 KiB of stderr.
func TestHostileOutputIsBounded(t *testing.T) {
	s := set(t, hook.PreToolUse, "", cmd(`head -c 5000000 /dev/zero; head -c 300000 /dev/zero | tr '\0' x >&2; echo END >&2; exit 2`))
	big := json.RawMessage(`{"content":"` + strings.Repeat("y", 1<<20) + `"}`)
	err := s.Run(t.Context(), hook.Input{Event: hook.PreToolUse, Cwd: t.TempDir(), ToolName: "write_file", ToolInput: big})
	var b *hook.Blocked
	if !errors.As(err, &b) || len(b.Reason) > 4096 || !strings.HasSuffix(b.Reason, "END\n") {
		t.Fatalf("err = %.200v (reason %d bytes)", err, len(b.Reason))
	}
	noChildren(t)
}

func TestWith(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	parent := set(t, hook.Stop, "", cmd("echo parent >> "+log))
	child := set(t, hook.Stop, "", cmd("echo child >> "+log))
	var none *hook.Set
	if none.With(nil) != nil || none.With(child) != child || parent.With(none) != parent || !none.Empty() {
		t.Fatal("With of empty sets")
	}
	both := parent.With(child)
	if !both.Has(hook.Stop) || both.Has(hook.PreToolUse) {
		t.Fatal("Has")
	}
	if err := both.Run(t.Context(), hook.Input{Event: hook.Stop, Cwd: dir}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(log); string(got) != "parent\nchild\n" {
		t.Fatalf("ran %q, want the parent's hooks, then the child's", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		cfg   hook.Config
		field string
		msg   string
	}{
		{hook.Config{"UserPromptSubmit": {{Hooks: []hook.Command{cmd("x")}}}}, "UserPromptSubmit", "unknown hook event (want one of PreToolUse, PostToolUse, SubagentStart, SubagentStop, Stop)"},
		{hook.Config{hook.PreToolUse: {{Matcher: "(", Hooks: []hook.Command{cmd("x")}}}}, "PreToolUse[0].matcher", "bad regular expression"},
		{hook.Config{hook.PreToolUse: {{Matcher: "bash"}}}, "PreToolUse[0].hooks", "no hook to run"},
		{hook.Config{hook.Stop: {{Hooks: []hook.Command{{Command: " "}}}}}, "Stop[0].hooks[0].command", "is required"},
		{hook.Config{hook.Stop: {{Hooks: []hook.Command{{Type: "prompt", Command: "x"}}}}}, "Stop[0].hooks[0].type", `want "command", got "prompt"`},
		{hook.Config{hook.Stop: {{Hooks: []hook.Command{{Command: "x", Timeout: -1}}}}}, "Stop[0].hooks[0].timeout", "must not be negative"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		var ce *hook.ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !strings.HasPrefix(ce.Msg, tt.msg) {
			t.Errorf("Validate(%v) = %v, want %s: %s", tt.cfg, err, tt.field, tt.msg)
		}
		if _, err := hook.New(tt.cfg, "x", nil); err == nil {
			t.Errorf("New accepted %v", tt.cfg)
		}
	}
}
