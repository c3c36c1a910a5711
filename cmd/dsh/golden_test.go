package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/llm/replay"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/tool"
)

// record re-records the golden scenarios from the loopback model:
//
//	go test ./cmd/dsh -run TestGolden -record
var record = flag.Bool("record", false, "re-record the golden scenarios under testdata/golden from the loopback model")

// goldenScenario is a nested conversation recorded once from the loopback
// model and replayed by every test run without it.
type goldenScenario struct {
	name   string
	config string // dsh.yaml
	prompt string
	reply  func(llmtest.Request) llmtest.Reply
	// setup, when set, adds what a configuration cannot say to the
	// runtime; the scenario then records and replays in this process
	// instead of through the dsh binary.
	setup func(rt *dsh.Runtime) error
}

func (g goldenScenario) dir() string { return filepath.Join("testdata", "golden", g.name) }

// text answers with s, after a thought.
func text(s string) llmtest.Reply { return llmtest.Reply{Reasoning: "Let me answer.", Text: s} }

// call answers with a tool call.
func call(name, args string) llmtest.Reply {
	return llmtest.Reply{Reasoning: "A tool helps here.", Text: "On it.", ToolCall: &llmtest.ToolCall{Name: name, Arguments: args}}
}

var goldenScenarios = []goldenScenario{
	{name: "spawn", prompt: "Ask a subagent to count to three.",
		reply: func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.Child:
				return text("one, two, three")
			case len(r.ToolResults) == 0:
				return call("subagent", `{"description":"count","prompt":"Count to three."}`)
			}
			return text("The subagent counted: " + r.ToolResults[0])
		}},
	{name: "fork", prompt: "Have a fork recap this request.",
		reply: func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.Child:
				return text("Recap: a fork recaps the request.")
			case len(r.ToolResults) == 0:
				return call("subagent_fork", `{"description":"recap","prompt":"Recap the request in one line."}`)
			}
			return text("The fork said: " + r.ToolResults[0])
		}},
	{name: "parallel", prompt: "Ask two subagents at once: one for a colour, one for a fruit.",
		reply: func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.Child && r.LastUser == "Name a colour.":
				return text("blue")
			case r.Child:
				return text("pear")
			case len(r.ToolResults) == 0:
				rep := call("subagent", `{"description":"colour","prompt":"Name a colour."}`)
				rep.ToolCalls = []llmtest.ToolCall{{Name: "subagent", Arguments: `{"description":"fruit","prompt":"Name a fruit."}`}}
				return rep
			}
			return text("Colour and fruit: " + strings.Join(r.ToolResults, " and "))
		}},
	{name: "background", prompt: "Start a background subagent and report what it finds.",
		reply: func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.Child:
				// Slow, so that the parent's turn ends first and the
				// completion notice opens a turn of its own.
				rep := text("found: 42")
				rep.Delay = 300 * time.Millisecond
				return rep
			case strings.HasPrefix(r.LastUser, "background task subagent-1") && len(r.ToolResults) == 1:
				return call("task_output", `{"task_id":"subagent-1"}`)
			case strings.HasPrefix(r.LastUser, "background task subagent-1"):
				return text("The background subagent reported: " + r.ToolResults[1])
			case len(r.ToolResults) == 0:
				return call("subagent", `{"description":"search","prompt":"Find the answer.","run_in_background":true}`)
			}
			return text("Started; I will report when it finishes.")
		}},
	{name: "depth", prompt: "Delegate, and let the subagent try to delegate too.",
		config: "subagents:\n  providers:\n    - name: spawn\n  tools:\n    - provider: spawn\n      maxDepth: 1\n",
		reply: func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.Child && len(r.ToolResults) == 0:
				return call("subagent", `{"description":"deeper","prompt":"Go one level deeper."}`)
			case r.Child:
				return text("I could not delegate: " + r.ToolResults[0])
			case len(r.ToolResults) == 0:
				return call("subagent", `{"description":"nest","prompt":"Try to delegate."}`)
			}
			return text("The subagent reported: " + r.ToolResults[0])
		}},
	{name: "acp-self", prompt: "Ask dsh in another process to say hello.",
		config: "subagents:\n  providers:\n    - name: isolated\n      kind: acp\n      acp: {command: self}\n  tools:\n    - provider: isolated\n      toolName: subagent_isolated\n",
		reply: func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.LastUser == "Say hello from another process.":
				return text("Hello from another process.")
			case len(r.ToolResults) == 0:
				return call("subagent_isolated", `{"description":"hello","prompt":"Say hello from another process."}`)
			}
			return text("The other dsh said: " + r.ToolResults[0])
		}},
	{name: "structured", prompt: "Classify the report 'the build fails on macOS'.",
		setup: mountClassify,
		reply: func(r llmtest.Request) llmtest.Reply {
			switch {
			case r.Child:
				return call(inproc.StructuredTool, `{"label":"bug","confidence":0.9}`)
			case len(r.ToolResults) == 0:
				return call("classify", `{"report":"the build fails on macOS"}`)
			}
			return text("Classified: " + r.ToolResults[0])
		}},
}

// mountClassify adds a tool that delegates to a spawn child with an output
// schema (the model-facing subagent tool asks for none) and returns the
// child's structured result.
func mountClassify(rt *dsh.Runtime) error {
	schema := &jsonschema.Schema{Type: "object", Required: []string{"label"}, Properties: map[string]*jsonschema.Schema{
		"label": {Type: "string", Enum: []any{"bug", "feature", "question"}}, "confidence": {Type: "number"}}}
	type args struct {
		Report string `json:"report"`
	}
	_, err := rt.Tools.Register(tool.Func("classify", "Classify a report as a bug, a feature or a question.", true,
		func(ctx context.Context, call tool.Call, a args) (tool.Result, error) {
			run, err := rt.Subagents.Start(ctx, "spawn", subagent.StartRequest{Label: "classify", Parent: call.Caller.(*agent.Agent),
				Prompt: []content.Block{content.Text("Classify this report: " + a.Report)}, OutputSchema: schema, Foreground: true})
			if err != nil {
				return tool.Result{}, err
			}
			res, err := run.Wait(context.WithoutCancel(ctx))
			run.Dispose(context.WithoutCancel(ctx))
			if err != nil || res.StopReason != subagent.Completed {
				return tool.Result{}, errors.Join(err, errors.New(string(res.StopReason)+": "+res.Diagnostic))
			}
			b, _ := json.Marshal(res.Structured)
			return tool.TextResult(string(b)), nil
		}))
	return err
}

// The golden scenarios replay without a model: each re-run matches its
// recording. With -record they are recorded again first.
func TestGolden(t *testing.T) {
	for _, g := range goldenScenarios {
		t.Run(g.name, func(t *testing.T) {
			if *record {
				g.record(t)
			}
			out, err := g.replay(t, t.TempDir(), nil)
			if err != nil || !strings.Contains(out, "replay: the re-run matches the recording") {
				t.Fatalf("the replay of %s departs from its recording (%v); re-record with `go test ./cmd/dsh -run TestGolden -record` if the change is meant:\n%s", g.name, err, out)
			}
		})
	}
}

// record runs the scenario against the loopback model and stores its tree
// of sessions under testdata/golden/<name>.
func (g goldenScenario) record(t *testing.T) {
	t.Helper()
	srv := llmtest.NewServer(t, g.reply)
	home, cwd := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(g.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.dir(), "dsh.yaml"), []byte(g.configText()), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home, "DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL,
		"PATH": os.Getenv("PATH"), "DSH_CONFIG": g.configPath(t)}
	if g.setup == nil {
		if out, err := dshProcess(env, "run", "--cwd", cwd, g.prompt).CombinedOutput(); err != nil {
			t.Fatalf("dsh run: %v\n%s", err, out)
		}
	} else {
		c := &cli{stdout: new(bytes.Buffer), stderr: new(bytes.Buffer), getenv: func(k string) string { return env[k] }}
		cfg, err := c.loadConfig("")
		if err != nil {
			t.Fatal(err)
		}
		rt, err := cfg.Build(context.Background(), nil, nil, c.getenv)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.setup(rt); err != nil {
			t.Fatal(err)
		}
		policy := cfg.Policy()
		root := agent.CreateOptions{Cwd: cwd, Options: cfg.Agent, Policy: &policy, Asker: permission.AskerFunc(refuseAsks)}
		if err := c.runTurns(context.Background(), rt, runSpec{root: root}, slices.Values([]string{g.prompt})); err != nil {
			t.Fatalf("run: %v\n%s", err, c.stderr)
		}
	}
	rec, err := storedTree(filepath.Join(home, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(g.dir(), "sessions")
	if err := os.RemoveAll(sessions); err != nil {
		t.Fatal(err)
	}
	if err := rec.WriteDir(sessions); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d sessions under %s", len(rec.Sessions), sessions)
}

func (g goldenScenario) configText() string {
	return "# The configuration of the golden scenario " + g.name + " (see golden_test.go).\nagent:\n  maxSteps: 10\n" + g.config
}

func (g goldenScenario) configPath(t *testing.T) string {
	abs, err := filepath.Abs(filepath.Join(g.dir(), "dsh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// replay re-runs the recorded scenario with `dsh replay` (in this process
// when it has a setup, which mutate may change further) and returns what it
// printed.
func (g goldenScenario) replay(t *testing.T, home string, mutate func(rt *dsh.Runtime) error) (string, error) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(g.dir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	// No key and no model endpoint: nothing but the recording answers.
	env := map[string]string{"HOME": home, "DSH_HOME": home, "PATH": os.Getenv("PATH"), "DSH_CONFIG": g.configPath(t),
		"DEEPSEEK_BASE_URL": "http://127.0.0.1:9"}
	cwd := t.TempDir()
	if g.setup == nil && mutate == nil {
		out, err := dshProcess(env, "replay", "--dir", dir, "--cwd", cwd).CombinedOutput()
		return string(out), err
	}
	var out bytes.Buffer
	c := &cli{stdout: &lockedWriter{w: &out}, stderr: &lockedWriter{w: &out}, getenv: func(k string) string { return env[k] }}
	cfg, err := c.loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	setup := func(rt *dsh.Runtime) error {
		for _, f := range []func(*dsh.Runtime) error{g.setup, mutate} {
			if f != nil {
				if err := f(rt); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err = c.replay(context.Background(), cfg, replaySpec{dir: dir, home: home, cwd: cwd, setup: setup})
	return out.String(), err
}

func dshProcess(env map[string]string, args ...string) *exec.Cmd {
	cmd := exec.Command(dshBinary, args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// A change that alters what dsh sends to the model fails the scenario that
// sees it, with a diff pointing at the change: here a tool's description.
func TestGoldenCatchesAChangedToolDescription(t *testing.T) {
	var spawn goldenScenario
	for _, g := range goldenScenarios {
		if g.name == "spawn" {
			spawn = g
		}
	}
	// Every agent's glob tool is reworded, as a code change would: a tool
	// of an agent's own scope takes the place of the global one.
	reworded := tool.Func("glob", "Find files by pattern (reworded).", true,
		func(context.Context, tool.Call, struct{}) (tool.Result, error) { return tool.TextResult(""), nil })
	out, err := spawn.replay(t, t.TempDir(), func(rt *dsh.Runtime) error {
		event.On(rt.Events, func(e agent.Created) { e.Agent.Tools().Register(reworded) })
		return nil
	})
	if !errors.Is(err, errReplayDiverged) {
		t.Fatalf("the replay did not fail: %v\n%s", err, out)
	}
	for _, want := range []string{"replay: the re-run departs from the recording", "(top level), turn 1 step 1",
		`tool "glob": its description differs`, `live:     "Find files by pattern (reworded)."`} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// dsh replay SESSION re-runs a stored conversation from the sessions of
// DSH_HOME, with no key and no model endpoint, leaving the store as it was.
func TestReplayStoredSession(t *testing.T) {
	var spawn goldenScenario
	for _, g := range goldenScenarios {
		if g.name == "spawn" {
			spawn = g
		}
	}
	srv := llmtest.NewServer(t, spawn.reply)
	home := t.TempDir()
	env := map[string]string{"HOME": home, "DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL, "PATH": os.Getenv("PATH")}
	out, err := dshProcess(env, "run", "--cwd", t.TempDir(), spawn.prompt).CombinedOutput()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`\[session ([0-9a-f-]{36})`).FindStringSubmatch(string(out))
	if id == nil {
		t.Fatalf("no session id in %s", out)
	}
	before := storedSessions(t, home)
	delete(env, "DEEPSEEK_API_KEY")
	env["DEEPSEEK_BASE_URL"] = "http://127.0.0.1:9"
	out, err = dshProcess(env, "replay", id[1]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "replay: the re-run matches the recording (2 sessions, 3 model calls)") {
		t.Fatalf("dsh replay: %v\n%s", err, out)
	}
	if after := storedSessions(t, home); len(after) != len(before) {
		t.Fatalf("the replay changed the store: %d sessions before, %d after", len(before), len(after))
	}
	// A child is replayed through its top-level session.
	var child string
	for sid, s := range before {
		if s.header.ParentSession != "" {
			child = sid
		}
	}
	out, err = dshProcess(env, "replay", child).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "replay the top-level session") {
		t.Fatalf("replaying a child: %v\n%s", err, out)
	}
}

// A divergence inside a `command: self` child (another process, answering
// from the same recording) is reported with the child's own diff.
func TestReplayReportsADivergenceInASelfChild(t *testing.T) {
	var self goldenScenario
	for _, g := range goldenScenarios {
		if g.name == "acp-self" {
			self = g
		}
	}
	dir := t.TempDir()
	rec, err := replay.ReadDir(filepath.Join(self.dir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	// The child's recorded glob tool is described differently, as if the
	// recording had been made by another dsh.
	var child *replay.Session // the child process's own session: the one of the two with model requests
	for _, c := range rec.Sessions[1:] {
		if slices.ContainsFunc(c.Events, func(e session.Event) bool { _, ok := e.Data.(session.RequestHeader); return ok }) {
			child = c
			break
		}
	}
	if child == nil {
		t.Fatal("the recording has no child session with model requests")
	}
	for i, e := range child.Events {
		if h, ok := e.Data.(session.RequestHeader); ok {
			tools := slices.Clone(h.Tools)
			for j := range tools {
				if tools[j].Name == "glob" {
					tools[j].Description = "Find FILES by pattern."
				}
			}
			h.Tools = tools
			child.Events[i].Data = h
		}
	}
	if err := rec.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := map[string]string{"HOME": home, "DSH_HOME": home, "PATH": os.Getenv("PATH"), "DSH_CONFIG": self.configPath(t)}
	out, err := dshProcess(env, "replay", "--dir", dir, "--cwd", t.TempDir()).CombinedOutput()
	if err == nil {
		t.Fatalf("the replay matched:\n%s", out)
	}
	for _, want := range []string{"replay: the re-run departs from the recording", child.Label(),
		`tool "glob": its description differs`, `recorded: "Find FILES by pattern."`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// The README's replay example runs as written, from the repository's root.
func TestREADMEReplayCommand(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`go run ./cmd/dsh (replay --config \S+ --dir \S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("README.md has no dsh replay --dir example")
	}
	home := t.TempDir()
	cmd := dshProcess(map[string]string{"HOME": home, "DSH_HOME": home, "PATH": os.Getenv("PATH")}, strings.Fields(string(m[1]))...)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "replay: the re-run matches the recording") {
		t.Fatalf("%s: %v\n%s", m[1], err, out)
	}
}
