package agentdef_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
)

var inproc = subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true, Policy: true}

func options(dirs ...agentdef.Dir) agentdef.Options {
	return agentdef.Options{
		Dirs:   dirs,
		Tools:  []string{"bash", "edit_file", "glob", "grep", "read_file", "subagent", "task_list", "write_file"},
		Routes: []string{"cheap", "deepseek"},
		Providers: map[string]subagent.Capabilities{"spawn": inproc, "fork": inproc, "claude-code": {},
			"isolated": {DepthLimit: true}},
	}
}

// write puts files (name → content) in a new folder.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t *testing.T, dirs ...agentdef.Dir) (*agentdef.Catalog, []string) {
	t.Helper()
	c, warns, err := agentdef.Load(options(dirs...))
	if err != nil {
		t.Fatal(err)
	}
	return c, warns
}

func TestBuiltins(t *testing.T) {
	c, warns := load(t)
	if len(warns) > 0 || !slices.Equal(c.Names(), []string{"explore", "general"}) {
		t.Fatalf("catalog %v, warnings %v", c.Names(), warns)
	}
	explore, _ := c.Get("explore")
	if !slices.Equal(explore.Tools, []string{"read_file", "grep", "glob"}) || explore.Instructions == "" ||
		explore.Source.Scope != "built-in" || explore.Provider != "" {
		t.Errorf("explore %+v", explore)
	}
	general, _ := c.Get("general")
	if general.Tools != nil || general.Instructions != "" {
		t.Errorf("general %+v", general)
	}
	if _, ok := c.Get("nope"); ok {
		t.Error("Get found an unknown type")
	}
	want := "\n- explore: Read-only codebase explorer"
	if d := c.Describe(); !strings.HasPrefix(d, want) || !strings.Contains(d, "\n- general: General-purpose") || d != c.Describe() {
		t.Errorf("Describe = %q", d)
	}
}

// Claude Code's own files load unchanged: its tool names map onto dsh's,
// its fields that dsh does not use are one warning each.
func TestClaudeCodeFiles(t *testing.T) {
	project := filepath.Join("testdata", "claude-project")
	c, warns := load(t, agentdef.Dirs(project, "", "")...)
	reviewer, ok := c.Get("code-reviewer")
	if !ok {
		t.Fatalf("no code-reviewer in %v", c.Names())
	}
	if !slices.Equal(reviewer.Tools, []string{"read_file", "grep", "glob", "bash"}) || reviewer.Model != "" ||
		!strings.HasPrefix(reviewer.Instructions, "You are a senior code reviewer") || !reviewer.Source.Claude ||
		reviewer.Source.Scope != "project" || reviewer.Policy != nil || !reviewer.Hooks.Empty() {
		t.Errorf("code-reviewer %+v", reviewer)
	}
	runner, _ := c.Get("test-runner")
	if !slices.Equal(runner.Tools, []string{"read_file", "edit_file", "bash", "grep", "glob"}) ||
		!slices.Equal(runner.DisallowedTools, []string{"write_file"}) || runner.MaxSteps != 25 || runner.Model != "" ||
		runner.Isolation != agentdef.IsolationWorktree || !runner.Background || runner.Policy != nil {
		t.Errorf("test-runner %+v", runner)
	}
	if !runner.Hooks.Has(hook.PreToolUse) || !runner.Hooks.Has(hook.SubagentStop) || runner.Hooks.Has(hook.Stop) {
		t.Errorf("test-runner's hooks: Stop must become SubagentStop")
	}
	path := filepath.Join(project, ".claude", "agents", "test-runner.md")
	wantWarns := []string{
		"agent definition " + path + ":4: tools: WebFetch is a Claude Code tool dsh does not have; left out",
		"agent definition " + path + ":14: permissionMode: acceptEdits would widen the parent's permission policy, which a child cannot do; ignored",
		"agent definition " + path + ":17: color: a Claude Code field dsh does not use; ignored",
		"agent definition " + path + ":18: memory: a Claude Code field dsh does not use; ignored",
		"agent definition " + path + ":19: skills: a Claude Code field dsh does not use; ignored",
		"agent definition " + path + ":32: hooks: dsh runs no UserPromptSubmit hooks; ignored",
		`agent definitions: model "sonnet" (1 file): not a configured model route (routes: cheap, deepseek); those agents use their parent's route`,
	}
	if diff := cmp.Diff(wantWarns, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// A project definition shadows a user one of the same name, which shadows
// the built-in; dsh's folder wins over Claude Code's.
func TestPrecedence(t *testing.T) {
	def := func(name, desc string) string {
		return "---\nname: " + name + "\ndescription: " + desc + "\n---\nbody of " + desc + "\n"
	}
	project := t.TempDir()
	os.MkdirAll(filepath.Join(project, ".dsh", "agents"), 0o755)
	os.MkdirAll(filepath.Join(project, ".claude", "agents"), 0o755)
	os.WriteFile(filepath.Join(project, ".dsh", "agents", "a.md"), []byte(def("explore", "project explore")), 0o644)
	os.WriteFile(filepath.Join(project, ".claude", "agents", "a.md"), []byte(def("explore", "claude explore")), 0o644)
	os.WriteFile(filepath.Join(project, ".claude", "agents", "b.md"), []byte(def("reviewer", "claude reviewer")), 0o644)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, "agents"), 0o755)
	os.WriteFile(filepath.Join(home, "agents", "x.md"), []byte(def("explore", "user explore")), 0o644)
	os.WriteFile(filepath.Join(home, "agents", "y.md"), []byte(def("reviewer", "user reviewer")), 0o644)
	os.WriteFile(filepath.Join(home, "agents", "z.md"), []byte(def("mine", "user only")), 0o644)
	os.WriteFile(filepath.Join(home, "agents", "notes.txt"), []byte("not a definition"), 0o644)

	c, _ := load(t, agentdef.Dirs(project, home, t.TempDir())...)
	for name, want := range map[string]string{"explore": "project explore", "reviewer": "claude reviewer", "mine": "user only",
		"general": "General-purpose agent with the same tools as you: research, multi-step changes, running commands. Use it when no other type fits."} {
		if d, ok := c.Get(name); !ok || d.Description != want {
			t.Errorf("%s: got %+v, want %q", name, d, want)
		}
	}
	explore, _ := c.Get("explore")
	var over []string
	for _, s := range explore.Overrides {
		over = append(over, s.String())
	}
	want := []string{"project (Claude Code) " + filepath.Join(project, ".claude", "agents", "a.md"),
		"user " + filepath.Join(home, "agents", "x.md"), "built-in"}
	if diff := cmp.Diff(want, over); diff != "" {
		t.Errorf("overrides (-want +got):\n%s", diff)
	}
}

// Every field of dsh's own format.
func TestDSHFormat(t *testing.T) {
	dir := write(t, map[string]string{
		"schema.json": `{"type":"object","properties":{"verdict":{"type":"string"}},"required":["verdict"]}`,
		"reviewer.md": `---
name: reviewer
description: Reviews a change and returns a verdict.
tools: [read_file, grep]
model: cheap
provider: fork
maxSteps: 12
outputSchema: schema.json
isolation: worktree
permissions:
  default: ask
  tools: {read_file: allow, grep: allow}
hooks:
  PostToolUse:
    - matcher: read_file
      hooks: [{command: "echo read >> log"}]
---
Review the change.
`,
		"inline.md": "---\nname: inline\ndescription: d\noutputSchema:\n  type: object\n  properties: {n: {type: integer}}\npermissionMode: plan\n---\n",
	})
	c, warns := load(t, agentdef.Dir{Path: dir, Scope: "project"})
	if len(warns) > 0 {
		t.Fatalf("warnings %v", warns)
	}
	r, _ := c.Get("reviewer")
	if r.Model != "cheap" || r.Provider != "fork" || r.MaxSteps != 12 || r.Isolation != "worktree" || r.Instructions != "Review the change." ||
		r.OutputSchema == nil || r.OutputSchema.Required[0] != "verdict" || r.Background {
		t.Errorf("reviewer %+v", r)
	}
	if r.Policy == nil || r.Policy.Decide("bash") != permission.Ask || r.Policy.Decide("grep") != permission.Allow || !r.Hooks.Has(hook.PostToolUse) {
		t.Errorf("reviewer policy %v, hooks %v", r.Policy, r.Hooks)
	}
	in, _ := c.Get("inline")
	if in.OutputSchema == nil || in.OutputSchema.Properties["n"].Type != "integer" || in.Policy.Decide("bash") != permission.Deny ||
		in.Policy.Decide("read_file") != permission.Allow || in.Instructions != "" {
		t.Errorf("inline %+v", in)
	}
}

// A bad file is left out with a warning naming the file, the line and the
// field; the other files of its folder load.
func TestErrors(t *testing.T) {
	tests := []struct {
		name, text string
		claude     bool
		want       string // after "agent definition PATH"
	}{
		{"no front matter", "name: x\n", false, `:1: no front matter: a definition starts with a line "---", then YAML, then another "---" line, then the instructions`},
		{"unterminated", "---\nname: x\n", false, `:1: the front matter does not end: add a line "---" after it`},
		{"syntax", "---\nname: x\ndescription: [unclosed\n---\n", false, ":3: "},
		{"not a mapping", "---\n- a\n- b\n---\n", false, ":2: the front matter must be a mapping of keys such as name and description"},
		{"no name", "---\ndescription: d\n---\n", false, ":1: name: is required"},
		{"no description", "---\nname: x\n---\n", false, ":1: description: is required: it tells the model when to use this agent"},
		{"duplicate key", "---\nname: x\nname: y\n---\n", false, `:3: mapping key "name" already defined at line 2`},
		{"tools not a list", "---\nname: x\ndescription: d\ntools: {a: b}\n---\n", false, ":4: tools: want a string, got {a: b}"},
		{"unknown provider", "---\nname: x\ndescription: d\nprovider: codex\n---\n", false, `:4: provider: "codex" is not a registered subagent provider (registered: claude-code, fork, isolated, spawn)`},
		{"max steps", "---\nname: x\ndescription: d\nmaxSteps: two\n---\n", false, ":4: maxSteps: want an integer, got two"},
		{"max turns zero", "---\nname: x\ndescription: d\nmaxTurns: 0\n---\n", false, ":4: maxTurns: want a positive integer, got 0"},
		{"both caps", "---\nname: x\ndescription: d\nmaxSteps: 3\nmaxTurns: 4\n---\n", false, ":5: maxTurns: maxSteps is set too: keep one"},
		{"background", "---\nname: x\ndescription: d\nbackground: sometimes\n---\n", false, ":4: background: want true or false, got sometimes"},
		{"isolation", "---\nname: x\ndescription: d\nisolation: container\n---\n", false, `:4: isolation: want "worktree", got "container"`},
		{"schema not an object", "---\nname: x\ndescription: d\noutputSchema: {type: string}\n---\n", false, `:4: outputSchema: subagent: unsupported JSON schema: root: type must be "object"`},
		{"schema file missing", "---\nname: x\ndescription: d\noutputSchema: nope.json\n---\n", false, ":4: outputSchema: open "},
		{"permission value", "---\nname: x\ndescription: d\npermissions: {tools: {bash: maybe}}\n---\n", false, `:4: permissions: tools.bash: want allow, ask or deny, got "maybe"`},
		{"permission tool", "---\nname: x\ndescription: d\npermissions:\n  tools:\n    bsh: deny\n---\n", false, `:6: permissions: unknown tool "bsh"`},
		{"permission key", "---\nname: x\ndescription: d\npermissions: {tool: {bash: deny}}\n---\n", false, ":4: permissions: want {default: allow|ask|deny, tools: {NAME: allow|ask|deny}}: unknown field \"tool\""},
		{"permission mode", "---\nname: x\ndescription: d\npermissionMode: yolo\n---\n", false, `:4: permissionMode: want default or plan, got "yolo"`},
		{"hook event", "---\nname: x\ndescription: d\nhooks:\n  Notification:\n    - hooks: [{command: x}]\n---\n", false, ":5: hooks: Notification: unknown hook event"},
		{"hook command", "---\nname: x\ndescription: d\nhooks:\n  PreToolUse:\n    - matcher: bash\n      hooks:\n        - type: command\n---\n", false, ":8: hooks: PreToolUse[0].hooks[0].command: is required"},
		{"hook matcher", "---\nname: x\ndescription: d\nhooks:\n  PreToolUse:\n    - matcher: \"(\"\n      hooks: [{command: x}]\n---\n", false, ":6: hooks: PreToolUse[0].matcher: bad regular expression"},
		{"capability", "---\nname: x\ndescription: d\nprovider: claude-code\ntools: Read\n---\n", false, `:5: tools: provider "claude-code" does not support the toolFilter capability`},
		{"capability of a mode", "---\nname: x\ndescription: d\nprovider: isolated\npermissionMode: plan\n---\n", false, `:5: permissionMode: provider "isolated" does not support the policy capability`},
		{"capability of hooks", "---\nname: x\ndescription: d\nprovider: claude-code\nhooks:\n  PreToolUse: [{hooks: [{command: x}]}]\n---\n", false, `:5: hooks: provider "claude-code" does not support the policy capability`},
		{"capability of a schema", "---\nname: x\ndescription: d\nprovider: isolated\noutputSchema: {type: object}\n---\n", false, `:5: outputSchema: provider "isolated" does not support the outputSchema capability`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := write(t, map[string]string{"def.md": tt.text, "good.md": "---\nname: good\ndescription: d\n---\n"})
			c, warns, err := agentdef.Load(options(agentdef.Dir{Path: dir, Scope: "project", Claude: tt.claude}))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := c.Get("x"); ok {
				t.Error("the bad file loaded")
			}
			if _, ok := c.Get("good"); !ok {
				t.Error("the good file of the folder did not load")
			}
			prefix := "agent definition " + filepath.Join(dir, "def.md") + tt.want
			if !slices.ContainsFunc(warns, func(w string) bool { return strings.HasPrefix(w, prefix) }) {
				t.Errorf("warnings\n %s\nwant one starting\n %s", strings.Join(warns, "\n "), prefix)
			}
		})
	}
}

// Of two files of one folder with the same name, the first in path order
// is used, and a warning says which.
func TestDuplicateNamesInOneFolder(t *testing.T) {
	dir := write(t, map[string]string{"a.md": "---\nname: x\ndescription: a\n---\n", "b.md": "---\nname: x\ndescription: b\n---\n"})
	c, warns := load(t, agentdef.Dir{Path: dir, Scope: "project"})
	want := "agent definition " + filepath.Join(dir, "b.md") + `:2: name: "x" is also the name of ` + filepath.Join(dir, "a.md") + ", which is used; this file is left out"
	if x, ok := c.Get("x"); !ok || x.Description != "a" || !slices.Equal(warns, []string{want}) {
		t.Fatalf("x = %+v, warnings %q\nwant %s", x, warns, want)
	}
}

func TestHugeFileIsLeftOut(t *testing.T) {
	dir := write(t, map[string]string{"big.md": "---\nname: x\ndescription: d\n---\n" + strings.Repeat("x", 2<<20)})
	c, warns := load(t, agentdef.Dir{Path: dir, Scope: "project"})
	if _, ok := c.Get("x"); ok || len(warns) != 1 || !strings.Contains(warns[0], "larger than") {
		t.Fatalf("warnings %q", warns)
	}
}

// The tool description's list is compact: one line per type, long
// descriptions cut.
func TestDescribeIsBounded(t *testing.T) {
	dir := write(t, map[string]string{"a.md": "---\nname: long\ndescription: |\n  " + strings.Repeat("é word ", 200) + "\n---\n"})
	c, _ := load(t, agentdef.Dir{Path: dir, Scope: "project"})
	for _, line := range strings.Split(c.Describe(), "\n")[1:] {
		if len(line) > 320 {
			t.Errorf("line of %d bytes: %q", len(line), line)
		}
	}
}
