package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

func hooks(t *testing.T, cfg hook.Config) *hook.Set {
	t.Helper()
	s, err := hook.New(cfg, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func command(line string) []hook.Group { return []hook.Group{{Hooks: []hook.Command{{Command: line}}}} }

// hookEnv is a registry whose top-level agents have hooks, with a "bash"
// tool that leaves a marker file when it runs.
func hookEnv(t *testing.T, root *hook.Set, entries ...scripted.Entry) (*agent.Registry, string) {
	t.Helper()
	dir := t.TempDir()
	tools := tool.NewRegistry()
	tools.Register(tool.Definition{Name: "bash", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		os.WriteFile(filepath.Join(dir, "bash-ran"), nil, 0o644)
		return tool.TextResult("ran"), nil
	}})
	bus := event.New(nil)
	reg := llm.NewRegistry()
	reg.Register("test", scripted.New(entries...))
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, bus), LLM: reg, Tools: tools,
		Prompt: prompt.NewRegistry(), Events: bus, Hooks: root})
	t.Cleanup(func() {
		if err := agents.DisposeAll(context.Background()); err != nil {
			t.Error(err)
		}
		if err := proc.NoChildren(); err != nil {
			t.Error(err)
		}
	})
	return agents, dir
}

// A PreToolUse hook blocks bash: the model reads the hook's reason and the
// command never runs.
func TestPreToolUseHookBlocks(t *testing.T) {
	guard := hooks(t, hook.Config{hook.PreToolUse: {{Matcher: "Bash", Hooks: []hook.Command{
		{Command: `grep -q '"tool_name":"Bash"' && echo "no shell commands in this repository" >&2 && exit 2`}}}}})
	agents, dir := hookEnv(t, guard, scripted.ToolCalls("", scripted.Call{Name: "bash", Arguments: `{}`}), scripted.Text("ok"))
	a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: dir, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "run something")
	rs := results(a.Session().Events())
	if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != hook.CodeBlocked {
		t.Fatalf("results %+v", rs)
	}
	text := content.JoinText(rs[0].Message.Content[0].Content)
	if !strings.Contains(text, "blocked by a PreToolUse hook") || !strings.Contains(text, "no shell commands in this repository") {
		t.Fatalf("the model reads %q", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "bash-ran")); err == nil {
		t.Fatal("the blocked command ran")
	}
}

// A PostToolUse hook sees the call and its result; a Stop hook sees the
// turn's end; a hook that exits 2 after the call adds its reason to the
// result.
func TestPostToolUseAndStopHooks(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log.jsonl")
	set := hooks(t, hook.Config{
		hook.PostToolUse: {{Hooks: []hook.Command{{Command: "cat >> " + log + "; echo >> " + log}, {Command: "echo 'remember to run the tests' >&2; exit 2"}}}},
		hook.Stop:        command("cat >> " + log + "; echo >> " + log),
	})
	agents, cwd := hookEnv(t, set, scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"ls"}`}), scripted.Text("ok"))
	a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "go")
	rs := results(a.Session().Events())
	if len(rs) != 1 || rs[0].Error != nil || len(rs[0].Message.Content) != 1 {
		t.Fatalf("results %+v", rs)
	}
	if text := content.JoinText(rs[0].Message.Content[0].Content); text != "ran\nPostToolUse hook: remember to run the tests" {
		t.Errorf("result %q", text)
	}
	raw, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", raw)
	}
	var post, stop map[string]any
	json.Unmarshal([]byte(lines[0]), &post)
	json.Unmarshal([]byte(lines[1]), &stop)
	if resp, _ := post["tool_response"].(map[string]any); post["hook_event_name"] != "PostToolUse" || post["tool_name"] != "Bash" ||
		post["tool_use_id"] != "c1" || post["tool_input"].(map[string]any)["command"] != "ls" ||
		resp["stdout"] != "ran" || post["session_id"] != a.ID() || post["cwd"] != cwd || post["duration_ms"] == nil {
		t.Errorf("PostToolUse input %v", post)
	}
	if stop["hook_event_name"] != "Stop" || stop["stop_reason"] != session.EndCompleted || stop["session_id"] != a.ID() ||
		stop["stop_hook_active"] != false || stop["last_assistant_message"] != "ok" {
		t.Errorf("Stop input %v", stop)
	}
}

// A child runs its parent's hooks and its own; it fires no Stop hook (its
// end is its parent's SubagentStop).
func TestChildrenInheritHooks(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	parentHooks := hooks(t, hook.Config{hook.PreToolUse: command("echo parent >> " + log), hook.Stop: command("echo stop >> " + log)})
	childHooks := hooks(t, hook.Config{hook.PreToolUse: command("echo child >> " + log)})
	agents, cwd := hookEnv(t, parentHooks, scripted.ToolCalls("", scripted.Call{Name: "bash", Arguments: `{}`}), scripted.Text("ok"))
	root, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	child, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}, Owner: root,
		Label: "spawn · x", Hooks: childHooks})
	if err != nil {
		t.Fatal(err)
	}
	if root.Hooks() != parentHooks {
		t.Error("the root's hooks are not the registry's")
	}
	run(t, child, "go")
	if got, _ := os.ReadFile(log); string(got) != "parent\nchild\n" {
		t.Fatalf("hooks ran %q, want the parent's then the child's, and no Stop", got)
	}
	in := child.HookInput(hook.PreToolUse)
	if len(in.Agent) != 1 || in.Agent[0] != "spawn · x" || in.SessionID != root.ID() || in.AgentID != child.ID() {
		t.Errorf("child's hook input %+v", in)
	}
}

// A child runs its SubagentStop hooks where a root runs Stop: one that
// always blocks continues the child's turn MaxStopContinuations times,
// then the turn ends with a warning; a root does not run SubagentStop, and
// the child's Subagent says that its hooks ran.
func TestChildSubagentStopIsBounded(t *testing.T) {
	var logs strings.Builder
	entries := make([]scripted.Entry, 0, agent.MaxStopContinuations+2)
	for range agent.MaxStopContinuations + 2 {
		entries = append(entries, scripted.Text("done"))
	}
	bus := event.New(nil)
	reg := llm.NewRegistry()
	reg.Register("test", scripted.New(entries...))
	always := hooks(t, hook.Config{hook.SubagentStop: command("cat > /dev/null; echo 'not yet' >&2; exit 2")})
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, bus), LLM: reg, Tools: tool.NewRegistry(),
		Prompt: prompt.NewRegistry(), Events: bus, Hooks: always, Log: slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))})
	t.Cleanup(func() { agents.DisposeAll(context.Background()) })
	root, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if end := run(t, root, "go"); end.Reason.Kind != session.EndCompleted || countAssistant(root) != 1 {
		t.Fatalf("the root's turn %+v with %d answers: a root ran SubagentStop", end, countAssistant(root))
	}
	sub := &agent.Subagent{Type: "checker"}
	child, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: root.Cwd(), Options: agent.Options{Provider: "test"}, Owner: root,
		Label: "spawn · x", Subagent: sub})
	if err != nil {
		t.Fatal(err)
	}
	if end := run(t, child, "go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("the child's turn %+v", end)
	}
	if n := countAssistant(child); n != 1+agent.MaxStopContinuations {
		t.Errorf("the child answered %d times, want %d", n, 1+agent.MaxStopContinuations)
	}
	if !strings.Contains(logs.String(), "a SubagentStop hook would continue the turn again; the turn ends") || !sub.StopHooksRan() {
		t.Errorf("no warning, or not marked (%v):\n%s", sub.StopHooksRan(), logs.String())
	}
	if in := child.HookInput(hook.PreToolUse); in.AgentType != "checker" || in.AgentID != child.ID() || in.SessionID != root.ID() {
		t.Errorf("the child's hook input %+v", in)
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
