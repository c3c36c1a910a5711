package agentdef_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
)

// The corpus (testdata/corpus, written for this test) holds every
// front-matter form Claude Code's documentation describes and every cause
// for which dsh once refused a file Claude Code loads. Loaded as one
// project, each good file loads as Claude Code reads it, each bad one is
// left out with a warning naming it, and nothing stops the others.
func TestCorpus(t *testing.T) {
	project := filepath.Join("testdata", "corpus")
	claude := filepath.Join(project, ".claude", "agents")
	dshDir := filepath.Join(project, ".dsh", "agents")
	opts := agentdef.Options{
		Dirs: agentdef.Dirs(project, "", ""),
		Tools: []string{"bash", "edit_file", "glob", "grep", "list_agents", "read_file", "send_message", "subagent",
			"task_kill", "task_list", "task_output", "write_file"},
		MCPServers:  []string{"memory"},
		Routes:      []string{"deepseek", "sonnet"},
		RouteModels: map[string]string{"deepseek": "deepseek-v4-pro", "sonnet": "mock-sonnet"},
		Providers:   map[string]subagent.Capabilities{"spawn": inproc},
	}
	c, warns, err := agentdef.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	all := []string(nil) // every tool
	for _, tc := range []struct {
		name, desc string
		tools      []string
		model      string
	}{
		{name: "colon-desc", desc: "Use for release notes. Triggers on: changelog, release, notes", tools: []string{"read_file", "grep"}},
		{name: "examples-desc", desc: `Use this agent to review a migration. Examples: <example>Context: the user changed a schema. user: "check my migration" assistant: "I will use the examples-desc agent" </example>`, tools: all},
		{name: "fence-spaces", desc: "The fence lines end in spaces.", tools: all},
		{name: "Code Reviewer", desc: "A name with a space.", tools: all},
		{name: "twin", desc: "The first twin, by path.", tools: all},
		{name: "team-lead", desc: "Lives in a subfolder.", tools: []string{"task_list", "task_output", "task_kill", "send_message", "list_agents", "read_file"}},
		{name: "everything", desc: "All tools.", tools: all},
		{name: "dispatcher", desc: "Spawns workers.", tools: []string{"subagent", "read_file"}},
		{name: "git-editor", desc: "Edits and commits.", tools: []string{"edit_file", "bash"}},
		{name: "memory-user", desc: "Reads the knowledge graph.", tools: []string{"read_file", "mcp__memory__read_graph", "mcp__memory__*"}},
		{name: "m-fable", desc: "d", tools: all},
		{name: "m-sonnet-1m", desc: "d", tools: all, model: "sonnet"},
		{name: "m-opus-1m", desc: "d", tools: all},
		{name: "m-default", desc: "d", tools: all},
		{name: "m-upper", desc: "d", tools: all, model: "sonnet"},
		{name: "m-gpt", desc: "d", tools: all},
		{name: "m-id-of-a-route", desc: "d", tools: all, model: "deepseek"},
		{name: "m-haiku", desc: "d", tools: all},
		{name: "m-haiku-2", desc: "d", tools: all},
		{name: "m-id", desc: "d", tools: all},
		{name: "crlf-list", desc: "A block scalar\nover two lines.", tools: []string{"read_file", "glob"}},
		{name: "other-hooks", desc: "Hooks of other types.", tools: all},
		{name: "dsh-colon", desc: "Use for X. Triggers on: a, b", tools: []string{"read_file"}},
	} {
		d, ok := c.Get(tc.name)
		if !ok {
			t.Errorf("%s did not load", tc.name)
			continue
		}
		if d.Description != tc.desc || !slices.Equal(d.Tools, tc.tools) || (d.Tools == nil) != (tc.tools == nil) || d.Model != tc.model {
			t.Errorf("%s: description %q, tools %#v, model %q; want %q, %#v, %q", tc.name, d.Description, d.Tools, d.Model, tc.desc, tc.tools, tc.model)
		}
	}
	if d, _ := c.Get("fence-spaces"); d != nil && d.Instructions != "Body after a spaced fence." {
		t.Errorf("fence-spaces' body %q", d.Instructions)
	}
	if d, _ := c.Get("crlf-list"); d != nil && (d.MaxSteps != 7 || d.Policy == nil || d.Policy.Decide("bash") != permission.Deny) {
		t.Errorf("crlf-list %+v", d)
	}
	if d, _ := c.Get("no-rm"); d == nil || d.Tools != nil || !slices.Equal(d.DisallowedTools, []string{"bash", "write_file"}) {
		t.Errorf("no-rm %+v", d)
	}
	if d, _ := c.Get("other-hooks"); d != nil && !d.Hooks.Has(hook.PreToolUse) {
		t.Error("other-hooks lost its command hook")
	}
	for _, gone := range []string{"leading-blank", "unindented", "no-description", "dsh-provider", "dsh-steps"} {
		if _, ok := c.Get(gone); ok {
			t.Errorf("%s loaded", gone)
		}
	}

	// One warning per problem, each naming its file and line.
	want := []string{
		claude + "/dispatcher.md:4: tools: Agent(worker, researcher): dsh cannot narrow subagent to (worker, researcher); the child gets all of it",
		claude + "/git-editor.md:4: tools: Bash(git:*): dsh's permissions are per tool, not per command; the child gets bash without the limit (git:*)",
		claude + "/leading-blank.md:1: no front matter",
		claude + `/memory-user.md:4: tools: mcp__absent__lookup: no MCP server "absent" is configured; left out`,
		claude + "/no-description.md:1: description: is required",
		claude + "/no-rm.md:4: disallowedTools: Bash(rm:*): dsh hides tools whole, not per argument; all of bash is hidden",
		claude + "/not-a-map.md:2: the front matter must be a mapping",
		claude + "/other-hooks.md:6: hooks: dsh runs only command hooks; a http hook is ignored",
		claude + "/other-hooks.md:6: hooks: dsh runs only command hooks; a prompt hook is ignored",
		claude + "/team/team-lead.md:4: tools: TaskCreate is a Claude Code tool dsh does not have; left out",
		claude + "/team/team-lead.md:4: tools: TeamCreate is a Claude Code tool dsh does not have",
		claude + "/team/team-lead.md:4: tools: Workflow is a Claude Code tool dsh does not have",
		claude + "/team/team-lead.md:4: tools: Monitor is a Claude Code tool dsh does not have",
		claude + "/team/team-lead.md:4: tools: WebFetch is a Claude Code tool dsh does not have",
		claude + "/team/team-lead.md:4: tools: WebSearch is a Claude Code tool dsh does not have",
		claude + "/team/team-lead.md:4: tools: NotebookEdit is a Claude Code tool dsh does not have",
		claude + "/team/team-lead.md:4: tools: TodoWrite is a Claude Code tool dsh does not have",
		claude + `/twin-b.md:2: name: "twin" is also the name of ` + claude + "/twin-a.md, which is used; this file is left out",
		claude + "/unindented.md:3: mapping value is not allowed",
		dshDir + "/dsh-colon.md:4: tools: WebFetch is a Claude Code tool dsh does not have; left out",
		dshDir + `/dsh-colon.md:4: tools: unknown tool "grpe" (did you mean "grep"?); left out`,
		dshDir + `/dsh-colon.md:5: unknwon: unknown field; ignored`,
		dshDir + `/dsh-provider.md:4: provider: "nope" is not a registered subagent provider`,
		dshDir + "/dsh-steps.md:4: maxSteps: want an integer, got two",
	}
	for _, w := range want {
		if !slices.ContainsFunc(warns, func(got string) bool { return strings.HasPrefix(got, "agent definition "+w) }) {
			t.Errorf("no warning starting %q", w)
		}
	}
	models := []string{}
	for _, w := range warns {
		if strings.HasPrefix(w, "agent definitions: model") {
			models = append(models, w)
		}
		if strings.Contains(w, "m-") && strings.Contains(w, "model") {
			t.Errorf("a per-file model warning: %s", w)
		}
	}
	wantModels := `agent definitions: models "HAIKU" (2 files), "claude-sonnet-4-20250514" (1 file), "fable" (1 file), "gpt-5" (1 file), "opus[1m]" (1 file): not a configured model route (routes: deepseek, sonnet); those agents use their parent's route`
	if !slices.Equal(models, []string{wantModels}) {
		t.Errorf("model warnings %q\nwant %q", models, wantModels)
	}
	if t.Failed() {
		t.Logf("warnings:\n%s", strings.Join(warns, "\n"))
	}
}
