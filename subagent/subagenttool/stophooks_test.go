package subagenttool_test

import (
	"context"
	"encoding/json"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/subagent"
)

// readInputs reads the hook inputs a recording hook appended to path, one
// JSON object a line.
func readInputs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, _ := os.ReadFile(path)
	var out []map[string]any
	for line := range strings.Lines(string(raw)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("hook input %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// record appends the hook's input to log, one line a run.
func record(log string) string { return "cat >> " + log + "; echo >> " + log }

// continuedChild answers "first answer", then, once a message carries
// the hook's reason, "second answer"; it counts its requests.
type continuedChild struct {
	mu    sync.Mutex
	calls int
}

func (c *continuedChild) stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	last := content.JoinText(req.Messages[len(req.Messages)-1].Content)
	if strings.Contains(last, "RUN THE TESTS") {
		return scripted.New(scripted.Text("second answer")).Stream(ctx, req)
	}
	return scripted.New(scripted.Text("first answer")).Stream(ctx, req)
}

func (c *continuedChild) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// A definition's Stop hook (its parent's SubagentStop) that prints
// decision block continues the in-process child's turn, as Claude Code
// does: the child reads the reason, its continued answer is the result,
// the re-run gets stop_hook_active true, and the hook does not run again
// after the child settled.
func TestSubagentStopBlockContinuesTheChild(t *testing.T) {
	child := &continuedChild{}
	log := filepath.Join(t.TempDir(), "hooks.jsonl")
	e := newEnv(t, child.stream,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"check","prompt":"check it","subagent_type":"checker"}`)),
		scripted.Text("ok"))
	block := record(log) + `; grep -q '"stop_hook_active":true' ` + log + ` || printf '%s' '{"decision":"block","reason":"RUN THE TESTS"}'`
	a := e.typed(t.TempDir(), map[string]string{"checker.md": "---\nname: checker\ndescription: d\n" +
		"hooks:\n  Stop: [{hooks: [{command: '" + strings.ReplaceAll(block, "'", "''") + "'}]}]\n---\nCheck.\n"})
	rs := runOn(t, a, "go")
	if len(rs) != 1 || rs[0].Error != nil || resultText(rs[0]) != "second answer" {
		t.Fatalf("result %+v %q, want the continued answer", rs, resultText(rs[0]))
	}
	if n := child.count(); n != 2 {
		t.Errorf("the child made %d model requests, want 2", n)
	}
	ins := readInputs(t, log)
	if len(ins) != 2 {
		t.Fatalf("SubagentStop ran %d times, want 2: %v", len(ins), ins)
	}
	for i, want := range []struct {
		active bool
		answer string
	}{{false, "first answer"}, {true, "second answer"}} {
		in := ins[i]
		if in["hook_event_name"] != "SubagentStop" || in["stop_hook_active"] != want.active || in["last_assistant_message"] != want.answer ||
			in["agent_type"] != "checker" || in["agent_id"] == nil || in["agent_id"] == a.ID() || in["session_id"] != a.ID() ||
			in["description"] != "check" || in["prompt"] != "check it" || in["provider"] != "spawn" || in["stop_reason"] != "completed" {
			t.Errorf("SubagentStop input %d: %v", i, in)
		}
	}
}

// The parent's SubagentStop hook that exits 2 continues the child with its
// stderr; one that always blocks is stopped after MaxStopContinuations
// continuations, and the child's last answer stands.
func TestSubagentStopExit2AndTheBound(t *testing.T) {
	for name, tc := range map[string]struct {
		hook  string
		calls int
	}{
		"once":   {`grep -q '"stop_hook_active":true' || { echo 'RUN THE TESTS' >&2; exit 2; }`, 2},
		"always": {`cat > /dev/null; echo 'RUN THE TESTS' >&2; exit 2`, 1 + agent.MaxStopContinuations},
	} {
		t.Run(name, func(t *testing.T) {
			child := &continuedChild{}
			e := newEnv(t, child.stream,
				scripted.ToolCalls("", call("subagent", `{"description":"check","prompt":"check it"}`)), scripted.Text("ok"))
			parent, err := e.rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"},
				Hooks: hooks(t, hook.Config{hook.SubagentStop: {{Hooks: []hook.Command{{Command: tc.hook}}}}})})
			if err != nil {
				t.Fatal(err)
			}
			rs := runOn(t, parent, "go")
			if len(rs) != 1 || rs[0].Error != nil || resultText(rs[0]) != "second answer" {
				t.Fatalf("result %+v %q", rs, resultText(rs[0]))
			}
			if n := child.count(); n != tc.calls {
				t.Errorf("the child made %d model requests, want %d", n, tc.calls)
			}
		})
	}
}

func hooks(t *testing.T, cfg hook.Config) *hook.Set {
	t.Helper()
	s, err := hook.New(cfg, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A background (continuable) child is continued by a SubagentStop block
// too, and the parent hears of its continued answer.
func TestSubagentStopContinuesABackgroundChild(t *testing.T) {
	log := filepath.Join(t.TempDir(), "hooks.jsonl")
	e := newCEnv(t, nil, func(in turnInput) scripted.Entry {
		switch {
		case in.child && strings.Contains(in.text, "RUN THE TESTS"):
			return scripted.Text("second answer")
		case in.child:
			return scripted.Text("first answer")
		case in.text == "delegate":
			return scripted.ToolCalls("", call("subagent", `{"description":"dig","prompt":"dig","run_in_background":true}`))
		}
		return scripted.Text("ok")
	})
	block := record(log) + `; grep -q '"stop_hook_active":true' ` + log + ` || { echo 'RUN THE TESTS' >&2; exit 2; }`
	parent, err := e.rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"},
		Hooks: hooks(t, hook.Config{hook.SubagentStop: {{Hooks: []hook.Command{{Command: block}}}}})})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan subagent.Ended, 1)
	defer event.On(e.rt.Events, func(ev subagent.Ended) { ended <- ev })()
	if _, err := parent.Run(context.Background(), content.UserText("delegate")); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ended:
		if got := content.JoinText(ev.LastAssistantMessage); got != "second answer" {
			t.Errorf("the child ended with %q, want the continued answer", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the background child never settled")
	}
	ins := readInputs(t, log)
	if len(ins) != 2 || ins[0]["stop_hook_active"] != false || ins[1]["stop_hook_active"] != true ||
		ins[1]["last_assistant_message"] != "second answer" || ins[1]["description"] != "dig" {
		t.Fatalf("SubagentStop inputs %v", ins)
	}
}

// A typed child's own hook events carry its subagent_type as agent_type and
// its session as agent_id; the parent's carry neither.
func TestChildEventsCarryAgentType(t *testing.T) {
	log := filepath.Join(t.TempDir(), "hooks.jsonl")
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		if last := req.Messages[len(req.Messages)-1]; last.Source.Kind == content.SourceTool {
			return scripted.New(scripted.Text("found")).Stream(ctx, req)
		}
		return scripted.New(scripted.ToolCalls("", call("glob", `{"pattern":"*.go"}`))).Stream(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"find","prompt":"find it","subagent_type":"finder"}`)),
		scripted.Text("ok"))
	a := e.typed(t.TempDir(), map[string]string{"finder.md": "---\nname: finder\ndescription: d\n" +
		"hooks:\n  PreToolUse: [{matcher: Glob, hooks: [{command: '" + record(log) + "'}]}]\n  PostToolUse: [{hooks: [{command: '" + record(log) + "'}]}]\n---\nFind.\n"})
	rs := runOn(t, a, "go")
	if len(rs) != 1 || resultText(rs[0]) != "found" {
		t.Fatalf("result %q", resultText(rs[0]))
	}
	ins := readInputs(t, log)
	if len(ins) != 2 {
		t.Fatalf("hook runs %v, want PreToolUse and PostToolUse of the child's glob", ins)
	}
	for _, in := range ins {
		if in["tool_name"] != "Glob" || in["agent_type"] != "finder" || in["agent_id"] == nil || in["agent_id"] == a.ID() || in["session_id"] != a.ID() {
			t.Errorf("%v input %v", in["hook_event_name"], in)
		}
	}
	if in := a.HookInput(hook.PreToolUse); in.AgentType != "" || in.AgentID != "" {
		t.Errorf("the parent's input %+v", in)
	}
}
