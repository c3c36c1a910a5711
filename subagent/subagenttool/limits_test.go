package subagenttool_test

import (
	"context"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/builtin"
)

// typedTool mounts cfg (named "typed") offering the built-in types and
// those of defs (file name → content), and returns a parent agent with
// options opts (the test route when unset).
func (e *env) typedTool(cfg subagenttool.Config, opts agent.Options, defs map[string]string) *agent.Agent {
	t := e.t
	t.Helper()
	if _, err := builtin.Register(e.rt.Tools, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range defs {
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
	}
	aopts := agentdef.Options{Dirs: []agentdef.Dir{{Path: dir, Scope: "project"}}, Routes: []string{"test"},
		Tools: append(e.rt.Tools.Names(), "typed"), Providers: map[string]subagent.Capabilities{}}
	for _, n := range e.rt.Subagents.Names() {
		p, _ := e.rt.Subagents.Provider(n)
		aopts.Providers[n] = p.Capabilities()
	}
	catalog, _, err := agentdef.Load(aopts)
	if err != nil {
		t.Fatal(err)
	}
	deps := e.deps()
	deps.Types = catalog
	on := true
	cfg.ToolName, cfg.SubagentTypes = "typed", &on
	if _, err := subagenttool.Mount(deps, cfg); err != nil {
		t.Fatal(err)
	}
	opts.Provider = "test"
	a, err := e.rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// toolsSeen records the tools each child request offered, by the child's
// task.
type toolsSeen struct {
	mu     sync.Mutex
	byTask map[string][]string
}

func (s *toolsSeen) record(req *llm.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTask == nil {
		s.byTask = map[string][]string{}
	}
	s.byTask[lastPrompt(req)] = toolNames(req)
}

func (s *toolsSeen) of(task string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byTask[task]
}

// N6: a definition that names another provider keeps the tool instance's
// toolFilter: bash, hidden by the tool, stays hidden in the moved child.
func TestProviderMoveKeepsTheToolFilter(t *testing.T) {
	var seen toolsSeen
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		seen.record(req)
		return echoChild(ctx, req)
	}
	e := newEnv(t, child, scripted.ToolCalls("", call("typed", `{"description":"m","prompt":"moved task","subagent_type":"moved"}`)),
		scripted.Text("ok"))
	a := e.typedTool(subagenttool.Config{Provider: "spawn", ToolFilter: &tool.Restriction{Deny: []string{"bash"}}}, agent.Options{},
		map[string]string{"moved.md": "---\nname: moved\ndescription: d\nprovider: fork\n---\n"})
	rs := runOn(t, a, "go")
	if len(rs) != 1 || rs[0].Error != nil {
		t.Fatalf("results %+v", rs)
	}
	if got := seen.of("moved task"); len(got) == 0 || slices.Contains(got, "bash") {
		t.Fatalf("the moved child is offered %v", got)
	}
}

// A definition that moves to a provider that cannot filter tools is
// refused when the tool has a filter, rather than dropping the filter.
func TestProviderMoveToAProviderThatCannotFilterIsRefused(t *testing.T) {
	e := newEnv(t, echoChild, scripted.ToolCalls("", call("typed", `{"description":"m","prompt":"p","subagent_type":"bare"}`)),
		scripted.Text("ok"))
	if _, err := e.rt.Subagents.Register(bareProvider{}); err != nil {
		t.Fatal(err)
	}
	a := e.typedTool(subagenttool.Config{Provider: "spawn", ToolFilter: &tool.Restriction{Deny: []string{"bash"}}}, agent.Options{},
		map[string]string{"bare.md": "---\nname: bare\ndescription: d\nprovider: bare\n---\n"})
	rs := runOn(t, a, "go")
	if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != string(subagent.CodeUnsupportedCapability) ||
		!strings.Contains(resultText(rs[0]), "cannot restrict a child's tools") {
		t.Fatalf("results %+v %q", rs, resultText(rs[0]))
	}
}

// N6: a child whose definition hides bash cannot give it back to a
// grandchild: every child inherits the view of the agent that starts it.
func TestGrandchildKeepsTheChildsView(t *testing.T) {
	for _, def := range []string{"tools: read_file, grep, typed", "disallowedTools: bash"} {
		t.Run(def, func(t *testing.T) {
			var seen toolsSeen
			child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
				seen.record(req)
				last := req.Messages[len(req.Messages)-1]
				if lastPrompt(req) == "delegate" && last.Source.Kind == content.SourceUser {
					return scripted.New(scripted.ToolCalls("", call("typed", `{"description":"g","prompt":"deeper"}`))).Stream(ctx, req)
				}
				return echoChild(ctx, req)
			}
			e := newEnv(t, child, scripted.ToolCalls("", call("typed", `{"description":"r","prompt":"delegate","subagent_type":"reader"}`)),
				scripted.Text("ok"))
			a := e.typedTool(subagenttool.Config{Provider: "spawn"}, agent.Options{},
				map[string]string{"reader.md": "---\nname: reader\ndescription: d\n" + def + "\n---\n"})
			rs := runOn(t, a, "go")
			if len(rs) != 1 || rs[0].Error != nil {
				t.Fatalf("results %+v", rs)
			}
			if got := seen.of("delegate"); slices.Contains(got, "bash") || !slices.Contains(got, "typed") {
				t.Fatalf("the reader is offered %v", got)
			}
			if got := seen.of("deeper"); len(got) == 0 || slices.Contains(got, "bash") {
				t.Fatalf("the grandchild is offered %v", got)
			}
		})
	}
}

// N15: a definition's maxSteps cannot raise its child's step cap above
// the parent's.
func TestDefinitionMaxStepsIsClampedToTheParents(t *testing.T) {
	var calls atomic.Int32
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		if calls.Add(1) > 10 { // past any cap the test allows: stop, and fail below
			return scripted.New(scripted.Text("gave up")).Stream(ctx, req)
		}
		return scripted.New(scripted.ToolCalls("", call("glob", `{"pattern":"*.none"}`))).Stream(ctx, req)
	}
	e := newEnv(t, child, scripted.ToolCalls("", call("typed", `{"description":"l","prompt":"loop","subagent_type":"long"}`)),
		scripted.Text("ok"))
	a := e.typedTool(subagenttool.Config{Provider: "spawn"}, agent.Options{MaxSteps: 3},
		map[string]string{"long.md": "---\nname: long\ndescription: d\nmaxSteps: 1000000\n---\n"})
	rs := runOn(t, a, "go")
	if len(rs) != 1 || rs[0].Error == nil {
		t.Fatalf("results %+v", rs)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("the child made %d model calls under a parent capped at 3 steps", n)
	}
}

// N7: one turn may start only so many children (subagents.
// maxChildrenPerTurn); the next turn may start as many again.
func TestChildrenPerTurnCap(t *testing.T) {
	fg := func(d string) scripted.Call {
		return call("subagent", `{"description":"`+d+`","prompt":"p"}`)
	}
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", fg("a"), fg("b")), scripted.ToolCalls("", fg("c")), scripted.Text("one"),
		scripted.ToolCalls("", fg("d"), fg("e")), scripted.Text("two"))
	e.rt.Subagents.LimitChildrenPerTurn(2)
	e.run("one")
	rs := results(e.agent)
	if len(rs) != 3 || rs[0].Error != nil || rs[1].Error != nil {
		t.Fatalf("results %+v", rs)
	}
	if rs[2].Error == nil || rs[2].Error.Code != string(subagent.CodeLimitReached) ||
		!strings.Contains(resultText(rs[2]), "subagents.maxChildrenPerTurn") {
		t.Fatalf("the third start of a turn capped at 2: %+v %q", rs[2], resultText(rs[2]))
	}
	e.run("two")
	for _, r := range results(e.agent)[3:] {
		if r.Error != nil {
			t.Fatalf("a start of the next turn was refused: %q", resultText(r))
		}
	}
}
