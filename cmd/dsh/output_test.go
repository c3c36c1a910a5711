package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// jsonLines decodes --json output, failing on a line that is not an object
// with a type.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["type"] == nil {
			t.Fatalf("not a --json line: %s", sc.Bytes())
		}
		lines = append(lines, m)
	}
	return lines
}

// typesOf lists the types of lines, in order.
func typesOf(lines []map[string]any) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l["type"].(string))
	}
	return out
}

// first returns the first line of type typ.
func first(lines []map[string]any, typ string) map[string]any {
	for _, l := range lines {
		if l["type"] == typ {
			return l
		}
	}
	return nil
}

// --json: a run with a foreground and a background child writes the
// documented objects, and nothing but them, to stdout; stderr stays empty.
func TestRunJSON(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			return llmtest.Reply{Text: "child: " + r.LastUser}
		case strings.HasPrefix(r.LastUser, "background task"):
			return llmtest.Reply{Text: "noted"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{Reasoning: "plan", ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"fg","prompt":"one"}`}}
		case len(r.ToolResults) == 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"bg","prompt":"two","run_in_background":true}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "run", "--json", "--cwd", t.TempDir(), "go")
	if err != nil || errOut != "" {
		t.Fatalf("run: %v\nstderr %q", err, errOut)
	}
	lines := jsonLines(t, out)
	types := typesOf(lines)
	for _, want := range []string{"session", "turn_start", "reasoning", "tool_call", "child_start", "child_end", "tool_result", "text", "turn_end", "result"} {
		if !slices.Contains(types, want) {
			t.Errorf("no %q line in %v", want, types)
		}
	}
	if types[0] != "session" || types[len(types)-1] != "result" {
		t.Errorf("lines %v: want session first and result last", types)
	}
	res := first(lines, "result")
	if res["stop_reason"] != "completed" || res["session_id"] != first(lines, "session")["session_id"] || res["total"] == nil {
		t.Errorf("result %v", res)
	}
	ends := 0
	for _, l := range lines {
		if l["type"] == "child_end" {
			ends++
			if l["stop_reason"] != "completed" || l["run_id"] == "" || l["child_id"] == "" || l["usage"] == nil {
				t.Errorf("child_end %v", l)
			}
		}
	}
	if ends != 2 {
		t.Errorf("%d child_end lines, want 2 (foreground and background)", ends)
	}
}

// --json for a failing run: the turn's error is on turn_end and result.
func TestRunJSONFailure(t *testing.T) {
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"no such thing"}}`}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, _, err := runCLI(t, env, "run", "--json", "--cwd", t.TempDir(), "go")
	if err == nil {
		t.Fatal("a failed turn exited 0")
	}
	lines := jsonLines(t, out)
	end, res := first(lines, "turn_end"), first(lines, "result")
	if end["reason"] != "error" || end["code"] != "INVALID_REQUEST" || !strings.Contains(end["error"].(string), "no such thing") {
		t.Errorf("turn_end %v", end)
	}
	if res["stop_reason"] != "error" || !strings.Contains(res["error"].(string), "no such thing") {
		t.Errorf("result %v", res)
	}
}

// The prompt from stdin with "-".
func TestRunPromptFromStdin(t *testing.T) {
	var got atomic.Value
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		got.Store(r.LastUser)
		return llmtest.Reply{Text: "ok"}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	if _, _, err := runCLIWithStdin(t, env, "line one\nline two\n", "run", "--cwd", t.TempDir(), "-"); err != nil {
		t.Fatal(err)
	}
	if got.Load() != "line one\nline two\n" {
		t.Errorf("the model got %q", got.Load())
	}
	if _, _, err := runCLIWithStdin(t, env, "  \n", "run", "-"); err == nil || !strings.Contains(err.Error(), "the prompt on stdin is empty") {
		t.Errorf("empty stdin: %v", err)
	}
}

// What a person sees of failures: one line each, no log records, a retry
// said as a retry, a partial answer line ended before it, a child's end
// line saying why it ended.
func TestHumanErrorLines(t *testing.T) {
	var calls atomic.Int32
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"the child's request is bad"}}`}
		case calls.Add(1) == 1:
			return llmtest.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":{"message":"busy"}}`}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{Text: "half a line, then", ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"doomed","prompt":"x"}`}}
		}
		return llmtest.Reply{Text: "the child failed"}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "go")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	for _, want := range []string{
		"retrying in ", "(1/5): deepseek: HTTP 503 Service Unavailable: busy",
		"↳ spawn · doomed · error: INVALID_REQUEST: deepseek: HTTP 400 Bad Request: the child's request is bad in ",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "level=") || strings.Contains(errOut, "time=") {
		t.Errorf("log records on stderr:\n%s", errOut)
	}
	if !strings.HasPrefix(out, "half a line, then\n") {
		t.Errorf("the partial answer line was not ended: %q", out)
	}

	// --quiet: the answer and the last line only.
	calls.Store(1)
	out, errOut, err = runCLI(t, env, "run", "--quiet", "--cwd", t.TempDir(), "go")
	if err != nil || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.HasPrefix(errOut, "[session ") || !strings.Contains(out, "the child failed") {
		t.Errorf("--quiet: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
}

// A 401 names the variable that holds the key; nothing listening at a
// loopback endpoint fails at once, asking whether the server runs.
func TestHumanModelErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"Authentication Fails"}}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	_, _, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "go")
	if err == nil || !strings.Contains(err.Error(), "Authentication Fails (the key is read from DEEPSEEK_API_KEY") {
		t.Errorf("401: %v", err)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	env["DEEPSEEK_BASE_URL"] = dead.URL
	dead.Close()
	_, _, err = runCLI(t, env, "run", "--cwd", t.TempDir(), "go")
	if err == nil || !strings.Contains(err.Error(), "is the server at "+dead.URL+" running?") {
		t.Errorf("refused: %v", err)
	}
}

// The README's --json example uses only the fields dsh writes.
func TestREADMEJSONExample(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatal("README.md has no json block")
	}
	fields := map[string]bool{}
	for f := range reflect.TypeFor[jsonLine]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fields[name] = true
	}
	for _, line := range jsonLines(t, string(m[1])) {
		for k := range line {
			if !fields[k] {
				t.Errorf("the README's example has field %q, which dsh does not write", k)
			}
		}
	}
}

// sessions show: each turn's usage and end (a failed turn's error), each
// subagent call's child session; ids by unambiguous prefix.
func TestSessionsShow(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			return llmtest.Reply{Text: "child done"}
		case r.LastUser == "fail":
			return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"nope"}}`}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"d","prompt":"p"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	_, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "go")
	if err != nil {
		t.Fatal(err)
	}
	id := regexp.MustCompile(`\[session ([0-9a-f-]{36})`).FindStringSubmatch(errOut)[1]
	show, _, err := runCLI(t, env, "sessions", "show", id[:5])
	if err != nil || !regexp.MustCompile(`  child [0-9a-f-]{36} \(spawn\): dsh sessions show [0-9a-f]{8}`).MatchString(show) ||
		!strings.Contains(show, "── end: completed · tokens in 9 (0 cached) out 6") {
		t.Fatalf("sessions show: %v\n%s", err, show)
	}
	_, errOut, _ = runCLI(t, env, "run", "--cwd", t.TempDir(), "fail")
	failed := regexp.MustCompile(`\[session ([0-9a-f-]{36})`).FindStringSubmatch(errOut)[1]
	if show, _, _ := runCLI(t, env, "sessions", "show", failed); !strings.Contains(show, "── end: error: INVALID_REQUEST: deepseek: HTTP 400 Bad Request: nope") {
		t.Errorf("failed turn:\n%s", show)
	}
	if _, _, err := runCLI(t, env, "sessions", "show", id[:1]+"-"); err == nil || !strings.Contains(err.Error(), `no session`) {
		t.Errorf("unknown prefix: %v", err)
	}
}
