package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/testpeers"
)

// jsonGolden compares the --json lines of a run, normalized (ids, paths,
// delays), with testdata/json/NAME.jsonl; -record rewrites the file. The
// top-level session's lines and the child runs' lines must each come in
// the golden order (the two streams interleave as the goroutines run).
func jsonGolden(t *testing.T, name, out string, dirs ...string) {
	t.Helper()
	got := normalizeJSON(t, out, dirs...)
	path := filepath.Join("testdata", "json", name+".jsonl")
	if *record {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with -record)", err)
	}
	want := strings.Split(strings.TrimSpace(string(data)), "\n")
	split := func(lines []string) (top, child []string) {
		for _, l := range lines {
			if strings.Contains(l, `"type":"child_`) || strings.Contains(l, `"type":"mcp_`) { // from the runtime's bus
				child = append(child, l)
			} else {
				top = append(top, l)
			}
		}
		return top, child
	}
	gotTop, gotChild := split(got)
	wantTop, wantChild := split(want)
	if !slices.Equal(gotTop, wantTop) || !slices.Equal(gotChild, wantChild) {
		t.Errorf("--json lines of %s differ from %s:\ngot:\n%s\nwant:\n%s", name, path, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// normalizeJSON decodes each line and replaces what varies between runs:
// ids by their order of appearance, the directories by <dirN>, delays by 0.
func normalizeJSON(t *testing.T, out string, dirs ...string) []string {
	t.Helper()
	ids := map[string]string{}
	uuid := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	norm := func(s string) string {
		for i, d := range dirs {
			s = strings.ReplaceAll(s, d, fmt.Sprintf("<dir%d>", i))
		}
		return uuid.ReplaceAllStringFunc(s, func(id string) string {
			if ids[id] == "" {
				ids[id] = fmt.Sprintf("<id%d>", len(ids)+1)
			}
			return ids[id]
		})
	}
	var lines []string
	for _, l := range jsonLines(t, out) {
		_, whole := l["output"].(string)
		if whole = whole && l["truncated"] == nil; whole && l["bytes"] != float64(len(l["output"].(string))) {
			t.Errorf("bytes %v, but the output is %d bytes: %v", l["bytes"], len(l["output"].(string)), l)
		}
		for k, v := range l {
			switch v := v.(type) {
			case string:
				l[k] = norm(v)
			case float64:
				if k == "delay_ms" {
					l[k] = 0
				}
			}
		}
		if whole {
			l["bytes"] = len(l["output"].(string)) // as normalized
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSuffix(b.String(), "\n"))
	}
	return lines
}

// modelEnv is the environment of a run against srv.
func modelEnv(t *testing.T, url string) map[string]string {
	return map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": url}
}

// A delegating run writes every kind of line a successful run has: the
// result carries the answer, tool_result the tool's output, the child's
// lines name it (id, provider and label), its text deltas carry the text
// and its end line its answer.
func TestJSONGoldenDelegation(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo 3"}`}}
		case r.Child:
			return llmtest.Reply{Text: "the child counted 3"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{Reasoning: "First a command.", ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo hello from bash"}`}}
		case len(r.ToolResults) == 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "read_file", Arguments: `{"path":"missing.txt"}`}}
		case len(r.ToolResults) == 2:
			return llmtest.Reply{Text: "Now a child.", ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"count","prompt":"count them"}`}}
		}
		return llmtest.Reply{Text: "There are 3 files."}
	})
	cwd := t.TempDir()
	env := modelEnv(t, srv.URL)
	cfg := filepath.Join(env["DSH_HOME"], "dsh.yaml")
	os.WriteFile(cfg, []byte("mcpServers:\n  gone:\n    command: /nonexistent/mcp-server\n"), 0o600)
	out, errOut, err := runCLI(t, env, "run", "--json", "--cwd", cwd, "count the files")
	if err != nil || errOut != "" {
		t.Fatalf("run: %v\nstderr %q", err, errOut)
	}
	jsonGolden(t, "delegation", out, cwd)
	res := first(jsonLines(t, out), "result")
	if res["text"] != "There are 3 files." {
		t.Errorf("result text %q, want the answer", res["text"])
	}
	if tr := first(jsonLines(t, out), "tool_result"); !strings.Contains(fmt.Sprint(tr["output"]), "hello from bash") {
		t.Errorf("tool_result %v: no output", tr)
	}
}

// A retried model call and a failed turn: retry, turn_end and result carry
// the code and the error; the exit is an error that is not printed twice.
func TestJSONGoldenRetryAndFailure(t *testing.T) {
	var calls atomic.Int32
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if calls.Add(1) == 1 {
			return llmtest.Reply{Status: http.StatusServiceUnavailable, Body: `{"error":{"message":"busy"}}`}
		}
		return llmtest.Reply{Status: http.StatusBadRequest, Body: `{"error":{"message":"no such thing"}}`}
	})
	cwd := t.TempDir()
	out, _, err := runCLI(t, modelEnv(t, srv.URL), "run", "--json", "--cwd", cwd, "go")
	if err == nil || !isReported(err) || errorCode(err) != "INVALID_REQUEST" {
		t.Fatalf("err %v (code %s), want a reported INVALID_REQUEST", err, errorCode(err))
	}
	jsonGolden(t, "failure", out, cwd)
}

// A tool's output over the cap is cut, at a rune boundary, and says so;
// bytes keeps its whole length.
func TestJSONToolOutputCapped(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"for i in $(seq 12000); do printf 'é'; done; echo"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	out, errOut, err := runCLI(t, modelEnv(t, srv.URL), "run", "--json", "--cwd", t.TempDir(), "go")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	tr := first(jsonLines(t, out), "tool_result")
	output, _ := tr["output"].(string)
	if tr["truncated"] != true || len(output) > maxJSONOutput || !strings.HasPrefix(output, "éé") || strings.ContainsRune(output, '\uFFFD') ||
		tr["bytes"].(float64) <= float64(maxJSONOutput) {
		t.Errorf("tool_result: truncated %v, %d bytes of output, bytes %v", tr["truncated"], len(output), tr["bytes"])
	}
}

// Every start-up error of dsh run --json is one result line on stdout with
// a code (and the one line on stderr): a missing key, a configuration that
// does not load, a session to resume that does not exist, a missing prompt
// and a bad flag (the last two found by cobra, before the command runs:
// through the binary).
func TestJSONStartupErrors(t *testing.T) {
	home := t.TempDir()
	bad := filepath.Join(home, "bad.yaml")
	os.WriteFile(bad, []byte("agent:\n  maxStep: 3\n"), 0o600)
	named := filepath.Join(home, "named.yaml")
	os.WriteFile(named, []byte("agent:\n  route: deepseek\n"), 0o600)
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		code string
		msg  string
	}{
		{"missing-key", map[string]string{"DSH_HOME": home, "DSH_CONFIG": named}, []string{"run", "--json", "hi"}, "MISSING_KEY", "DEEPSEEK_API_KEY is not set"},
		{"no-key", map[string]string{"DSH_HOME": home}, []string{"run", "--json", "hi"}, "MISSING_KEY", "no model key is set"},
		{"bad-config", map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test"}, []string{"--config", bad, "run", "--json", "hi"}, "CONFIG", `unknown field "maxStep"`},
		{"no-session", map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test"}, []string{"run", "--json", "-r", "nope", "hi"}, "SESSION_NOT_FOUND", `no stored session has an id starting with "nope"`},
		{"no-prompt", map[string]string{"DSH_HOME": home}, []string{"run", "--json"}, "USAGE", `run needs a prompt: dsh run "PROMPT", or dsh run - to read it from stdin`},
		{"bad-flag", map[string]string{"DSH_HOME": home}, []string{"run", "--jsn", "--json", "hi"}, "USAGE", "unknown flag: --jsn (did you mean --json?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(dshBinary, c.args...)
			cmd.Dir = home
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
			for k, v := range c.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err == nil {
				t.Fatal("exit 0")
			}
			lines := jsonLines(t, stdout.String())
			if len(lines) != 1 || lines[0]["type"] != "result" || lines[0]["code"] != c.code || lines[0]["stop_reason"] != "error" ||
				!strings.Contains(fmt.Sprint(lines[0]["error"]), c.msg) {
				t.Errorf("stdout %q: want one result line with code %s and %q", stdout.String(), c.code, c.msg)
			}
			if n := strings.Count(stderr.String(), "\n"); (n != 1 && c.name != "no-key") || !strings.Contains(stderr.String(), c.msg) {
				t.Errorf("stderr %q: want the one error line", stderr.String())
			}
			if c.name == "missing-key" {
				jsonGolden(t, "missing-key", stdout.String(), home)
			}
		})
	}
}

// The README's recipe, as written, prints the answer: dsh run --json
// through the binary, piped into jq.
func TestREADMEJSONRecipe(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^dsh run --json "([^"]+)" \| jq -r '([^']+)'$`).FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal(`README.md has no "dsh run --json … | jq -r '…'" recipe`)
	}
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("no jq")
	}
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if r.LastUser != m[1] {
			return llmtest.Reply{Text: "wrong prompt"}
		}
		return llmtest.Reply{Reasoning: "Counting.", Text: "There are 42 Go files."}
	})
	home := t.TempDir()
	cmd := exec.Command("sh", "-c", `"$DSH" run --json "$PROMPT" | "$JQ" -r "$FILTER"`)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test",
		"DEEPSEEK_BASE_URL=" + srv.URL, "DSH=" + dshBinary, "JQ=" + jq, "PROMPT=" + m[1], "FILTER=" + m[2]}
	out, err := cmd.Output()
	if err != nil || string(out) != "There are 42 Go files.\n" {
		t.Errorf("the recipe printed %q (%v), want the answer", out, err)
	}
}

// `echo '<initialize>' | dsh acp` always answers (it answered nothing
// about one time in three), and the process ends.
func TestACPAnswersInitializeAtEOF(t *testing.T) {
	home := t.TempDir()
	for i := range 20 {
		cmd := exec.Command(dshBinary, "acp")
		cmd.Dir = home
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test"}
		cmd.Stdin = strings.NewReader(initFrame + "\n")
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), `"id":1,"result":{`) {
			t.Fatalf("run %d: %v, stdout %q", i, err, out)
		}
	}
}

// dsh acp without the route's key: session/new is refused with a message
// naming the variable, which the client shows.
func TestACPMissingKeyNamesTheVariable(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(dshBinary, "acp")
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home}
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + home + `","mcpServers":[]}}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, `"id":2`) {
			json.Unmarshal([]byte(line), &resp)
		}
	}
	if resp.Error.Code != -32000 || !strings.Contains(resp.Error.Message, "DEEPSEEK_API_KEY") {
		t.Errorf("session/new answered %+v\n%s", resp, out)
	}
}

// An editor's view of dsh acp, through the pinned TypeScript SDK client
// validating every frame dsh writes against the ACP schema: the model as a
// session config option (switched to another route's model, which the next
// request uses), the commands, a title from the first prompt, tool calls
// whose titles say what runs, an edit with its file as location and its
// change as diff content (in the ask too) made through the client's
// fs/read_text_file and fs/write_text_file (its unsaved buffer), and /cost
// answered by dsh.
func TestACPEditorView(t *testing.T) {
	sdk := testpeers.Path(t, "node_modules/@agentclientprotocol/sdk/dist/acp.js")
	var models []string
	var read string
	var mu sync.Mutex
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		models = append(models, r.Model)
		switch len(r.ToolResults) {
		case 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo from-bash"}`}}
		case 1:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}
		case 2:
			read = r.ToolResults[1]
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "edit_file", Arguments: `{"path":"notes.txt","old_string":"old line","new_string":"new line"}`}}
		}
		return llmtest.Reply{Text: "edited"}
	})
	home, cwd := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("old line\n"), 0o644)
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte("models:\n  - name: deepseek\n  - name: local\n    baseURL: "+srv.URL+"\n    model: deepseek-v4-pro\n    apiKeyEnv: DEEPSEEK_API_KEY\n    thinking: disabled\n"), 0o600)
	cmd := exec.Command("node", "testdata/acp-editor.mjs", sdk, dshBinary, cwd, "deepseek-v4-pro")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + cfg,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client: %v\n%s\n%s", err, out, stderr.String())
	}
	var got struct {
		Exit          int
		Frames        int
		Invalid       []map[string]string
		Kinds         []string
		ConfigOptions []struct {
			ID, Category, CurrentValue string
			Options                    []struct{ Value string }
		}
		AfterSet  []struct{ CurrentValue string }
		Commands  []struct{ Name string }
		Title     string
		ToolCalls []struct {
			Title, Kind string
			Locations   []struct{ Path string }
		}
		ToolUpdates []struct {
			Status  string
			Content []struct {
				Type             string
				Path             string
				OldText, NewText string
				Content          struct{ Text string }
			}
		}
		Asks []struct {
			Title   string
			Content []struct{ Type string }
		}
		Stops    []string
		CostText string
		BadModel string
		Reads    []string
		Writes   []struct{ Path, Content string }
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %s: %v", out, err)
	}
	if got.Exit != 0 || len(got.Invalid) > 0 || got.Frames < 10 {
		t.Errorf("exit %d, %d frames, invalid: %v", got.Exit, got.Frames, got.Invalid)
	}
	if len(got.ConfigOptions) != 1 || got.ConfigOptions[0].ID != "model" || got.ConfigOptions[0].Category != "model" ||
		got.ConfigOptions[0].CurrentValue != "deepseek-flash" || len(got.ConfigOptions[0].Options) != 2 ||
		len(got.AfterSet) != 1 || got.AfterSet[0].CurrentValue != "deepseek-v4-pro" {
		t.Errorf("config options %+v, after the set %+v", got.ConfigOptions, got.AfterSet)
	}
	mu.Lock()
	if len(models) == 0 || slices.ContainsFunc(models, func(m string) bool { return m != "deepseek-v4-pro" }) {
		t.Errorf("the model calls went to %v, want deepseek-v4-pro", models)
	}
	if !strings.Contains(read, "unsaved line") {
		t.Errorf("read_file did not read the editor's buffer: %q", read)
	}
	mu.Unlock()
	if len(got.Commands) != 2 || got.Title != "Edit the notes please" {
		t.Errorf("commands %+v, title %q", got.Commands, got.Title)
	}
	notes := filepath.Join(cwd, "notes.txt")
	if len(got.ToolCalls) != 3 || got.ToolCalls[0].Title != "bash: echo from-bash" || got.ToolCalls[0].Kind != "execute" ||
		got.ToolCalls[1].Title != "read_file: notes.txt" || got.ToolCalls[1].Kind != "read" ||
		got.ToolCalls[2].Title != "edit_file: notes.txt" || got.ToolCalls[2].Kind != "edit" ||
		len(got.ToolCalls[2].Locations) != 1 || got.ToolCalls[2].Locations[0].Path != notes {
		t.Fatalf("tool calls %+v", got.ToolCalls)
	}
	if len(got.ToolUpdates) != 3 || !strings.Contains(got.ToolUpdates[0].Content[0].Content.Text, "from-bash") {
		t.Fatalf("tool updates %+v", got.ToolUpdates)
	}
	if d := got.ToolUpdates[2].Content[0]; got.ToolUpdates[2].Status != "completed" || d.Type != "diff" || d.Path != notes ||
		d.OldText != "old line" || d.NewText != "new line" {
		t.Errorf("the edit's update %+v", got.ToolUpdates[2])
	}
	// The edit went through the editor: it read the buffer, unsaved line
	// included, and wrote the buffer; the disk is the editor's to save.
	if len(got.Reads) != 2 || got.Reads[0] != notes || len(got.Writes) != 1 || got.Writes[0].Path != notes ||
		got.Writes[0].Content != "new line\nunsaved line\n" {
		t.Errorf("fs/*: reads %v, writes %+v", got.Reads, got.Writes)
	}
	if b, _ := os.ReadFile(notes); string(b) != "old line\n" {
		t.Errorf("notes.txt on disk holds %q", b)
	}
	if len(got.Asks) != 2 || got.Asks[1].Title != "edit_file: notes.txt" || len(got.Asks[1].Content) != 1 || got.Asks[1].Content[0].Type != "diff" {
		t.Errorf("asks %+v", got.Asks)
	}
	if !slices.Equal(got.Stops, []string{"end_turn", "end_turn"}) || !strings.Contains(got.CostText, "local/deepseek-v4-pro: tokens in") {
		t.Errorf("stops %v, /cost %q", got.Stops, got.CostText)
	}
	if !strings.Contains(got.BadModel, "no-such-model") {
		t.Errorf("an unknown model: %q", got.BadModel)
	}
}

// acpx --model picks the model through the session config option (it
// failed: "the ACP agent did not advertise model support").
func TestACPXModelFlag(t *testing.T) {
	acpx := testpeers.Path(t, "node_modules/.bin/acpx")
	var model atomic.Value
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		model.Store(r.Model)
		return llmtest.Reply{Text: "hello from " + r.Model}
	})
	home, cwd := t.TempDir(), t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte("models:\n  - name: deepseek\n  - name: pro\n    baseURL: "+srv.URL+"\n    model: deepseek-v4-pro\n    apiKeyEnv: DEEPSEEK_API_KEY\n    thinking: disabled\n"), 0o600)
	cmd := exec.Command(acpx, "--agent", dshBinary+" acp", "--model", "deepseek-v4-pro", "--approve-all", "--format", "text", "--timeout", "60", "--cwd", cwd, "exec", "hi")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + cfg,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello from deepseek-v4-pro") || model.Load() != "deepseek-v4-pro" {
		t.Fatalf("acpx --model: %v, model %v\n%s", err, model.Load(), out)
	}
}

// The command line's conventions: did-you-mean for commands, flags and
// configuration keys; one line saying what `dsh run` lacks without a
// prompt; `dsh sessions` lists; -V and `dsh version` print the version;
// help says where logs go; `dsh worker --help` exits 0 in the default
// build.
func TestCLIConventions(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test"}
	typo := filepath.Join(home, "typo.yaml")
	os.WriteFile(typo, []byte("agent: {maxStep: 10}\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sesions"}, `unknown command "sesions" for "dsh" (did you mean "sessions"?)`},
		{[]string{"sessions", "lst"}, `unknown command "lst" for "dsh sessions" (did you mean "list"?)`},
		{[]string{"run", "--jsn", "hi"}, "unknown flag: --jsn (did you mean --json?)"},
		{[]string{"run", "--frobnicate", "hi"}, "unknown flag: --frobnicate (dsh run --help lists the flags)"},
		{[]string{"run"}, `run needs a prompt: dsh run "PROMPT", or dsh run - to read it from stdin`},
		{[]string{"run", "--cwd", "/does/not/exist", "hi"}, "--cwd /does/not/exist is not a directory"},
		{[]string{"--config", typo, "run", "hi"}, `unknown field "maxStep" (at "agent: {maxStep: 10}") (did you mean "maxSteps"?)`},
	} {
		_, _, err := runCLI(t, env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || errorCode(err) != codeUsage && c.args[0] != "--config" {
			t.Errorf("dsh %s: %v (code %s), want %q", strings.Join(c.args, " "), err, errorCode(err), c.want)
		}
	}
	if out, _, err := runCLI(t, env, "sessions"); err != nil || !strings.HasPrefix(out, "ID  AGE  STATUS") {
		t.Errorf("dsh sessions: %v\n%s", err, out)
	}
	version, _, _ := runCLI(t, env, "--version")
	for _, args := range [][]string{{"-V"}, {"version"}} {
		if out, _, err := runCLI(t, env, args...); err != nil || out != version || !strings.HasPrefix(out, "dsh ") {
			t.Errorf("dsh %s: %v %q, want %q", args[0], err, out, version)
		}
	}
	for _, cmd := range []string{"acp", "mcp"} {
		out, _, _ := runCLI(t, env, cmd, "--help")
		if strings.Contains(out, "logs go to stderr") || !strings.Contains(out, "$DSH_HOME/logs/dsh.log") {
			t.Errorf("dsh %s --help does not say where logs go:\n%s", cmd, out)
		}
	}
	worker := exec.Command(dshBinary, "worker", "--help")
	worker.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home}
	if out, err := worker.CombinedOutput(); err != nil || !strings.Contains(string(out), "with the tag\ntemporal") {
		t.Errorf("dsh worker --help: %v\n%s", err, out)
	}
}

// readmeJSONAfter decodes the first json block of the README after the
// text marker.
func readmeJSONAfter(t *testing.T, marker string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(readmeBlock(t, "json", marker)), v); err != nil {
		t.Fatalf("the README's json block after %q: %v", marker, err)
	}
}

// stdioServer is a server entry of an editor's configuration.
type stdioServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// run starts the entry as its client would, with this dsh binary for
// "dsh", the key replaced by a test key and the model at url, writes
// frames to it and returns what it wrote until the answer to the last
// frame (a request of id 2), then ends its input.
func (s stdioServer) run(t *testing.T, home, url string, frames ...string) string {
	t.Helper()
	if s.Command != "dsh" || s.Env["DEEPSEEK_API_KEY"] != "sk-..." {
		t.Fatalf("the README's entry changed: %+v", s)
	}
	cmd := exec.Command(dshBinary, s.Args...)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_BASE_URL=" + url}
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+strings.Replace(v, "sk-...", "sk-test", 1))
	}
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, strings.Join(frames, "\n")+"\n")
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `"id":2,`) {
			break
		}
	}
	in.Close()
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %v: %v\n%s", s.Command, s.Args, err, out.String())
	}
	return out.String()
}

// The README's Zed block, as written, starts an ACP agent that answers a
// prompt; `dsh acp --help` shows the same block.
func TestREADMEZedBlock(t *testing.T) {
	var zed struct {
		AgentServers map[string]stdioServer `json:"agent_servers"`
	}
	readmeJSONAfter(t, "## dsh as an ACP agent", &zed)
	entry := zed.AgentServers["dsh"]
	if entry.Type != "custom" || !slices.Equal(entry.Args, []string{"acp"}) {
		t.Fatalf("the README's Zed entry: %+v", entry)
	}
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hello from zed's dsh"} })
	home := t.TempDir()
	out := entry.run(t, home, srv.URL, initFrame,
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"`+home+`","mcpServers":[]}}`)
	if !strings.Contains(out, `"id":2,"result":{`) {
		t.Fatalf("session/new: %s", out)
	}
	help, _, _ := runCLI(t, map[string]string{}, "acp", "--help")
	block := help[strings.Index(help, `  "agent_servers"`):]
	block = "{" + block[:strings.Index(block, "\n  }")+4] + "}"
	var fromHelp struct {
		AgentServers map[string]stdioServer `json:"agent_servers"`
	}
	if err := json.Unmarshal([]byte(block), &fromHelp); err != nil || !reflect.DeepEqual(fromHelp, zed) {
		t.Errorf("dsh acp --help's block %v differs from the README's:\n%s", err, block)
	}
}

const initFrame = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`

// The README's Claude Desktop block, as written, starts dsh's MCP server,
// which lists its tools.
func TestREADMEClaudeDesktopBlock(t *testing.T) {
	var desktop struct {
		MCPServers map[string]stdioServer `json:"mcpServers"`
	}
	readmeJSONAfter(t, "Claude Desktop reads", &desktop)
	entry := desktop.MCPServers["dsh"]
	if !slices.Equal(entry.Args, []string{"mcp"}) {
		t.Fatalf("the README's Claude Desktop entry: %+v", entry)
	}
	out := entry.run(t, t.TempDir(), "http://127.0.0.1:1",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if !strings.Contains(out, `"name":"subagent"`) {
		t.Errorf("tools/list: %s", out)
	}
}

// The README's `claude mcp add` line, run with the pinned Claude Code,
// records dsh in the user's configuration, and `claude mcp list` connects
// to it.
func TestREADMEClaudeMCPAdd(t *testing.T) {
	claude := testpeers.Path(t, "node_modules/@anthropic-ai/claude-code-linux-x64/claude")
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^claude mcp add .*$`).FindString(string(data))
	if line == "" {
		t.Fatal("README.md has no claude mcp add line")
	}
	home, bin := t.TempDir(), t.TempDir()
	if err := os.Symlink(dshBinary, filepath.Join(bin, "dsh")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1"}
	args := strings.Fields(strings.Replace(line, "sk-...", "sk-test", 1))[1:]
	add := exec.Command(claude, args...)
	add.Dir, add.Env = home, env
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	var cfg struct {
		MCPServers map[string]stdioServer `json:"mcpServers"`
	}
	b, _ := os.ReadFile(filepath.Join(home, ".claude.json"))
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if s := cfg.MCPServers["dsh"]; s.Command != "dsh" || !slices.Equal(s.Args, []string{"mcp"}) || s.Env["DEEPSEEK_API_KEY"] != "sk-test" {
		t.Fatalf("claude recorded %+v", cfg.MCPServers)
	}
	list := exec.Command(claude, "mcp", "list")
	list.Dir, list.Env = home, env
	if out, err := list.CombinedOutput(); err != nil || !strings.Contains(string(out), "dsh: dsh mcp - ✔ Connected") {
		t.Errorf("claude mcp list: %v\n%s", err, out)
	}
}

// --output-format, as Claude Code names it: json writes only the result
// line, stream-json is --json, anything else is a usage error.
func TestOutputFormat(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{Reasoning: "hm", ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo x"}`}}
		}
		return llmtest.Reply{Text: "the answer"}
	})
	env := modelEnv(t, srv.URL)
	out, _, err := runCLI(t, env, "run", "--output-format", "json", "--cwd", t.TempDir(), "go")
	lines := jsonLines(t, out)
	if err != nil || len(lines) != 1 || lines[0]["type"] != "result" || lines[0]["text"] != "the answer" {
		t.Errorf("json: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, env, "run", "--output-format=stream-json", "--cwd", t.TempDir(), "go")
	if types := typesOf(jsonLines(t, out)); err != nil || types[0] != "session" || types[len(types)-1] != "result" || !slices.Contains(types, "tool_result") {
		t.Errorf("stream-json: %v %v", err, types)
	}
	if _, _, err := runCLI(t, env, "run", "--output-format", "xml", "go"); err == nil || errorCode(err) != codeUsage ||
		!strings.Contains(err.Error(), `--output-format: want text, json or stream-json, got "xml"`) {
		t.Errorf("xml: %v", err)
	}
	if !wantsJSON([]string{"--config", "x.yaml", "run", "--output-format", "json", "hi"}) || wantsJSON([]string{"run", "--output-format", "text", "hi"}) {
		t.Error("wantsJSON does not read --output-format")
	}
}

// On a terminal too, a child's progress line names the child: with
// children in parallel, "· bash" alone does not say whose it is.
func TestHumanChildLinesNameTheChild(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo 3"}`}}
		case r.Child:
			return llmtest.Reply{Text: "3"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"count","prompt":"count them"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	_, errOut, err := runCLI(t, modelEnv(t, srv.URL), "run", "--cwd", t.TempDir(), "go")
	if err != nil || !strings.Contains(errOut, "    · count · bash\n") {
		t.Errorf("%v\n%s", err, errOut)
	}
}

// Ctrl-C on dsh run --json: the last line is still the result, with the
// answer so far, stop_reason interrupted and code INTERRUPTED; exit 130.
func TestJSONInterrupted(t *testing.T) {
	srv := chatServer(t, func(chatRequest) chatReply { return chatReply{Deltas: []string{"Thinking"}, Drip: true} }, nil)
	cmd := dshCommand(t, srv, t.TempDir(), "", "run", "--json", "--cwd", t.TempDir(), "think forever")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var out strings.Builder
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `"type":"text"`) {
			cmd.Process.Signal(os.Interrupt)
			break
		}
	}
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	lines := jsonLines(t, out.String())
	last := lines[len(lines)-1]
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || last["type"] != "result" || last["stop_reason"] != "interrupted" ||
		last["code"] != "INTERRUPTED" || !strings.HasPrefix(fmt.Sprint(last["text"]), "Thinking") {
		t.Errorf("exit %v, last line %v", err, last)
	}
}
