package claudecode_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// fakeEnv, set in its environment, makes the test binary a fake claude.
const fakeEnv = "CLAUDECODE_FAKE_CLI"

// Prompts selecting the fake's scenarios (anything else is answered
// "done: <prompt>").
const (
	scenarioArgs            = "scenario: args"             // answers with its command line and environment
	scenario401             = "scenario: 401"              // API 401: success with is_error
	scenarioBlank           = "scenario: blank"            // success with a blank result
	scenarioMaxTurns        = "scenario: max-turns"        // error_max_turns
	scenarioDuringExecution = "scenario: during-execution" // error_during_execution
	scenarioMaxTokens       = "scenario: max-tokens"       // gives up on a cut-off answer
	scenarioTool            = "scenario: tool"             // asks can_use_tool, answers with the behavior it got
	scenarioHang            = "scenario: hang"             // works until interrupted
	scenarioIgnore          = "scenario: ignore-interrupt" // ignores interrupt, EOF and SIGTERM
	scenarioCrash           = "scenario: crash"            // exits 7 mid-turn
	scenarioUnknown         = "scenario: unknown"          // sends unknown and malformed lines first
	scenarioSilent          = "scenario: silent"           // never says anything, ignores SIGTERM
	scenarioExit            = "scenario: exit"             // exits 3 before init
	scenarioLongLine        = "scenario: long-line"        // sends a 4 KiB line
	scenarioNoUsage         = "scenario: no-model-usage"   // a result with usage but no modelUsage
)

// The flags the provider must always pass.
var requiredFlags = [][]string{{"-p"}, {"--output-format", "stream-json"}, {"--input-format", "stream-json"},
	{"--verbose"}, {"--permission-prompt-tool", "stdio"}}

// fake is a scripted Claude Code CLI speaking stream-json on stdio.
type fake struct {
	mu  sync.Mutex
	out *bufio.Writer
	in  chan map[string]any // stdin lines, closed at EOF
}

// fakeClaude runs the fake and returns its exit code.
func fakeClaude() int {
	for _, f := range requiredFlags {
		if !slices.ContainsFunc(windows(os.Args[1:], len(f)), func(w []string) bool { return slices.Equal(w, f) }) {
			fmt.Fprintf(os.Stderr, "fake claude: missing flag %v in %q\n", f, os.Args[1:])
			return 2
		}
	}
	f := &fake{out: bufio.NewWriter(os.Stdout), in: make(chan map[string]any, 16)}
	go f.readStdin()
	first, ok := <-f.in
	if !ok {
		return 0
	}
	prompt := userText(first)
	if prompt == "" {
		fmt.Fprintln(os.Stderr, "fake claude: the first line is not a user message with text")
		return 2
	}
	switch prompt {
	case scenarioSilent:
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour) // a fake that never answers: only SIGKILL ends it
	case scenarioExit:
		fmt.Fprintln(os.Stderr, "fatal: cannot start")
		return 3
	}
	f.emit(map[string]any{"type": "system", "subtype": "init", "session_id": "fake-session", "model": "fake-model",
		"cwd": must(os.Getwd()), "permissionMode": flagValue("--permission-mode"), "tools": []string{"Bash", "Write"}})
	return f.play(prompt)
}

func (f *fake) play(prompt string) int {
	switch prompt {
	case scenarioArgs:
		dir := os.Getenv("CLAUDE_CONFIG_DIR")
		_, statErr := os.Stat(dir)
		info, _ := json.Marshal(map[string]any{"args": os.Args[1:], "configDir": dir, "configDirExists": statErr == nil,
			"cwd": must(os.Getwd()), "env": os.Environ()})
		return f.succeed(string(info))
	case scenario401, subagenttest.PromptFail:
		msg := "Invalid API key · Fix external API key"
		f.emit(map[string]any{"type": "assistant", "message": map[string]any{"id": "synthetic-1", "model": "<synthetic>", "role": "assistant",
			"content": []any{map[string]any{"type": "text", "text": msg}}}, "parent_tool_use_id": nil,
			"error": "authentication_failed", "is_api_error_message": true, "api_error_status": 401})
		return f.finish(map[string]any{"subtype": "success", "is_error": true, "result": msg, "api_error_status": 401,
			"terminal_reason": "api_error", "total_cost_usd": 0, "modelUsage": map[string]any{}}, 1)
	case scenarioBlank:
		f.text("msg-1", " ")
		return f.finish(map[string]any{"subtype": "success", "is_error": false, "result": " \n"}, 0)
	case scenarioMaxTurns:
		f.text("msg-1", "trying")
		return f.finish(map[string]any{"subtype": "error_max_turns", "is_error": true, "terminal_reason": "max_turns",
			"errors": []string{"Reached maximum number of turns (1)"}}, 1)
	case scenarioDuringExecution:
		return f.finish(map[string]any{"subtype": "error_during_execution", "is_error": true,
			"errors": []string{"something broke"}}, 1)
	case scenarioMaxTokens:
		f.text("msg-1", "a very long answer, cut")
		return f.finish(map[string]any{"subtype": "success", "is_error": true, "api_error": "max_output_tokens",
			"result": "API Error: Claude's response exceeded the 128000 output token maximum."}, 1)
	case scenarioTool:
		return f.tool()
	case scenarioHang, subagenttest.PromptHang:
		f.text("msg-1", "working…")
		return f.awaitInterrupt()
	case scenarioIgnore:
		signal.Ignore(syscall.SIGTERM)
		f.text("msg-1", "working…")
		for range f.in { // ignores interrupts, and EOF after them
		}
		time.Sleep(time.Hour) // only SIGKILL ends it (select{} would be a deadlock with stdin gone)
	case scenarioCrash:
		f.text("msg-1", "partial work")
		fmt.Fprintln(os.Stderr, "fatal: boom")
		return 7
	case scenarioUnknown:
		return f.unknown()
	case scenarioLongLine:
		f.emit(map[string]any{"type": "assistant", "message": map[string]any{"id": "msg-1", "content": []any{
			map[string]any{"type": "text", "text": strings.Repeat("x", 4096)}}}})
		return f.finish(map[string]any{"subtype": "success", "is_error": false, "result": "never read"}, 0)
	case scenarioNoUsage:
		f.text("msg-1", "ok")
		return f.finish(map[string]any{"subtype": "success", "is_error": false, "result": "ok",
			"usage": map[string]any{"input_tokens": 5, "output_tokens": 2}}, 0)
	}
	return f.succeed("done: " + prompt)
}

// succeed answers text and a successful result with usage and cost.
func (f *fake) succeed(text string) int {
	f.text("msg-1", text)
	return f.finish(map[string]any{"subtype": "success", "is_error": false, "result": text, "num_turns": 1,
		"total_cost_usd": 0.0125, "stop_reason": "end_turn", "terminal_reason": "completed",
		"usage": map[string]any{"input_tokens": 11, "output_tokens": 5, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 2},
		"modelUsage": map[string]any{"fake-model": map[string]any{"inputTokens": 11, "outputTokens": 5, "cacheReadInputTokens": 3,
			"cacheCreationInputTokens": 2, "thinkingTokens": 1, "costUSD": 0.0125}}}, 0)
}

// tool asks permission for a Write and answers with the behavior it got.
func (f *fake) tool() int {
	input := map[string]any{"file_path": "/tmp/never", "content": "x"}
	f.emit(map[string]any{"type": "assistant", "message": map[string]any{"id": "msg-1", "model": "fake-model", "content": []any{
		map[string]any{"type": "text", "text": "let me write"},
		map[string]any{"type": "tool_use", "id": "toolu_01", "name": "Write", "input": input}}}, "parent_tool_use_id": nil})
	f.emit(map[string]any{"type": "control_request", "request_id": "perm-1", "request": map[string]any{"subtype": "can_use_tool",
		"tool_name": "Write", "input": input, "tool_use_id": "toolu_01", "permission_suggestions": []any{}}})
	var resp map[string]any
	for line := range f.in {
		if line["type"] == "control_response" {
			resp, _ = line["response"].(map[string]any)
			break
		}
	}
	if resp == nil || resp["request_id"] != "perm-1" || resp["subtype"] != "success" {
		return f.succeed(fmt.Sprintf("permission: bad response %v", resp))
	}
	answer, _ := resp["response"].(map[string]any)
	behavior, _ := answer["behavior"].(string)
	if behavior == "allow" {
		if got, _ := json.Marshal(answer["updatedInput"]); string(got) != string(must(json.Marshal(input))) {
			return f.succeed("permission: allow with a changed input " + string(got))
		}
	}
	if msg, _ := answer["message"].(string); behavior == "deny" && msg == "" {
		return f.succeed("permission: deny without a message")
	}
	f.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{
		"type": "tool_result", "tool_use_id": "toolu_01", "content": "answered " + behavior, "is_error": behavior != "allow"}}},
		"parent_tool_use_id": nil})
	return f.succeed("permission: " + behavior)
}

// unknown sends lines a tolerant reader must skip, and an unsupported
// control request that must be answered with an error.
func (f *fake) unknown() int {
	f.raw("this is not JSON")
	f.raw("")
	f.raw(`["an","array"]`)
	f.raw(`{"no":"type"}`)
	f.emit(map[string]any{"type": "mystery", "payload": 1})
	f.emit(map[string]any{"type": "system", "subtype": "ui_invalidate"})
	f.emit(map[string]any{"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10})
	f.emit(map[string]any{"type": "stream_event", "event": map[string]any{"type": "content_block_delta"}})
	f.emit(map[string]any{"type": "control_cancel_request", "request_id": "nothing"})
	f.emit(map[string]any{"type": "assistant", "message": map[string]any{"content": "not an array"}})
	f.emit(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": 5}, 7}}})
	f.emit(map[string]any{"type": "assistant", "parent_tool_use_id": "toolu_x", "message": map[string]any{"content": []any{
		map[string]any{"type": "text", "text": "from a nested agent"}}}})
	f.emit(map[string]any{"type": "control_request", "request_id": "hook-1", "request": map[string]any{"subtype": "hook_callback"}})
	var resp map[string]any
	for line := range f.in {
		if line["type"] == "control_response" {
			resp, _ = line["response"].(map[string]any)
			break
		}
	}
	if resp["request_id"] != "hook-1" || resp["subtype"] != "error" {
		return f.succeed(fmt.Sprintf("unknown control request answered %v", resp))
	}
	return f.succeed("tolerated")
}

// awaitInterrupt works until an interrupt arrives, then ends the turn as
// Claude Code does.
func (f *fake) awaitInterrupt() int {
	for line := range f.in {
		req, _ := line["request"].(map[string]any)
		if line["type"] != "control_request" || req["subtype"] != "interrupt" {
			continue
		}
		f.emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
			"request_id": line["request_id"], "response": map[string]any{"still_queued": []any{}}}})
		f.emit(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "[Request interrupted by user]"}}}, "parent_tool_use_id": nil})
		return f.finish(map[string]any{"subtype": "error_during_execution", "is_error": true, "terminal_reason": "aborted_streaming",
			"total_cost_usd": 0.001, "modelUsage": map[string]any{"fake-model": map[string]any{"inputTokens": 11, "outputTokens": 1}}}, 1)
	}
	return 0 // EOF without an interrupt
}

// finish sends the result, then waits for stdin EOF and exits with code.
func (f *fake) finish(result map[string]any, code int) int {
	result["type"] = "result"
	result["session_id"] = "fake-session"
	f.emit(result)
	for range f.in {
	}
	return code
}

func (f *fake) text(id, text string) {
	f.emit(map[string]any{"type": "assistant", "message": map[string]any{"id": id, "model": "fake-model", "role": "assistant",
		"content": []any{map[string]any{"type": "text", "text": text}}}, "parent_tool_use_id": nil, "session_id": "fake-session"})
}

func (f *fake) emit(v any) { f.raw(string(must(json.Marshal(v)))) }

func (f *fake) raw(line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out.WriteString(line + "\n")
	f.out.Flush()
}

func (f *fake) readStdin() {
	defer close(f.in)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			fmt.Fprintf(os.Stderr, "fake claude: bad stdin line %q\n", sc.Text())
			continue
		}
		f.in <- m
	}
}

// userText is the joined text of a user message line, "" for anything else.
func userText(line map[string]any) string {
	msg, _ := line["message"].(map[string]any)
	blocks, _ := msg["content"].([]any)
	if line["type"] != "user" || msg["role"] != "user" {
		return ""
	}
	var sb strings.Builder
	for _, b := range blocks {
		if b, _ := b.(map[string]any); b["type"] == "text" {
			s, _ := b["text"].(string)
			sb.WriteString(s)
		}
	}
	return sb.String()
}

func flagValue(name string) string {
	for i, a := range os.Args {
		if a == name && i+1 < len(os.Args) {
			return os.Args[i+1]
		}
	}
	return ""
}

func windows(s []string, n int) [][]string {
	var out [][]string
	for i := 0; i+n <= len(s); i++ {
		out = append(out, s[i:i+n])
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
