package hook_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/hook"
)

// stdinOf runs one hook of in.Event that saves its stdin, and returns it.
func stdinOf(t *testing.T, in hook.Input) map[string]any {
	t.Helper()
	if in.Cwd == "" {
		in.Cwd = t.TempDir()
	}
	out := filepath.Join(t.TempDir(), "in.json")
	if err := set(t, in.Event, "", cmd("cat > "+out)).Run(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("stdin %s: %v", raw, err)
	}
	return got
}

// The built-in tools reach a hook under Claude Code's names, with its
// argument names and absolute paths.
func TestPayloadHasClaudeCodesToolShapes(t *testing.T) {
	cwd := t.TempDir()
	tests := []struct {
		tool, args, name string
		want             map[string]any
	}{
		{"bash", `{"command":"ls","timeout_ms":5000}`, "Bash", map[string]any{"command": "ls", "timeout": 5000.0}},
		{"read_file", `{"path":"a.go","offset":3}`, "Read", map[string]any{"file_path": filepath.Join(cwd, "a.go"), "offset": 3.0}},
		{"write_file", `{"path":"/abs/b.txt","content":"x"}`, "Write", map[string]any{"file_path": "/abs/b.txt", "content": "x"}},
		{"edit_file", `{"path":"c","old_string":"a","new_string":"b","replace_all":true}`, "Edit",
			map[string]any{"file_path": filepath.Join(cwd, "c"), "old_string": "a", "new_string": "b", "replace_all": true}},
		{"glob", `{"pattern":"**/*.go","path":"sub"}`, "Glob", map[string]any{"pattern": "**/*.go", "path": filepath.Join(cwd, "sub")}},
		{"grep", `{"pattern":"x","ignore_case":true,"max_results":3}`, "Grep", map[string]any{"pattern": "x", "-i": true, "head_limit": 3.0}},
		{"subagent", `{"description":"d","prompt":"p","subagent_type":"explore"}`, "Agent", map[string]any{"description": "d", "prompt": "p", "subagent_type": "explore"}},
		{"mcp__gh__list", `{"path":"x"}`, "mcp__gh__list", map[string]any{"path": "x"}},
	}
	for _, tt := range tests {
		got := stdinOf(t, hook.Input{Event: hook.PreToolUse, Cwd: cwd, ToolName: tt.tool, ToolInput: json.RawMessage(tt.args)})
		if got["tool_name"] != tt.name {
			t.Errorf("%s: tool_name %v, want %s", tt.tool, got["tool_name"], tt.name)
		}
		ti, _ := got["tool_input"].(map[string]any)
		if len(ti) != len(tt.want) {
			t.Errorf("%s: tool_input %v, want %v", tt.tool, ti, tt.want)
		}
		for k, v := range tt.want {
			if ti[k] != v {
				t.Errorf("%s: tool_input.%s = %v, want %v", tt.tool, k, ti[k], v)
			}
		}
	}
}

// tool_response has the shape of Claude Code's tool's, and Stop carries
// stop_hook_active and last_assistant_message.
func TestPayloadResponsesAndStop(t *testing.T) {
	got := stdinOf(t, hook.Input{Event: hook.PostToolUse, ToolName: "bash", ToolInput: json.RawMessage(`{"command":"echo hi"}`),
		ToolResponse: &hook.ToolResponse{Content: "hi\n"}, Duration: 1500e6})
	if tr, _ := got["tool_response"].(map[string]any); tr["stdout"] != "hi\n" || tr["interrupted"] != false || got["duration_ms"] != 1500.0 {
		t.Errorf("Bash response %v, duration %v", got["tool_response"], got["duration_ms"])
	}
	cwd := t.TempDir()
	got = stdinOf(t, hook.Input{Event: hook.PostToolUse, Cwd: cwd, ToolName: "read_file", ToolInput: json.RawMessage(`{"path":"f"}`),
		ToolResponse: &hook.ToolResponse{Content: "     1\tx\n     2\ty\n"}})
	if f, _ := got["tool_response"].(map[string]any)["file"].(map[string]any); f["filePath"] != filepath.Join(cwd, "f") || f["numLines"] != 2.0 {
		t.Errorf("Read response %v", got["tool_response"])
	}
	got = stdinOf(t, hook.Input{Event: hook.Stop, SessionID: "s", LastAssistantMessage: "done", StopHookActive: true})
	if got["stop_hook_active"] != true || got["last_assistant_message"] != "done" || got["hook_event_name"] != "Stop" {
		t.Errorf("Stop input %v", got)
	}
	got = stdinOf(t, hook.Input{Event: hook.Stop})
	if v, ok := got["stop_hook_active"]; !ok || v != false {
		t.Errorf("stop_hook_active %v, %v: Claude Code always sends it on Stop", v, ok)
	}
	if _, ok := stdinOf(t, hook.Input{Event: hook.PreToolUse, ToolName: "bash"})["stop_hook_active"]; ok {
		t.Error("stop_hook_active on PreToolUse")
	}
}

// printing runs one hook of ev that prints out and exits 0.
func printing(t *testing.T, ev hook.Event, out string) *hook.Set {
	t.Helper()
	return set(t, ev, "", cmd("cat >/dev/null; printf '%s' '"+out+"'"))
}

// The JSON decisions of Claude Code's hooks are honoured: a guard that
// denies with JSON blocks (it must not fail open).
func TestJSONDecisions(t *testing.T) {
	pre := hook.Input{Event: hook.PreToolUse, ToolName: "bash", ToolInput: json.RawMessage(`{"command":"rm -rf /"}`)}
	tests := []struct {
		name, out string
		in        hook.Input
		blocked   string // the reason of the block, "" for none
		want      hook.Decision
	}{
		{"deny", `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"JSON-DENY"}}`, pre, "JSON-DENY", hook.Decision{}},
		{"legacy block", `{"decision":"block","reason":"LEGACY-BLOCK"}`, pre, "LEGACY-BLOCK", hook.Decision{}},
		{"unknown decision", `{"hookSpecificOutput":{"permissionDecision":"maybe"}}`, pre, `permissionDecision "maybe"`, hook.Decision{}},
		{"broken JSON", `{"hookSpecificOutput":{"permissionDecision":"deny"`, pre, "JSON dsh cannot read", hook.Decision{}},
		{"mistyped JSON", `{"hookSpecificOutput":{"permissionDecision":5}}`, pre, "JSON dsh cannot read", hook.Decision{}},
		{"bad updatedInput", `{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":"rm"}}`, pre, "updatedInput", hook.Decision{}},
		{"ask", `{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}`, pre, "", hook.Decision{Permission: hook.Ask, Reason: "sure?"}},
		{"approve", `{"decision":"approve","reason":"fine"}`, pre, "", hook.Decision{Permission: hook.Allow, Reason: "fine"}},
		{"updatedInput", `{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"ls","timeout":10}}}`, pre, "",
			hook.Decision{Permission: hook.Allow, UpdatedInput: json.RawMessage(`{"command":"ls","timeout_ms":10}`)}},
		{"continue false", `{"continue":false,"stopReason":"enough"}`, pre, "", hook.Decision{Stop: true, StopReason: "enough"}},
		{"post context", `{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"lint: 2 warnings"}}`,
			hook.Input{Event: hook.PostToolUse, ToolName: "bash"}, "", hook.Decision{Context: []string{"lint: 2 warnings"}}},
		{"post block", `{"decision":"block","reason":"fix the lint"}`, hook.Input{Event: hook.PostToolUse, ToolName: "bash"}, "fix the lint", hook.Decision{}},
		{"stop block", `{"decision":"block","reason":"KEEP-GOING"}`, hook.Input{Event: hook.Stop}, "KEEP-GOING", hook.Decision{}},
		{"prompt text", `remember the style guide`, hook.Input{Event: hook.UserPromptSubmit, Prompt: "hi"}, "", hook.Decision{Context: []string{"remember the style guide"}}},
		{"session context", `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"branch main"}}`,
			hook.Input{Event: hook.SessionStart, Source: "startup"}, "", hook.Decision{Context: []string{"branch main"}}},
		{"plain text elsewhere", `not for the model`, pre, "", hook.Decision{}},
		{"suppressed", `{"suppressOutput":true}`, pre, "", hook.Decision{}},
	}
	for _, tt := range tests {
		tt.in.Cwd = t.TempDir()
		d, err := printing(t, tt.in.Event, tt.out).Decide(t.Context(), tt.in)
		b, isBlock := errors.AsType[*hook.Blocked](err)
		switch {
		case tt.blocked != "" && (!isBlock || !strings.Contains(b.Reason, tt.blocked)):
			t.Errorf("%s: err = %v, want a block for %q", tt.name, err, tt.blocked)
		case tt.blocked == "" && err != nil:
			t.Errorf("%s: err = %v", tt.name, err)
		case tt.blocked == "" && (d.Permission != tt.want.Permission || d.Reason != tt.want.Reason || d.Stop != tt.want.Stop ||
			d.StopReason != tt.want.StopReason || string(d.UpdatedInput) != string(tt.want.UpdatedInput) || !slices.Equal(d.Context, tt.want.Context)):
			t.Errorf("%s: decision %+v, want %+v", tt.name, d, tt.want)
		}
	}
	// Run, for callers that honour blocks only, takes continue: false as one.
	if err := printing(t, hook.SubagentStart, `{"continue":false,"stopReason":"no children today"}`).Run(t.Context(),
		hook.Input{Event: hook.SubagentStart, Cwd: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "no children today") {
		t.Errorf("Run of continue: false = %v", err)
	}
}

// Claude Code's settings read as they are: every event name, unknown
// fields and other hook types; what dsh does not run is one warning each.
func TestSettingsAsTheyAre(t *testing.T) {
	data := `{
	  "permissions": {"allow": ["Bash(npm test)"]},
	  "model": "sonnet",
	  "hooks": {
	    "SessionStart": [{"matcher": "startup|resume", "hooks": [{"type": "command", "command": "echo ctx", "statusMessage": "loading"}]}],
	    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "guard.sh", "timeout": 5}]}],
	    "PreToolUse": [{"matcher": "^Task$", "hooks": [{"type": "command", "command": "task.sh", "if": "Bash(git *)", "once": true}]},
	                   {"matcher": "Bash", "hooks": [{"type": "http", "url": "http://127.0.0.1:1/h"}, {"type": "command", "command": "bash-guard.sh", "async": true}]}],
	    "PostToolUse": [{"matcher": "Edit|Write|MultiEdit", "hooks": [{"type": "command", "command": "jq -r .tool_input.file_path | xargs fmt", "asyncRewake": true, "rewakeMessage": "m"}]}],
	    "PreCompact": [{"hooks": [{"type": "command", "command": "save.sh"}]}],
	    "SessionEnd": [{"hooks": [{"type": "command", "command": "bye.sh"}]}],
	    "Stop": [{"hooks": [{"type": "prompt", "prompt": "are you done?"}]}],
	    "UserPromptExpansion": [{"hooks": [{"type": "command", "command": "x"}]}],
	    "SomeFutureEvent": [{"hooks": [{"type": "command", "command": "x"}]}]
	  }
	}`
	cfg, err := hook.ParseSettings([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	s, warnings, err := hook.NewSettings(cfg, "settings.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []hook.Event{hook.SessionStart, hook.UserPromptSubmit, hook.PreToolUse, hook.PostToolUse, hook.PreCompact, hook.SessionEnd} {
		if !s.Has(ev) {
			t.Errorf("no %s hook", ev)
		}
	}
	if s.Has(hook.Stop) {
		t.Error("the prompt hook of Stop is kept")
	}
	joined := strings.Join(warnings, "\n")
	for _, w := range []string{"UserPromptExpansion: dsh runs no UserPromptExpansion hooks", "SomeFutureEvent", "a hook of type http is ignored", "a hook of type prompt is ignored"} {
		if !strings.Contains(joined, w) {
			t.Errorf("no warning %q in:\n%s", w, joined)
		}
	}
	if len(warnings) != 4 {
		t.Errorf("%d warnings:\n%s", len(warnings), joined)
	}
	// In dsh.yaml (strict) a name that is no Claude Code event is a typo.
	if _, _, err := cfg.Usable(true); err == nil || !strings.Contains(err.Error(), "SomeFutureEvent: unknown hook event") {
		t.Errorf("strict Usable = %v", err)
	}
	for _, bad := range []string{`[]`, `{"hooks": []}`, `{"hooks": {"Stop": [{"hooks": [{"command": 3}]}]}}`} {
		if _, err := hook.ParseSettings([]byte(bad)); err == nil {
			t.Errorf("ParseSettings(%s) accepted", bad)
		}
	}
	if cfg, err := hook.ParseSettings([]byte(`{"disableAllHooks": true, "hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}}`)); err != nil || cfg != nil {
		t.Errorf("disableAllHooks: %v, %v", cfg, err)
	}
}

// The matcher of the session events matches what Claude Code's does.
func TestSessionMatchers(t *testing.T) {
	s := set(t, hook.SessionStart, "startup", cmd("exit 2"))
	if err := s.Run(t.Context(), hook.Input{Event: hook.SessionStart, Cwd: t.TempDir(), Source: "startup"}); err == nil {
		t.Error("startup did not match")
	}
	if err := s.Run(t.Context(), hook.Input{Event: hook.SessionStart, Cwd: t.TempDir(), Source: "resume"}); err != nil {
		t.Error("resume matched startup")
	}
}

// A hook's context is bounded, and the cut is said.
func TestContextIsBounded(t *testing.T) {
	s := set(t, hook.UserPromptSubmit, "", cmd(`cat >/dev/null; head -c 60000 /dev/zero | tr '\0' y`))
	d, err := s.Decide(t.Context(), hook.Input{Event: hook.UserPromptSubmit, Cwd: t.TempDir()})
	if err != nil || len(d.Context) != 1 || len(d.Context[0]) > hook.MaxContext+100 || !strings.Contains(d.Context[0], "[cut: the hook's context was 60000 bytes") {
		t.Fatalf("context %d bytes, %v", len(strings.Join(d.Context, "")), err)
	}
}
