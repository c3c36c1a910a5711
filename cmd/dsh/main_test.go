package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/cmd/dsh/internal/earlyterm"
	"github.com/dsh-go/dsh/internal/dshbin"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
)

// dshBinary is the dsh command built for the tests that run it as a process.
var dshBinary string

func TestMain(m *testing.M) {
	earlyterm.Restore() // as main does
	proc.Main()         // the in-process CLI's commands run supervised, as in dsh
	if marker := os.Getenv(signalHelperEnv); marker != "" {
		signalHelper(marker) // this binary re-run as a process to signal
		return
	}
	dir, err := os.MkdirTemp("", "dsh-bin-")
	if err == nil {
		dshBinary, err = dshbin.Build(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runCLI runs the CLI in-process with env and returns stdout, stderr and the
// error.
func runCLI(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestDemoDelegatesAndPersists(t *testing.T) {
	env := map[string]string{"DSH_HOME": t.TempDir()}
	out, errOut, err := runCLI(t, env, "demo")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, errOut)
	}
	for _, want := range []string{"measure: notes.txt: 61 notes.txt", `recap: You asked: "Write a short note about dsh to notes.txt."`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"offline demo", "↳ spawn · measure the note · started", "· bash", "↳ fork · recap the request · completed"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	id := regexp.MustCompile(`\[session ([0-9a-f-]{36})`).FindStringSubmatch(errOut)
	if id == nil {
		t.Fatalf("no session id in %q", errOut)
	}
	list, _, err := runCLI(t, env, "sessions", "list", "--all", "--json")
	var rows []struct{ ID, Parent, Status, Title string }
	if err != nil || json.Unmarshal([]byte(list), &rows) != nil {
		t.Fatalf("sessions list: %v\n%s", err, list)
	}
	// The parent and its two children are stored; the children name their
	// parent and come after it.
	if len(rows) != 3 || rows[0].ID != id[1] || rows[1].Parent != id[1] || rows[2].Parent != id[1] || rows[0].Status != "completed" ||
		rows[0].Title != demoTurn1 {
		t.Fatalf("sessions list --json:\n%s", list)
	}
	if text, _, _ := runCLI(t, env, "sessions", "list", "--all"); !strings.Contains(text, "\n  "+id[1][:8]) && !strings.Contains(text, "\n"+id[1][:8]) {
		t.Fatalf("sessions list:\n%s", text)
	}
	show, _, err := runCLI(t, env, "sessions", "show", id[1][:6])
	if err != nil || !strings.Contains(show, "tool subagent_fork") || !strings.Contains(show, "── end: completed") {
		t.Fatalf("sessions show: %v\n%s", err, show)
	}
}

// With no key at all, dsh says which variable each built-in route needs;
// with a route named, the variable of that route.
func TestRunWithoutKeyNamesTheVariable(t *testing.T) {
	_, _, err := runCLI(t, map[string]string{"DSH_HOME": t.TempDir()}, "run", "hi")
	if err == nil || !strings.Contains(err.Error(), "no model key is set") {
		t.Fatalf("err = %v", err)
	}
	for _, v := range []string{"DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "DSH_LOCAL_BASE_URL", "never writes them to a file"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("the help lacks %s:\n%v", v, err)
		}
	}
	_, _, err = runCLI(t, map[string]string{"DSH_HOME": t.TempDir()}, "run", "--route", "openai", "hi")
	if err == nil || !strings.Contains(err.Error(), `OPENAI_API_KEY is not set: export it to use model route "openai"`) {
		t.Fatalf("--route openai: err = %v", err)
	}
}

func TestSessionsShowUnknown(t *testing.T) {
	_, _, err := runCLI(t, map[string]string{"DSH_HOME": t.TempDir()}, "sessions", "show", "nope")
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v", err)
	}
}

// dsh run against a loopback server speaking the chat-completions SSE
// format, as DeepSeek does.
func TestRunStreamsFromAnOpenAICompatibleServer(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/event-stream")
		for _, frame := range []string{
			`{"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
			`{"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" from the loopback"},"finish_reason":null}]}`,
			`{"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", frame)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "say", "hello")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if strings.TrimSpace(out) != "Hello from the loopback" || auth != "Bearer sk-test" {
		t.Fatalf("stdout %q, auth %q", out, auth)
	}
	if !strings.Contains(errOut, "tokens in 12 (0 cached) out 4") {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestRunReportsAModelFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	_, _, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "hi")
	if err == nil || !strings.Contains(err.Error(), "AUTH") {
		t.Fatalf("err = %v", err)
	}
}

// dsh run stays until background work it started is done: the child's
// settlement notice, with its closing message, wakes the agent.
func TestRunWaitsForBackgroundChildren(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.LastUser == "compute in the background":
			return llmtest.Reply{Text: "forty-two"}
		case r.LastUser == "start it":
			if len(r.ToolResults) == 0 {
				return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
					Arguments: `{"description":"bg","prompt":"compute in the background","run_in_background":true}`}}
			}
			return llmtest.Reply{Text: "started. "}
		case strings.HasPrefix(r.LastUser, "Background subagent "):
			_, closing, _ := strings.Cut(r.LastUser, "Its closing message:\n")
			return llmtest.Reply{Text: "got: " + closing}
		}
		return llmtest.Reply{Text: "unexpected: " + r.LastUser}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "start it")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	// The notice either wakes an idle parent or, when the child is quick,
	// joins the parent's running turn; either way the output is collected.
	if !strings.Contains(out, "got: forty-two") {
		t.Fatalf("stdout %q\nstderr %s", out, errOut)
	}
}

// No API key ever reaches a log line, an error message or a session file.
func TestAPIKeyNeverLeaks(t *testing.T) {
	const sentinel = "sk-SENTINEL-7f3a9c"
	t.Setenv("DEEPSEEK_API_KEY", sentinel) // as a real shell would have it: bash must not pass it on
	calls := 0
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		calls++
		switch {
		case r.LastUser == "fail":
			return llmtest.Reply{Status: http.StatusUnauthorized, Body: `{"error":{"message":"invalid api key"}}`}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"env | grep -c SENTINEL || true"}`}}
		}
		return llmtest.Reply{Text: "bash saw " + strings.TrimSpace(r.ToolResults[0]) + " matching variables"}
	})
	home := t.TempDir()
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": sentinel, "DEEPSEEK_BASE_URL": srv.URL}
	out1, err1, _ := runCLI(t, env, "-v", "run", "--cwd", t.TempDir(), "ok")
	out2, err2, runErr := runCLI(t, env, "-v", "run", "--cwd", t.TempDir(), "fail")
	if runErr == nil || calls == 0 {
		t.Fatalf("the failing run did not fail (%d model calls)", calls)
	}
	texts := map[string]string{"stdout": out1 + out2, "stderr": err1 + err2, "error": runErr.Error()}
	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			texts[path] = string(b)
		}
		return nil
	})
	for where, text := range texts {
		if strings.Contains(text, sentinel) {
			t.Errorf("the API key appears in %s", where)
		}
	}
	if len(texts) < 4 {
		t.Fatalf("no session files were written under %s", home)
	}
	if !strings.Contains(out1, "bash saw 0 matching variables") {
		t.Fatalf("commands the model runs must not see the key: %q", out1)
	}
}

// runCLIWithStdin is runCLI with stdin.
func runCLIWithStdin(t *testing.T, env map[string]string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(strings.NewReader(stdin), &out, &errOut, func(k string) string { return env[k] })
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}
