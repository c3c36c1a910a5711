package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/sandboxtest"
)

// claudeProject is a project whose hooks are Claude Code's settings files,
// as users have them: the user's ~/.claude/settings.json logs every event
// and formats written files the common way (jq -r .tool_input.file_path |
// xargs prettier, with a stand-in for prettier); the project's
// .claude/settings.json denies commands that write ran.txt with JSON; its
// .claude/settings.local.json has a Stop hook that continues the turn once.
func claudeProject(t *testing.T) (home, project, bin string) {
	t.Helper()
	home, project, bin = t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(bin, "prettier"), []byte("#!/bin/sh\nfor f; do printf 'formatted\\n' >> \"$f\"; done\n"), 0o755)
	filePath := "jq -r .tool_input.file_path"
	if _, err := exec.LookPath("jq"); err != nil { // a shell stand-in for jq
		filePath = `sed -n 's/.*"file_path":"\([^"]*\)".*/\1/p'`
	}
	settings := func(path string, hooks map[string]any) {
		t.Helper()
		os.MkdirAll(filepath.Dir(path), 0o755)
		data, err := json.Marshal(map[string]any{"permissions": map[string]any{"allow": []string{"Bash(npm test)"}}, "hooks": hooks})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	command := func(matcher, line string, extra ...map[string]any) []map[string]any {
		h := map[string]any{"type": "command", "command": line, "timeout": 30}
		for _, e := range extra {
			for k, v := range e {
				h[k] = v
			}
		}
		return []map[string]any{{"matcher": matcher, "hooks": []map[string]any{h}}}
	}
	record := `cat >> "$CLAUDE_PROJECT_DIR/payloads.jsonl"; echo >> "$CLAUDE_PROJECT_DIR/payloads.jsonl"; env | grep '^CLAUDE_' | sort >> "$CLAUDE_PROJECT_DIR/env.txt"`
	all := map[string]any{}
	for _, ev := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"} {
		all[ev] = command("", record, map[string]any{"statusMessage": "recording", "once": false})
	}
	all["PostToolUse"] = append(all["PostToolUse"].([]map[string]any), command("Edit|Write|MultiEdit", filePath+" | xargs prettier", map[string]any{"async": false})...)
	all["UserPromptExpansion"] = command("", "true")
	all["Notification"] = []map[string]any{{"hooks": []map[string]any{{"type": "http", "url": "http://127.0.0.1:1/hook"}}}}
	settings(filepath.Join(home, ".claude", "settings.json"), all)
	deny := `grep -q ran.txt && printf '%s' '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"JSON-DENY"}}'; exit 0`
	settings(filepath.Join(project, ".claude", "settings.json"), map[string]any{"PreToolUse": command("Bash", deny, map[string]any{"if": "Bash(echo *)"})})
	keepGoing := `in=$(cat); case "$in" in *'"stop_hook_active":true'*) exit 0;; esac; ` +
		`tp=$(printf '%s' "$in" | sed -n 's/.*"transcript_path":"\([^"]*\)".*/\1/p'); ` +
		`cp "$tp" "$CLAUDE_PROJECT_DIR/transcript-copy.jsonl"; printf '%s' '{"decision":"block","reason":"KEEP-GOING"}'`
	settings(filepath.Join(project, ".claude", "settings.local.json"), map[string]any{"Stop": command("", keepGoing)})
	return home, project, bin
}

// Claude Code's hook settings work unchanged through the real binary: the
// hooks of ~/.claude/settings.json run, and in a trusted project those of
// .claude/settings.json and .claude/settings.local.json; a hook reads
// Claude Code's payload (tool names, absolute file_path, transcript_path,
// permission_mode, …) with CLAUDE_PROJECT_DIR and CLAUDE_ENV_FILE set; a
// JSON deny blocks the command; the formatter hook formats the written
// file; a Stop block gets the model one more request.
func TestClaudeHooksEndToEnd(t *testing.T) {
	home, project, bin := claudeProject(t)
	var mu sync.Mutex
	var requests []llmtest.Request
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		requests = append(requests, r)
		mu.Unlock()
		switch {
		case strings.Contains(r.LastUser, "KEEP-GOING"):
			return llmtest.Reply{Text: "second answer"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo RAN > ran.txt"}`}}
		case len(r.ToolResults) == 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "write_file", Arguments: `{"path":"new.txt","content":"x\n"}`}}
		}
		return llmtest.Reply{Text: "first answer"}
	})
	run := func() (string, string) {
		t.Helper()
		cmd := dshCommand(t, srv, home, "", "run", "--yes", "do the work")
		cmd.Dir = project
		cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("dsh run: %v\n%s%s", err, out.String(), errOut.String())
		}
		return out.String(), errOut.String()
	}

	// Untrusted: the project's hooks are skipped, and the user is told.
	_, errOut := run()
	if !strings.Contains(errOut, "2 hooks of Claude Code's settings") {
		t.Errorf("no word of the skipped hooks:\n%s", errOut)
	}
	if !strings.Contains(errOut, "hooks.UserPromptExpansion: dsh runs no UserPromptExpansion hooks") || !strings.Contains(errOut, "a hook of type http is ignored") {
		t.Errorf("no warning for what dsh does not run:\n%s", errOut)
	}
	for _, f := range []string{"ran.txt", "new.txt", "payloads.jsonl", "env.txt", "transcript-copy.jsonl"} {
		os.Remove(filepath.Join(project, f))
	}
	mu.Lock()
	requests = nil
	mu.Unlock()

	if out, errOut, err := runCLI(t, map[string]string{"DSH_HOME": home, "HOME": home}, "trust", project); err != nil || !strings.Contains(out, "is trusted") {
		t.Fatalf("dsh trust: %v\n%s%s", err, out, errOut)
	}
	out, errOut := run()
	if !strings.Contains(out, "second answer") {
		t.Errorf("stdout %q\n%s", out, errOut)
	}
	if _, err := os.Stat(filepath.Join(project, "ran.txt")); err == nil {
		t.Error("the command a JSON deny blocked ran: ran.txt exists")
	}
	mu.Lock()
	reqs := requests
	mu.Unlock()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4 (bash, write, answer, and one more after the Stop block)", len(reqs))
	}
	if res := reqs[1].ToolResults; len(res) != 1 || !strings.Contains(res[0], "JSON-DENY") {
		t.Errorf("the model read %q for the denied command", res)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "new.txt")); string(got) != "x\nformatted\n" {
		t.Errorf("new.txt = %q: the formatter hook did not run on it", got)
	}
	// The Stop hook read the transcript in Claude Code's shape.
	var roles, uses []string
	last := ""
	for _, r := range readPayloads(t, filepath.Join(project, "transcript-copy.jsonl")) {
		msg, _ := r["message"].(map[string]any)
		roles = append(roles, r["type"].(string)+"/"+msg["role"].(string))
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			b := b.(map[string]any)
			switch b["type"] {
			case "tool_use":
				var in bytes.Buffer
				enc := json.NewEncoder(&in)
				enc.SetEscapeHTML(false)
				enc.Encode(b["input"])
				uses = append(uses, b["name"].(string)+" "+strings.TrimSpace(in.String()))
			case "text":
				if r["type"] == "assistant" {
					last = b["text"].(string)
				}
			}
		}
	}
	if got := strings.Join(roles, " "); got != "user/user assistant/assistant user/user assistant/assistant user/user assistant/assistant" {
		t.Errorf("transcript records %s", got)
	}
	if want := []string{`Bash {"command":"echo RAN > ran.txt"}`, `Write {"content":"x\n","file_path":"` + filepath.Join(project, "new.txt") + `"}`}; strings.Join(uses, "\n") != strings.Join(want, "\n") {
		t.Errorf("transcript tool uses %q, want %q", uses, want)
	}
	if last != "first answer" {
		t.Errorf("the transcript's last answer %q", last)
	}
	payloads := readPayloads(t, filepath.Join(project, "payloads.jsonl"))
	var events []string
	for _, p := range payloads {
		events = append(events, p["hook_event_name"].(string))
	}
	// The denied call has no PostToolUse.
	if got, want := strings.Join(events, " "), "SessionStart UserPromptSubmit PreToolUse PreToolUse PostToolUse Stop Stop SessionEnd"; got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	for _, p := range payloads {
		for _, k := range []string{"session_id", "transcript_path", "cwd", "permission_mode"} {
			if s, _ := p[k].(string); s == "" {
				t.Errorf("%s has no %s: %v", p["hook_event_name"], k, p)
			}
		}
		if p["cwd"] != project {
			t.Errorf("cwd %v, want %s", p["cwd"], project)
		}
	}
	byTool := map[string]map[string]any{}
	for _, p := range payloads {
		if p["hook_event_name"] == "PostToolUse" || p["hook_event_name"] == "PreToolUse" {
			byTool[p["hook_event_name"].(string)+" "+p["tool_name"].(string)] = p
		}
	}
	if p := byTool["PreToolUse Bash"]; p == nil || p["tool_input"].(map[string]any)["command"] != "echo RAN > ran.txt" {
		t.Errorf("PreToolUse Bash %v (have %v)", p, keys(byTool))
	}
	if p := byTool["PostToolUse Write"]; p == nil || p["tool_input"].(map[string]any)["file_path"] != filepath.Join(project, "new.txt") ||
		p["tool_response"].(map[string]any)["filePath"] != filepath.Join(project, "new.txt") || p["duration_ms"] == nil {
		t.Errorf("PostToolUse Write %v", p)
	}
	var stops []map[string]any
	for _, p := range payloads {
		if p["hook_event_name"] == "Stop" {
			stops = append(stops, p)
		}
	}
	if len(stops) != 2 || stops[0]["stop_hook_active"] != false || stops[1]["stop_hook_active"] != true ||
		stops[0]["last_assistant_message"] != "first answer" || stops[1]["last_assistant_message"] != "second answer" {
		t.Errorf("Stop payloads %v", stops)
	}
	if tp, _ := payloads[0]["transcript_path"].(string); !strings.HasSuffix(tp, ".jsonl") {
		t.Errorf("transcript_path %q", tp)
	} else if _, err := os.Stat(tp); err == nil {
		t.Errorf("the transcript %s outlives the session", tp)
	}
	env, _ := os.ReadFile(filepath.Join(project, "env.txt"))
	if !strings.Contains(string(env), "CLAUDE_PROJECT_DIR="+project+"\n") || !strings.Contains(string(env), "CLAUDE_ENV_FILE=/") {
		t.Errorf("hook environment:\n%s", env)
	}
}

func readPayloads(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("payload %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The hooks of Claude Code's settings files run under the sandbox of
// commands, as dsh.yaml's do: a trusted project's hook, and the user's,
// may write the project but not the home folder outside it.
func TestClaudeSettingsHooksRunSandboxed(t *testing.T) {
	sandboxtest.Require(t)
	home := sandboxtest.OutsideDir(t)
	project := filepath.Join(home, "project")
	os.MkdirAll(filepath.Join(project, ".claude"), 0o755)
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	hookLine := func(name string) string {
		return `{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo in > ` + name + `-inside; echo out > $HOME/` + name + `-PWNED; true"}]}]}}`
	}
	os.WriteFile(filepath.Join(project, ".claude", "settings.json"), []byte(hookLine("project")), 0o600)
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(hookLine("user")), 0o600)
	if out, errOut, err := runCLI(t, map[string]string{"DSH_HOME": home, "HOME": home}, "trust", project); err != nil || !strings.Contains(out, "is trusted") {
		t.Fatalf("dsh trust: %v\n%s%s", err, out, errOut)
	}
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "ok"} })
	cmd := dshCommand(t, srv, home, "", "run", "go")
	cmd.Dir = project
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	for _, name := range []string{"project", "user"} {
		if _, err := os.Stat(filepath.Join(project, name+"-inside")); err != nil {
			t.Errorf("the %s hook did not run: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(home, name+"-PWNED")); err == nil {
			t.Errorf("the %s hook wrote outside the project", name)
		}
	}
}

// A UserPromptSubmit hook of ~/.claude/settings.json that refuses the
// prompt keeps it from the model, and the user reads the hook's reason.
func TestClaudePromptHookRefuses(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
	  "command": "grep -q secret && { echo 'no secrets in prompts' >&2; exit 2; }; true"}]}]}}`), 0o600)
	var mu sync.Mutex
	calls := 0
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply {
		mu.Lock()
		calls++
		mu.Unlock()
		return llmtest.Reply{Text: "ok"}
	})
	cmd := dshCommand(t, srv, home, "", "run", "my secret is 1234")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "a hook stopped the turn: no secrets in prompts") {
		t.Errorf("dsh run: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 0 {
		t.Errorf("the refused prompt reached the model (%d requests)", calls)
	}
}

// A Claude Code subagent file whose Stop hook (the parent's SubagentStop)
// prints decision block continues the child through the real binary: the
// child reads the reason and its continued answer is what the parent gets;
// the re-run has stop_hook_active true. The child's own tool events carry
// its type as agent_type and its session as agent_id.
func TestClaudeSubagentStopBlocksAndAgentType(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	record := `cat >> "$CLAUDE_PROJECT_DIR/payloads.jsonl"; echo >> "$CLAUDE_PROJECT_DIR/payloads.jsonl"`
	once := `grep -q '"stop_hook_active":true' || printf '%s' '{"decision":"block","reason":"RUN THE TESTS"}'`
	copyTranscript := `tp=$(sed -n 's/.*"agent_transcript_path":"\([^"]*\)".*/\1/p'); cp "$tp" "$CLAUDE_PROJECT_DIR/child-transcript.jsonl"`
	files := map[string]string{
		filepath.Join(home, ".claude", "agents", "checker.md"): "---\nname: checker\ndescription: Checks a change.\ntools: Bash\n" +
			"hooks:\n  Stop:\n    - hooks:\n        - type: command\n          command: \"" + strings.ReplaceAll(once, `"`, `\"`) + "\"\n---\nCheck.\n",
		filepath.Join(home, ".claude", "settings.json"): `{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": ` + strconvQuote(record) + `}]}],
		  "SubagentStop": [{"matcher": "checker", "hooks": [{"type": "command", "command": ` + strconvQuote(record) + `},
		    {"type": "command", "command": ` + strconvQuote(copyTranscript) + `}]}]}}`,
	}
	for path, text := range files {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case !r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"check","prompt":"check it","subagent_type":"checker"}`}}
		case !r.Child:
			return llmtest.Reply{Text: "parent read: " + r.ToolResults[0]}
		case strings.Contains(r.LastUser, "RUN THE TESTS"):
			return llmtest.Reply{Text: "second answer"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo hi"}`}}
		}
		return llmtest.Reply{Text: "first answer"}
	})
	cmd := dshCommand(t, srv, home, "", "run", "--yes", "check the change")
	cmd.Dir = project
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "parent read: second answer") {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	var stops, childTools []map[string]any
	var sessionID string
	for _, p := range readPayloads(t, filepath.Join(project, "payloads.jsonl")) {
		switch {
		case p["hook_event_name"] == "SubagentStop":
			stops = append(stops, p)
		case p["tool_name"] == "Agent":
			if p["agent_id"] != nil || p["agent_type"] != nil {
				t.Errorf("the parent's PreToolUse carries a child's identity: %v", p)
			}
			sessionID, _ = p["session_id"].(string)
		default:
			childTools = append(childTools, p)
		}
	}
	if len(childTools) != 1 || childTools[0]["tool_name"] != "Bash" || childTools[0]["agent_type"] != "checker" ||
		childTools[0]["agent_id"] == nil || childTools[0]["agent_id"] == sessionID || childTools[0]["session_id"] != sessionID {
		t.Errorf("the child's PreToolUse payloads %v (session %s)", childTools, sessionID)
	}
	if len(stops) != 2 || stops[0]["stop_hook_active"] != false || stops[1]["stop_hook_active"] != true ||
		stops[0]["last_assistant_message"] != "first answer" || stops[1]["last_assistant_message"] != "second answer" ||
		stops[1]["agent_type"] != "checker" || len(childTools) == 1 && stops[1]["agent_id"] != childTools[0]["agent_id"] {
		t.Errorf("SubagentStop payloads %v", stops)
	}
	// agent_transcript_path is the child's own conversation, in Claude
	// Code's transcript shape, removed with the child.
	var answers []string
	for _, r := range readPayloads(t, filepath.Join(project, "child-transcript.jsonl")) {
		msg, _ := r["message"].(map[string]any)
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			if b := b.(map[string]any); r["type"] == "assistant" && b["type"] == "text" {
				answers = append(answers, b["text"].(string))
			}
		}
	}
	if !slices.Equal(answers, []string{"first answer", "second answer"}) {
		t.Errorf("the child's transcript has answers %q", answers)
	}
	for _, p := range stops {
		tp, _ := p["agent_transcript_path"].(string)
		if tp == "" || tp == p["transcript_path"] {
			t.Errorf("agent_transcript_path %q (transcript_path %v)", tp, p["transcript_path"])
		} else if _, err := os.Stat(tp); err == nil {
			t.Errorf("the child's transcript %s outlives it", tp)
		}
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
