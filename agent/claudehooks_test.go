package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// settingsHooks compiles a user's hooks (every event dsh runs).
func settingsHooks(t *testing.T, cfg hook.Config) *hook.Set {
	t.Helper()
	s, warnings, err := hook.NewSettings(cfg, "test", nil)
	if err != nil || len(warnings) > 0 {
		t.Fatal(err, warnings)
	}
	return s
}

// printingHook is a hook that prints out (Claude Code's JSON output) and
// exits 0.
func printingHook(matcher, out string) []hook.Group {
	return []hook.Group{{Matcher: matcher, Hooks: []hook.Command{{Command: "cat >/dev/null; printf '%s' '" + out + "'"}}}}
}

// claudeEnv is hookEnv with the model returned, and a bash tool that
// records the commands it ran.
func claudeEnv(t *testing.T, root *hook.Set, entries ...scripted.Entry) (*agent.Registry, *scripted.Model, string, *[]string) {
	t.Helper()
	dir := t.TempDir()
	var ran []string
	tools := tool.NewRegistry()
	tools.Register(tool.Definition{Name: "bash", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		ran = append(ran, string(c.Arguments))
		return tool.TextResult("ran"), nil
	}})
	bus := event.New(nil)
	model := scripted.New(entries...)
	reg := llm.NewRegistry()
	reg.Register("test", model)
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
	return agents, model, dir, &ran
}

func bashCall(cmd string) scripted.Entry {
	return scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"` + cmd + `"}`})
}

// A PreToolUse hook's JSON decides: deny refuses (with its reason for the
// model), allow skips the ask the policy wants, ask asks where the policy
// allows, updatedInput changes what runs.
func TestPreToolUseJSONDecisions(t *testing.T) {
	tests := []struct {
		name, out string
		policy    permission.Decision
		asked     bool   // the asker was asked
		ran       string // the arguments bash ran with, "" for none
		reads     string // in the result the model reads
	}{
		{"deny", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"JSON-DENY"}}`,
			permission.Allow, false, "", "JSON-DENY"},
		{"legacy block", `{"decision":"block","reason":"LEGACY-BLOCK"}`, permission.Allow, false, "", "LEGACY-BLOCK"},
		{"allow skips the ask", `{"hookSpecificOutput":{"permissionDecision":"allow"}}`, permission.Ask, false, `{"command":"ls"}`, "ran"},
		{"ask asks", `{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}`, permission.Allow, true, `{"command":"ls"}`, "ran"},
		{"allow does not lift a deny", `{"hookSpecificOutput":{"permissionDecision":"allow"}}`, permission.Deny, false, "", "denies"},
		{"additionalContext", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"PRE-CONTEXT"}}`, permission.Allow, false, `{"command":"ls"}`, "PreToolUse hook additional context: PRE-CONTEXT"},
		{"updatedInput", `{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"ls -la"}}}`, permission.Allow, false, `{"command":"ls -la"}`, "ran"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := settingsHooks(t, hook.Config{hook.PreToolUse: printingHook("Bash", tt.out)})
			agents, _, dir, ran := claudeEnv(t, set, bashCall("ls"), scripted.Text("ok"))
			var asked atomic.Bool
			pol, err := permission.New(permission.Rules{Tools: map[string]permission.Decision{"bash": tt.policy}})
			if err != nil {
				t.Fatal(err)
			}
			a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: dir, Options: agent.Options{Provider: "test"}, Policy: &pol,
				Asker: permission.AskerFunc(func(context.Context, permission.Request) (permission.Answer, error) {
					asked.Store(true)
					return permission.AllowOnce, nil
				})})
			if err != nil {
				t.Fatal(err)
			}
			run(t, a, "go")
			rs := results(a.Session().Events())
			if len(rs) != 1 {
				t.Fatalf("results %+v", rs)
			}
			if text := content.JoinText(rs[0].Message.Content[0].Content); !strings.Contains(text, tt.reads) {
				t.Errorf("the model reads %q, want %q", text, tt.reads)
			}
			if asked.Load() != tt.asked {
				t.Errorf("asked = %v, want %v", asked.Load(), tt.asked)
			}
			if got := strings.Join(*ran, " "); got != tt.ran {
				t.Errorf("bash ran %q, want %q", got, tt.ran)
			}
		})
	}
}

// A Stop hook that blocks continues the turn with its reason: the model
// gets one more request, whose last message is the reason, and the re-run
// sees stop_hook_active; continuations are capped.
func TestStopHookBlockContinuesTheTurn(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "stop.jsonl")
	// Blocks unless stop_hook_active is set.
	line := `in=$(cat); echo "$in" >> ` + log + `; case "$in" in *'"stop_hook_active":true'*) exit 0;; esac; printf '%s' '{"decision":"block","reason":"KEEP-GOING"}'`
	set := settingsHooks(t, hook.Config{hook.Stop: command(line)})
	agents, model, cwd, _ := claudeEnv(t, set, scripted.Text("first answer"), scripted.Text("second answer"))
	a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	end := run(t, a, "go")
	if end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end %+v", end)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	msgs := reqs[1].Messages
	if last := content.JoinText(msgs[len(msgs)-1].Content); !strings.Contains(last, "KEEP-GOING") {
		t.Errorf("the model's last message %q", last)
	}
	raw, _ := os.ReadFile(log)
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `"stop_hook_active":false`) ||
		!strings.Contains(lines[0], `"last_assistant_message":"first answer"`) || !strings.Contains(lines[1], `"last_assistant_message":"second answer"`) {
		t.Errorf("Stop inputs:\n%s", raw)
	}

	// A hook that always blocks is bounded.
	always := settingsHooks(t, hook.Config{hook.Stop: command(`cat >/dev/null; echo again >&2; exit 2`)})
	var echoes []scripted.Entry
	for range 2 * agent.MaxStopContinuations {
		echoes = append(echoes, scripted.Echo("answer "))
	}
	agents, _, cwd, _ = claudeEnv(t, always, echoes...)
	b, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test", MaxSteps: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if end := run(t, b, "go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end %+v", end)
	}
	if n := countAssistant(b); n != agent.MaxStopContinuations+1 {
		t.Errorf("%d answers, want %d", n, agent.MaxStopContinuations+1)
	}
}

func countAssistant(a *agent.Agent) int {
	n := 0
	for _, e := range a.Session().Events() {
		if e.Type == session.TypeAssistantMessage {
			n++
		}
	}
	return n
}

// UserPromptSubmit and SessionStart add context to the prompt; a
// UserPromptSubmit block keeps the prompt from the model.
func TestPromptHooks(t *testing.T) {
	set := settingsHooks(t, hook.Config{
		hook.SessionStart:     printingHook("startup", `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"SESSION-CONTEXT"}}`),
		hook.UserPromptSubmit: command(`grep -q forbidden && { echo "no forbidden prompts" >&2; exit 2; }; echo PROMPT-CONTEXT`),
	})
	agents, model, cwd, _ := claudeEnv(t, set, scripted.Text("one"), scripted.Text("two"))
	a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "hello")
	if end := run(t, a, "something forbidden"); end.Reason.Kind != session.EndBlocked || end.Reason.Cause == nil ||
		!strings.Contains(end.Reason.Cause.Reason, "no forbidden prompts") {
		t.Fatalf("end %+v", end.Reason)
	}
	run(t, a, "again")
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (the blocked prompt reaches no model)", len(reqs))
	}
	first := content.JoinText(reqs[0].Messages[0].Content)
	if !strings.Contains(first, "hello") || !strings.Contains(first, "SESSION-CONTEXT") || !strings.Contains(first, "PROMPT-CONTEXT") {
		t.Errorf("first prompt %q", first)
	}
	var all []string
	for _, m := range reqs[1].Messages {
		all = append(all, content.JoinText(m.Content))
	}
	if joined := strings.Join(all, "\n"); strings.Contains(joined, "forbidden") || strings.Count(joined, "SESSION-CONTEXT") != 1 {
		t.Errorf("second request's messages:\n%s", joined)
	}
	// The hooks' context went to a copy of the prompt: the inbox splice
	// that logged it (whose copy the queued item refers to) is as sent.
	for _, e := range a.Session().Events() {
		if sp, ok := e.Data.(session.InboxSpliced); ok {
			for _, m := range sp.Inserted {
				if text := content.JoinText(m.Content); strings.Contains(text, "CONTEXT") {
					t.Errorf("a hook's context reached the logged splice: %q", text)
				}
			}
		}
	}
}

// continue: false from a PostToolUse hook ends the turn after the call.
func TestContinueFalseStopsTheTurn(t *testing.T) {
	set := settingsHooks(t, hook.Config{hook.PostToolUse: printingHook("", `{"continue":false,"stopReason":"enough for today"}`)})
	agents, model, cwd, ran := claudeEnv(t, set, bashCall("ls"), scripted.Text("never"))
	a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	end := run(t, a, "go")
	if end.Reason.Kind != session.EndBlocked || end.Reason.Cause == nil || end.Reason.Cause.Reason != "enough for today" {
		t.Fatalf("end %+v", end.Reason)
	}
	if len(*ran) != 1 || len(model.Requests()) != 1 {
		t.Errorf("ran %v, %d requests", *ran, len(model.Requests()))
	}
	checkBalanced(t, a)
}

// A Notification hook runs before a person is asked to approve a call.
func TestNotificationBeforeAnAsk(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "notified")
	set := settingsHooks(t, hook.Config{hook.Notification: []hook.Group{{Matcher: "permission_prompt", Hooks: []hook.Command{{Command: "cat > " + log}}}}})
	agents, _, cwd, ran := claudeEnv(t, set, bashCall("ls"), scripted.Text("ok"))
	pol, err := permission.New(permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Ask}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}, Policy: &pol,
		Asker: permission.AskerFunc(func(context.Context, permission.Request) (permission.Answer, error) {
			if _, err := os.Stat(log); err != nil {
				t.Error("asked before the Notification hook ran")
			}
			return permission.AllowOnce, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "go")
	got, _ := os.ReadFile(log)
	if !strings.Contains(string(got), `"message":"dsh needs your permission to use Bash"`) || !strings.Contains(string(got), `"notification_type":"permission_prompt"`) || len(*ran) != 1 {
		t.Errorf("notification %s, ran %v", got, *ran)
	}
}
