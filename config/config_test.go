package config_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/codex"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestDefaults(t *testing.T) {
	cfg, err := config.Load("", env(map[string]string{"DSH_HOME": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Provider != "deepseek" || cfg.Agent.Model != "deepseek-flash" || len(cfg.Models) != 5 || cfg.Models[0].APIKeyEnv != "DEEPSEEK_API_KEY" {
		t.Fatalf("defaults %+v", cfg)
	}
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	if got := rt.Subagents.Names(); !slices.Equal(got, []string{"spawn", "fork"}) {
		t.Fatalf("providers %v", got)
	}
	for _, name := range []string{"subagent", "subagent_fork", "task_list", "task_output", "task_kill", "bash", "read_file"} {
		if !slices.Contains(rt.Tools.Names(), name) {
			t.Errorf("default composition lacks tool %s (has %v)", name, rt.Tools.Names())
		}
	}
}

func TestFileOverDefaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dsh.yaml")
	os.WriteFile(path, []byte(`
agent:
  provider: local
models:
  - name: local
    baseURL: http://127.0.0.1:8080/v1
    apiKeyEnv: LOCAL_KEY
    model: qwen
persona: "Be brief."
subagents:
  providers:
    - name: spawn
    - name: child
      kind: fork
    - name: cx
      kind: codex
      codex: {model: gpt-test, permissionMode: never, readyTimeout: 7s}
    - name: cc
      kind: claude-code
      claudeCode: {permission: deny}
    - name: peer
      kind: acp
      acp: {command: /bin/true, termGrace: 1500ms}
  tools:
    - provider: spawn
      maxDepth: 1
      toolFilter: {deny: [bash]}
    - provider: child
      toolName: subagent_fork
      enableRunInBackground: false
`), 0o644)
	cfg, err := config.Load("", env(map[string]string{"DSH_CONFIG": path}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Provider != "local" || cfg.Agent.Model != "qwen" || len(cfg.Models) != 5 || cfg.Persona != "Be brief." {
		t.Fatalf("cfg %+v", cfg)
	}
	ps := cfg.Subagents.Providers
	cx, _ := ps[2].Block().(*codex.Config)
	peer, _ := ps[4].Block().(*acpchild.Config)
	if cx == nil || peer == nil || cx.ReadyTimeout != 7*time.Second || peer.TermGrace != 1500*time.Millisecond {
		t.Fatalf("provider blocks: codex %+v, acp %+v", cx, peer)
	}
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	if got := rt.Subagents.Names(); !slices.Equal(got, []string{"spawn", "child", "cx", "cc", "peer"}) {
		t.Fatalf("providers %v", got)
	}
	if p, _ := rt.Subagents.Provider("child"); !p.InheritsParentContext() {
		t.Fatal("provider child should be a fork")
	}
}

// Every invalid key or value is an error naming the key and its line.
func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "agent:\n  provder: x\n", []string{"provder", "[2:"}},
		{"unknown top-level key", "modles: []\n", []string{"modles", "[1:"}},
		{"wrong type", "tools:\n  outputLimit: lots\n", []string{"outputLimit", "line 2"}},
		{"unknown route", "agent:\n  provider: nowhere\n", []string{"line 2", "agent.provider", "nowhere"}},
		{"negative maxDepth", "subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: spawn\n      maxDepth: -2\n",
			[]string{"line 5", "maxDepth", "-2"}},
		{"tool without provider", "subagents:\n  providers: [{name: spawn}]\n  tools:\n    - toolName: helper\n",
			[]string{"line 4", "tools[0].provider: is required"}},
		{"tool on undeclared provider", "subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: acp\n",
			[]string{"line 4", "provider", `"acp"`}},
		{"duplicate tool name", "subagents:\n  providers: [{name: spawn}, {name: fork}]\n  tools:\n    - provider: spawn\n    - provider: fork\n",
			[]string{"line 5", `"subagent" is used twice`}},
		{"unknown provider kind", "subagents:\n  providers:\n    - name: x\n      kind: teleport\n", []string{"line 3", "teleport"}},
		{"acp without command", "subagents:\n  providers:\n    - name: x\n      kind: acp\n", []string{"line 3", "acp.command: is required"}},
		{"block of another kind", "subagents:\n  providers:\n    - name: spawn\n      codex: {model: m}\n", []string{"line 3", "codex block"}},
		{"unknown key in a provider block", "subagents:\n  providers:\n    - name: c\n      kind: codex\n      codex: {modle: m}\n", []string{"modle"}},
		{"bad thinking", "models:\n  - name: deepseek\n    baseURL: http://h\n    apiKeyEnv: K\n    thinking: on\n", []string{"line 5", "thinking", "enabled or disabled"}},
		{"bad reasoning effort", "models:\n  - name: deepseek\n    baseURL: http://h\n    apiKeyEnv: K\n    reasoningEffort: huge\n", []string{"line 5", "reasoningEffort", "low, high or max"}},
		{"empty tool filter", "subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: spawn\n      toolFilter: {}\n",
			[]string{"line 5", "toolFilter", "allow or deny"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("dsh.yaml", []byte(tc.yaml), env(nil))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestExplicitMissingFileIsAnError(t *testing.T) {
	if _, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"), env(nil)); err == nil {
		t.Fatal("a missing explicit config file was ignored")
	}
}

// TestConfigErrorMessages pins the exact message of every class of
// configuration error a person can act on: file, line, key, what was
// wanted and what was found.
func TestConfigErrorMessages(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"integer", "subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: spawn\n      maxDepth: two\n",
			`config dsh.yaml: line 5: subagents.tools[0].maxDepth: want an integer, got "two"`},
		{"duration as a number", "models:\n  - name: x\n    baseURL: http://h\n    idleTimeout: 30\n",
			`config dsh.yaml: line 4: models[0].idleTimeout: want a duration such as 30s or 2m, got "30"`},
		{"duration in a provider block", "subagents:\n  providers:\n    - name: c\n      kind: codex\n      codex: {readyTimeout: soon}\n",
			`config dsh.yaml: line 5: subagents.providers[0].codex.readyTimeout: want a duration such as 30s or 2m, got "soon"`},
		{"boolean", "subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: spawn\n      enableRunInBackground: sometimes\n",
			`config dsh.yaml: line 5: subagents.tools[0].enableRunInBackground: want true or false, got "sometimes"`},
		{"list for a number", "tasks:\n  maxPerOwner: [1]\n", `config dsh.yaml: line 2: tasks.maxPerOwner: want an integer, got a list`},
		{"value in a provider block", "subagents:\n  providers:\n    - name: c\n      kind: codex\n      codex:\n        permissionMode: sometimes\n",
			`config dsh.yaml: line 6: subagents.providers[0].codex.permissionMode: must be "policy", "never", "approve-for-me" or "dangerously-bypass-approvals-and-sandbox", got "sometimes"`},
		{"acp permission", "subagents:\n  providers:\n    - name: a\n      kind: acp\n      acp: {command: x, permission: allow}\n",
			`config dsh.yaml: line 5: subagents.providers[0].acp.permission: must be "policy" (the parent's permission policy decides) or "reject", got "allow"`},
		{"unknown tool in a filter", "subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: spawn\n      toolFilter: {deny: [bsh]}\n",
			`config dsh.yaml: line 5: subagents.tools[0].toolFilter.deny[0]: unknown tool "bsh" (did you mean "bash"?); known tools: bash, edit_file, glob, grep, interrupt_agent, list_agents, list_mcp_resources, read_file, read_mcp_resource, report, send_message, subagent, task_kill, task_list, task_output, write_file`},
		{"unknown tool in the policy", "permissions:\n  tools:\n    write_fle: ask\n",
			`config dsh.yaml: line 3: permissions.tools.write_fle: unknown tool "write_fle" (did you mean "write_file"?); known tools: bash, edit_file, glob, grep, interrupt_agent, list_agents, list_mcp_resources, read_file, read_mcp_resource, report, send_message, subagent, subagent_fork, task_kill, task_list, task_output, write_file`},
		{"bad decision", "permissions:\n  tools: {bash: maybe}\n", `config dsh.yaml: line 2: permissions.tools.bash: want allow, ask or deny, got "maybe"`},
		{"negative budget", "budget: {tokens: -1}\n", `config dsh.yaml: line 1: budget.tokens: must be between 1 and 1000000000 (0 or unset: the default, 10000000), got -1`},
		{"hook matcher", "hooks:\n  PreToolUse:\n    - matcher: \"(\"\n      hooks: [{command: x}]\n",
			`config dsh.yaml: line 3: hooks.PreToolUse[0].matcher: bad regular expression "(": error parsing regexp: missing closing ): ` + "`(`"},
		{"hook event", "hooks:\n  BeforeTool: [{hooks: [{command: x}]}]\n",
			`config dsh.yaml: line 2: hooks.BeforeTool: unknown hook event (want one of PreToolUse, PostToolUse, SubagentStart, SubagentStop, Stop, SessionStart, SessionEnd, UserPromptSubmit, Notification, PreCompact, or another of Claude Code's events)`},
		{"hook timeout", "hooks:\n  Stop: [{hooks: [{command: x, timeout: soon}]}]\n",
			`config dsh.yaml: line 2: hooks.Stop[0].hooks[0].timeout: want a number, got "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("dsh.yaml", []byte(tc.yaml), env(nil))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n %v\nwant\n %s", err, tc.want)
			}
		})
	}
}

// A keyless route (Ollama, llama.cpp) is valid; a provider bound to no
// tool is a warning, not an error.
func TestKeylessRouteAndUnboundProvider(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte(`agent: {route: local}
models:
  - {name: local, baseURL: "http://127.0.0.1:11434/v1", model: qwen3}
subagents:
  providers: [{name: spawn}, {name: cx, kind: codex}]
  tools: [{provider: spawn}]
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`subagent provider "cx" is bound to no tool, so no model can use it: add {provider: cx} under subagents.tools`}
	if !slices.Equal(cfg.Warnings(), want) {
		t.Errorf("warnings %q, want %q", cfg.Warnings(), want)
	}
}
