package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// routeCommand is the dsh binary run with args, its environment PATH,
// HOME and DSH_HOME and vars alone (no DeepSeek key).
func routeCommand(t *testing.T, home string, vars []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(dshBinary, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home}, vars...)
	return cmd
}

// The anthropic route, started with only ANTHROPIC_API_KEY and
// ANTHROPIC_BASE_URL set, against the strict Messages API: a full turn
// with a tool call and a delegation (a spawned child), then, with thinking
// enabled in the user's dsh.yaml, the same turn with a forked child and
// the thinking blocks sent back as the API requires. The parent's
// requests mark the tools, the system prompt and the conversation for the
// cache, and the child's first request marks the same tools-and-system
// prefix and reads what its parent wrote.
func TestAnthropicRouteFromItsKeyAlone(t *testing.T) {
	for _, thinking := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "thinking"}[thinking], func(t *testing.T) {
			tool, kind := "subagent", "spawn"
			if thinking {
				tool, kind = "subagent_fork", "fork"
			}
			var mu sync.Mutex
			var childFirst *llmtest.MessagesRequest
			srv := llmtest.NewMessages(t, func(r llmtest.MessagesRequest) llmtest.MessagesReply {
				if r.Child || strings.Contains(r.LastUser, "child: count") {
					mu.Lock()
					if childFirst == nil {
						childFirst = &r
					}
					mu.Unlock()
					return llmtest.MessagesReply{Thinking: "counting", Text: "child done: 3"}
				}
				results := strings.Join(r.ToolResults, "\n")
				switch {
				case strings.Contains(results, "child done"):
					return llmtest.MessagesReply{Thinking: "wrapping up", Text: "all done"}
				case strings.Contains(results, "routed"):
					return llmtest.MessagesReply{Thinking: "now delegate", ToolUses: []llmtest.MessagesToolUse{{Name: tool,
						Input: `{"description":"count","prompt":"child: count the files"}`}}}
				}
				return llmtest.MessagesReply{Thinking: "run it", Text: "Running.", ToolUses: []llmtest.MessagesToolUse{{Name: "bash", Input: `{"command":"echo routed"}`}}}
			})
			home := t.TempDir()
			if thinking {
				os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte("models:\n  - {name: anthropic, thinking: enabled}\n"), 0o600)
			}
			cmd := routeCommand(t, home, []string{"ANTHROPIC_API_KEY=sk-ant-loopback", "ANTHROPIC_BASE_URL=" + srv.URL}, "run", "go")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil || strings.TrimSpace(string(out)) != "Running.\nall done" {
				t.Fatalf("run: %v\nstdout %q\nstderr:\n%s", err, out, stderr.String())
			}
			for _, want := range []string{"dsh: model route anthropic, model claude-sonnet-4-5: ANTHROPIC_API_KEY is set", "↳ " + kind + " · count", "· $0.0"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			seen := srv.Seen()
			var parent []llmtest.MessagesRequest
			for _, r := range seen {
				if !r.Child && !strings.Contains(r.LastUser, "child: count") {
					parent = append(parent, r)
				}
			}
			if len(parent) != 3 || childFirst == nil {
				t.Fatalf("%d parent requests (want 3), child seen %v", len(parent), childFirst != nil)
			}
			if thinking != parent[2].Thinking {
				t.Errorf("thinking %v on the wire, want %v", parent[2].Thinking, thinking)
			}
			// The parent's third request: tools, system, the end of the
			// conversation and the end of the previous request's.
			bp := parent[2].Breakpoints
			if len(bp) != 4 || !strings.HasPrefix(bp[0], "tools[") || bp[1] != "system[0]" || !strings.HasPrefix(bp[2], "messages[") || !strings.HasPrefix(bp[3], "messages[") {
				t.Errorf("parent's breakpoints %v", bp)
			}
			if parent[1].CacheRead == 0 || parent[2].CacheRead == 0 {
				t.Errorf("the parent's later requests read nothing from the cache: %d, %d", parent[1].CacheRead, parent[2].CacheRead)
			}
			if !slices.Contains(childFirst.Breakpoints, "system[0]") || !slices.Contains(childFirst.Prefixes, parent[0].Prefixes[1]) || childFirst.CacheRead == 0 {
				t.Errorf("the %s child's first request: breakpoints %v, prefixes %v (the parent's tools and system: %s), cache read %d: it does not share its parent's prefix",
					kind, childFirst.Breakpoints, childFirst.Prefixes, parent[0].Prefixes[1], childFirst.CacheRead)
			}
		})
	}
}

// openAIRules applies the rules of OpenAI's chat completions that a
// request of the openai route could break, and returns the first broken
// one, or "": the bearer key, the path under OPENAI_BASE_URL, the route's
// model, only parameters the API knows (no DeepSeek thinking or
// reasoning_content, max_completion_tokens rather than max_tokens), and
// every assistant tool call answered by a tool message before the next
// other message.
func openAIRules(r *http.Request, raw []byte) string {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-openai-loopback" {
		return "path or key: " + r.URL.Path + " " + r.Header.Get("Authorization")
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return err.Error()
	}
	known := []string{"model", "messages", "stream", "stream_options", "tools", "max_completion_tokens", "temperature", "reasoning_effort"}
	for k := range body {
		if !slices.Contains(known, k) {
			return "Unrecognized request argument supplied: " + k
		}
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"messages"`
	}
	json.Unmarshal(raw, &req)
	if req.Model != "gpt-5" {
		return "The model `" + req.Model + "` does not exist or you do not have access to it."
	}
	var open []string
	for i, m := range req.Messages {
		switch {
		case m.ReasoningContent != nil:
			return "messages: reasoning_content is not a known field"
		case m.Role == "tool":
			if !slices.Contains(open, m.ToolCallID) {
				return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
			}
			open = slices.DeleteFunc(open, func(id string) bool { return id == m.ToolCallID })
		case len(open) > 0:
			return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. (messages." + strconv.Itoa(i) + ")"
		}
		for _, c := range m.ToolCalls {
			open = append(open, c.ID)
		}
	}
	return ""
}

// The openai route, started with only OPENAI_API_KEY and OPENAI_BASE_URL
// set, against a loopback endpoint that enforces OpenAI's rules
// (openAIRules): a turn with a tool call and a delegation completes.
func TestOpenAIRouteFromItsKeyAlone(t *testing.T) {
	backend := chatServer(t, func(r chatRequest) chatReply {
		results := strings.Join(r.ToolResults, "\n")
		switch {
		case strings.Contains(r.First, "child: count"):
			return chatReply{Deltas: []string{"child done: 3"}}
		case strings.Contains(results, "child done"):
			return chatReply{Deltas: []string{"all done"}}
		case strings.Contains(results, "routed"):
			return chatReply{Tool: "subagent", Args: `{"description":"count","prompt":"child: count the files"}`}
		}
		return chatReply{Tool: "bash", Args: `{"command":"echo routed"}`}
	}, nil)
	target, _ := url.Parse(backend.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	var mu sync.Mutex
	var problems []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if msg := openAIRules(r, body); msg != "" {
			mu.Lock()
			problems = append(problems, msg)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg, "type": "invalid_request_error"}})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	home := t.TempDir()
	cmd := routeCommand(t, home, []string{"OPENAI_API_KEY=sk-openai-loopback", "OPENAI_BASE_URL=" + front.URL + "/v1"}, "run", "go")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "all done" {
		t.Fatalf("run: %v\nstdout %q\nstderr:\n%s", err, out, stderr.String())
	}
	for _, want := range []string{"dsh: model route openai, model gpt-5: OPENAI_API_KEY is set", "↳ spawn · count", "· $0.0"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("requests not as the openai route sends them: %q", problems)
	}
	// The rules do refuse what the API refuses.
	probe := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	probe.Header.Set("Authorization", "Bearer sk-openai-loopback")
	for _, body := range []string{`{"model":"gpt-5","max_tokens":5,"messages":[]}`, `{"model":"gpt-5","thinking":{"type":"enabled"},"messages":[]}`,
		`{"model":"gpt-5","messages":[{"role":"assistant","tool_calls":[{"id":"c1"}]},{"role":"user","content":"x"}]}`} {
		if openAIRules(probe, []byte(body)) == "" {
			t.Errorf("the rules let %s through", body)
		}
	}
}

// dsh config prints the files read here, in order (the project's only
// once the folder is trusted), the route dsh run would use and why, and
// the merged configuration with secrets hidden; the old name of
// agent.route is a warning on stderr.
func TestConfigCommand(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte(`agent: {provider: openai, maxSteps: 50}
models:
  - {name: gw, baseURL: "https://user:pw-hidden-1@gw.example/v1", model: q}
mcpServers:
  docs: {command: docs-server, env: {DOCS_TOKEN: tok-hidden-2}}
`), 0o600)
	os.MkdirAll(filepath.Join(project, ".dsh"), 0o700)
	os.WriteFile(filepath.Join(project, ".dsh", "dsh.yaml"), []byte("persona: the project's persona\n"), 0o600)
	run := func() (string, string) {
		t.Helper()
		cmd := routeCommand(t, home, []string{"OPENAI_API_KEY=sk-x"}, "config")
		cmd.Dir = project
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dsh config: %v\n%s", err, stderr.String())
		}
		return string(out), stderr.String()
	}
	out, errOut := run()
	real, _ := filepath.EvalSymlinks(project)
	wantHead := "# files read, each over the ones before it:\n" +
		"#   user       " + filepath.Join(home, "dsh.yaml") + "\n" +
		"#   skipped    " + real + "/.dsh/dsh.yaml: this folder is not trusted (run \"dsh trust\" to use it)\n" +
		"# model route openai, model gpt-5\n" +
		"agent:\n  route: openai\n  model: gpt-5\n  maxSteps: 50\n"
	if !strings.HasPrefix(out, wantHead) {
		t.Errorf("untrusted: output starts\n%s\nwant\n%s", out, wantHead)
	}
	for _, leak := range []string{"pw-hidden-1", "tok-hidden-2", "sk-x"} {
		if strings.Contains(out, leak) {
			t.Errorf("dsh config shows %s:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "DOCS_TOKEN: (hidden)") || !strings.Contains(errOut, `"provider" in agent options is the old name of "route"`) {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if strings.Contains(out, "the project's persona") {
		t.Errorf("an untrusted project's file was read:\n%s", out)
	}
	trustCmd := routeCommand(t, home, nil, "trust")
	trustCmd.Dir = project
	if b, err := trustCmd.CombinedOutput(); err != nil {
		t.Fatalf("dsh trust: %v\n%s", err, b)
	}
	out, _ = run()
	if !strings.Contains(out, "#   project    "+real+"/.dsh/dsh.yaml\n") || !strings.Contains(out, "persona: the project's persona") {
		t.Errorf("trusted:\n%s", out)
	}
}

// dsh doctor on each built-in route, picked from its variables alone.
func TestDoctorOnEachRoute(t *testing.T) {
	messages := llmtest.NewMessages(t, nil)
	chat := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "unused"} })
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>a web page</html>")) }))
	t.Cleanup(page.Close)
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"anthropic", map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_BASE_URL": messages.URL},
			"ok   model route anthropic (dsh run uses it, model claude-sonnet-4-5): ANTHROPIC_API_KEY set; " + messages.URL + " serves claude-sonnet-4-5; model route anthropic, model claude-sonnet-4-5: ANTHROPIC_API_KEY is set"},
		{"openai", map[string]string{"OPENAI_API_KEY": "sk-oa", "OPENAI_BASE_URL": chat.URL},
			`FAIL model route openai (dsh run uses it, model gpt-5): ` + chat.URL + ` does not list model "gpt-5"; it serves: deepseek-flash, deepseek-v4-flash, deepseek-v4-pro (set agent.model or models[].model in dsh.yaml, or pass -m MODEL to dsh run and dsh doctor)`},
		{"openrouter", map[string]string{"OPENROUTER_API_KEY": "sk-or", "OPENROUTER_BASE_URL": "http://127.0.0.1:1/api/v1"},
			"FAIL model route openrouter (dsh run uses it, model anthropic/claude-sonnet-4.5): openrouter: connection refused by 127.0.0.1:1: is the server at http://127.0.0.1:1/api/v1 running?"},
		{"local", map[string]string{"DSH_LOCAL_BASE_URL": chat.URL, "DSH_LOCAL_MODEL": "deepseek-v4-pro"},
			"FAIL model route local (dsh run uses it, model deepseek-v4-pro): local: HTTP 401 Unauthorized: Authentication Fails, Your api key is invalid (this route sends no key: set models[].apiKeyEnv to the variable holding one)"},
		{"openai, not an endpoint", map[string]string{"OPENAI_API_KEY": "sk-oa", "OPENAI_BASE_URL": page.URL},
			"FAIL model route openai (dsh run uses it, model gpt-5): openai: bad model list: invalid character '<' looking for beginning of value (is " + page.URL + " this route's endpoint? set OPENAI_BASE_URL or models[].baseURL in dsh.yaml)"},
		{"anthropic, bad key", map[string]string{"ANTHROPIC_API_KEY": "sk ant", "ANTHROPIC_BASE_URL": messages.URL},
			"FAIL model route anthropic (dsh run uses it, model claude-sonnet-4-5): anthropic: ANTHROPIC_API_KEY holds spaces or non-printable characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.vars["DSH_HOME"] = t.TempDir()
			tc.vars["PATH"] = ""
			out, _, _ := runCLI(t, tc.vars, "doctor")
			if !strings.Contains(out, tc.want) {
				t.Errorf("doctor lacks\n%s\n%s", tc.want, out)
			}
		})
	}
}

// An unknown --route (or --provider, its old name) is refused before any
// session exists.
func TestUnknownRouteBeforeAnySession(t *testing.T) {
	home := t.TempDir()
	for _, flag := range []string{"--route", "--provider"} {
		_, errOut, err := runCLI(t, map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-x"}, "run", flag, "nosuch", "hi")
		if err == nil || !strings.Contains(err.Error(), `--route "nosuch": not a configured model route (the routes are deepseek, anthropic, openai, openrouter, local; declare another under models: in dsh.yaml)`) {
			t.Fatalf("%s nosuch: %v\n%s", flag, err, errOut)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "sessions")); len(entries) != 0 {
		t.Fatalf("sessions were created: %v", entries)
	}
}

// dsh chat with no key at all (its first run) lists every route's
// variable before anything starts.
func TestChatWithoutAnyKey(t *testing.T) {
	home := t.TempDir()
	_, _, err := runCLIWithStdin(t, map[string]string{"DSH_HOME": home}, "hello\n", "chat")
	if err == nil || !strings.Contains(err.Error(), "no model key is set: export one of these") || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("err = %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "sessions")); len(entries) != 0 {
		t.Fatalf("sessions were created: %v", entries)
	}
}
