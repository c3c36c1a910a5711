package subagenttool_test

import (
	"context"
	"encoding/json"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/tool/builtin"
	"github.com/dsh-go/dsh/worktree"
)

// typed mounts "subagent_typed" on spawn, offering the built-in types and
// those of defs (file name → content), with worktrees under a temporary
// root; it returns a parent agent working in cwd.
func (e *env) typed(cwd string, defs map[string]string) *agent.Agent {
	t := e.t
	t.Helper()
	if _, err := builtin.Register(e.rt.Tools, builtin.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range defs {
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
	}
	opts := agentdef.Options{Dirs: []agentdef.Dir{{Path: dir, Scope: "project"}}, Routes: []string{"test"},
		Tools: append(e.rt.Tools.Names(), "subagent_typed"), Providers: map[string]subagent.Capabilities{}}
	for _, n := range e.rt.Subagents.Names() {
		p, _ := e.rt.Subagents.Provider(n)
		opts.Providers[n] = p.Capabilities()
	}
	catalog, _, err := agentdef.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	wts, err := worktree.New(t.TempDir(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	deps := e.deps()
	deps.Types, deps.Worktrees = catalog, wts
	on := true
	if _, err := subagenttool.Mount(deps, subagenttool.Config{Provider: "spawn", ToolName: "subagent_typed", SubagentTypes: &on}); err != nil {
		t.Fatal(err)
	}
	a, err := e.rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func runOn(t *testing.T, a *agent.Agent, text string) []session.ToolResult {
	t.Helper()
	end, err := a.Run(context.Background(), content.UserText(text))
	if err != nil || end.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn: %+v %v", end, err)
	}
	return results(a)
}

func toolNames(req *llm.Request) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

// subagent_type explore: the child is told the type's instructions and
// sees only the type's tools.
func TestExploreType(t *testing.T) {
	var mu sync.Mutex
	var seen *llm.Request
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		mu.Lock()
		seen = req
		mu.Unlock()
		return echoChild(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"find it","prompt":"where is main?","subagent_type":"explore"}`)),
		scripted.Text("done"))
	a := e.typed(t.TempDir(), nil)
	rs := runOn(t, a, "go")
	if len(rs) != 1 || rs[0].Error != nil || resultText(rs[0]) != "child: where is main?" {
		t.Fatalf("results %+v", rs)
	}
	if !strings.Contains(seen.System, "You explore a codebase to answer a question, and change nothing.") {
		t.Errorf("the child's system prompt lacks the type's instructions:\n%s", seen.System)
	}
	if got := toolNames(seen); !slices.Equal(got, []string{"glob", "grep", "read_file"}) {
		t.Errorf("the child sees tools %v", got)
	}
}

// The description lists the types compactly and is the same for the
// parent and a child (the prompt cache keeps it).
func TestTypesInTheDescription(t *testing.T) {
	var mu sync.Mutex
	var childDesc string
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range req.Tools {
			if s.Name == "subagent_typed" {
				childDesc = s.Description
			}
		}
		return echoChild(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"x","prompt":"y","subagent_type":"general"}`)), scripted.Text("ok"))
	a := e.typed(t.TempDir(), map[string]string{"r.md": "---\nname: reviewer\ndescription: Reviews\n  a change.\n---\n"})
	runOn(t, a, "go")
	var desc string
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	for _, s := range a.Tools().Specs() {
		if s.Name == "subagent_typed" {
			desc = s.Description
			json.Unmarshal(s.Parameters, &schema)
		}
	}
	if !strings.Contains(desc, "the types are:\n- explore: Read-only codebase explorer") || !strings.HasSuffix(desc, "\n- reviewer: Reviews a change.") {
		t.Errorf("description %q", desc)
	}
	if desc != childDesc {
		t.Errorf("the child's description differs:\n%q\n%q", desc, childDesc)
	}
	if schema.Properties["subagent_type"] == nil || schema.Properties["isolation"] == nil {
		t.Errorf("schema %v", schema.Properties)
	}
}

func TestUnknownTypeListsTheValidOnes(t *testing.T) {
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"x","prompt":"y","subagent_type":"explorer"}`)), scripted.Text("ok"))
	a := e.typed(t.TempDir(), nil)
	rs := runOn(t, a, "go")
	if len(rs) != 1 || rs[0].Error == nil || resultText(rs[0]) != `Error: unknown subagent_type "explorer"; the types are: explore, general` {
		t.Fatalf("result %q", resultText(rs[0]))
	}
	if n := len(e.rt.Agents.List()); n != 2 {
		t.Fatalf("%d agents: a child was started", n)
	}
}

// A type with a schema returns its structured result; a type on another
// provider runs there; SubagentStart and SubagentStop hooks see both.
func TestTypeSchemaProviderAndHooks(t *testing.T) {
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		if slices.Contains(toolNames(req), "structured_output") {
			return scripted.New(scripted.ToolCalls("", call("structured_output", `{"verdict":"ship it"}`))).Stream(ctx, req)
		}
		return echoChild(ctx, req)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "hooks.jsonl")
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"judge","prompt":"judge it","subagent_type":"judge"}`),
			call("subagent_typed", `{"description":"recap","prompt":"recap","subagent_type":"recap"}`)),
		scripted.Text("ok"))
	a := e.typed(dir, map[string]string{
		"judge.md": "---\nname: judge\ndescription: d\noutputSchema:\n  type: object\n  properties: {verdict: {type: string}}\n  required: [verdict]\n" +
			"hooks:\n  SubagentStart: [{hooks: [{command: 'cat >> " + log + "; echo >> " + log + "'}]}]\n" +
			"  Stop: [{hooks: [{command: 'cat >> " + log + "; echo >> " + log + "'}]}]\n---\nJudge.\n",
		"recap.md": "---\nname: recap\ndescription: d\nprovider: fork\n---\n",
	})
	var mu sync.Mutex
	var providers []string
	defer event.On(e.rt.Events, func(ev subagent.Started) {
		mu.Lock()
		defer mu.Unlock()
		providers = append(providers, ev.Provider)
		slices.Sort(providers)
	})()
	rs := runOn(t, a, "go")
	if len(rs) != 2 || resultText(rs[0]) != `{"verdict":"ship it"}` || resultText(rs[1]) != "child: recap" {
		t.Fatalf("results %q %q", resultText(rs[0]), resultText(rs[1]))
	}
	raw, _ := os.ReadFile(log)
	var events []hook.Input
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var in hook.Input
		json.Unmarshal([]byte(line), &in)
		events = append(events, in)
	}
	if len(events) != 2 || events[0].Event != hook.SubagentStart || events[0].AgentType != "judge" || events[0].Provider != "spawn" ||
		events[0].Prompt != "judge it" || events[1].Event != hook.SubagentStop || events[1].StopReason != "completed" {
		t.Fatalf("hook events %+v", events)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(providers, []string{"fork", "spawn"}) {
		t.Fatalf("children ran on %v, want fork (recap) and spawn (judge)", providers)
	}
}

// A SubagentStart hook that exits 2 refuses the delegation.
func TestSubagentStartHookBlocks(t *testing.T) {
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"x","prompt":"y","subagent_type":"guarded"}`)), scripted.Text("ok"))
	a := e.typed(t.TempDir(), map[string]string{"g.md": "---\nname: guarded\ndescription: d\nhooks:\n  SubagentStart:\n" +
		"    - matcher: guarded\n      hooks: [{command: 'echo not today >&2; exit 2'}]\n---\n"})
	rs := runOn(t, a, "go")
	if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != hook.CodeBlocked || !strings.Contains(resultText(rs[0]), "not today") {
		t.Fatalf("result %+v %q", rs, resultText(rs[0]))
	}
	if n := len(e.rt.Agents.List()); n != 2 {
		t.Fatalf("%d agents: the child started", n)
	}
}

// A type's hooks and permission rules apply inside its child: its bash is
// blocked by the type's hook, its write_file by permissionMode plan.
func TestTypeHooksAndPolicyApplyInTheChild(t *testing.T) {
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		var toolResults []string
		for _, m := range req.Messages {
			if m.Source.Kind == content.SourceTool {
				toolResults = append(toolResults, content.JoinText(m.Content[0].Content))
			}
		}
		if len(toolResults) == 0 {
			return scripted.New(scripted.ToolCalls("", call("bash", `{"command":"touch bash-ran"}`),
				call("write_file", `{"path":"written.txt","content":"x"}`))).Stream(ctx, req)
		}
		return scripted.New(scripted.Text(strings.Join(toolResults, " | "))).Stream(ctx, req)
	}
	cwd := t.TempDir()
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"x","prompt":"y","subagent_type":"careful"}`)), scripted.Text("ok"))
	a := e.typed(cwd, map[string]string{"c.md": "---\nname: careful\ndescription: d\npermissionMode: plan\nhooks:\n  PreToolUse:\n" +
		"    - matcher: Bash\n      hooks: [{command: 'echo no shell >&2; exit 2'}]\n---\n"})
	rs := runOn(t, a, "go")
	text := resultText(rs[0])
	if !strings.Contains(text, "blocked by a PreToolUse hook") || !strings.Contains(text, "no shell") ||
		!strings.Contains(text, "the permission policy denies write_file by spawn · x") {
		t.Fatalf("the child saw %q", text)
	}
	for _, f := range []string{"bash-ran", "written.txt"} {
		if _, err := os.Stat(filepath.Join(cwd, f)); err == nil {
			t.Errorf("%s exists: a refused call ran", f)
		}
	}
}

// gitRepo makes a repository with one commit.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "--quiet"}, {"commit", "--quiet", "--allow-empty", "-m", "init"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// writer is a child that writes its prompt to result.txt, then answers.
func writer(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	for _, m := range req.Messages {
		if m.Source.Kind == content.SourceTool {
			return scripted.New(scripted.Text("wrote it")).Stream(ctx, req)
		}
	}
	args, _ := json.Marshal(map[string]string{"path": "result.txt", "content": lastPrompt(req)})
	return scripted.New(scripted.ToolCalls("", call("write_file", string(args)))).Stream(ctx, req)
}

// Three children at once with isolation worktree each write result.txt:
// each in its own worktree, the parent's tree untouched, the results name
// the kept worktrees.
func TestParallelChildrenInWorktrees(t *testing.T) {
	repo := gitRepo(t)
	iso := func(n string) scripted.Call {
		return call("subagent_typed", `{"description":"child `+n+`","prompt":"from `+n+`","isolation":"worktree"}`)
	}
	e := newEnv(t, writer, scripted.ToolCalls("", iso("1"), iso("2"), iso("3")), scripted.Text("ok"))
	a := e.typed(repo, nil)
	rs := runOn(t, a, "go")
	if len(rs) != 3 {
		t.Fatalf("results %+v", rs)
	}
	infos, err := worktree.List(t.Context(), repo)
	if err != nil || len(infos) != 3 {
		t.Fatalf("worktrees %+v %v", infos, err)
	}
	seen := map[string]bool{}
	for i, r := range rs {
		text := resultText(r)
		if r.Error != nil || !strings.HasPrefix(text, "wrote it\n[worktree] the changes are kept in the git worktree ") {
			t.Fatalf("result %d: %q", i, text)
		}
		var path string
		for _, in := range infos {
			if strings.Contains(text, in.Path+" on branch "+in.Branch) {
				path = in.Path
			}
		}
		if path == "" || seen[path] {
			t.Fatalf("result %d names no worktree of its own: %q", i, text)
		}
		seen[path] = true
		if b, _ := os.ReadFile(filepath.Join(path, "result.txt")); string(b) != "from "+string(rune('1'+i)) {
			t.Errorf("worktree %s holds %q", path, b)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "result.txt")); err == nil {
		t.Error("a child wrote into the parent's tree")
	}
}

// A child that changed nothing leaves no worktree; a child outside a
// repository is refused with a clear error.
func TestWorktreeRemovedWithoutChangesAndOutsideARepo(t *testing.T) {
	repo := gitRepo(t)
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"x","prompt":"look","isolation":"worktree"}`)), scripted.Text("ok"))
	a := e.typed(repo, nil)
	rs := runOn(t, a, "go")
	if len(rs) != 1 || resultText(rs[0]) != "child: look" {
		t.Fatalf("result %q", resultText(rs[0]))
	}
	if infos, _ := worktree.List(t.Context(), repo); len(infos) != 0 {
		t.Fatalf("worktrees left: %+v", infos)
	}

	plain := t.TempDir()
	e2 := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"x","prompt":"look","isolation":"worktree"}`)), scripted.Text("ok"))
	rs = runOn(t, e2.typed(plain, nil), "go")
	if rs[0].Error == nil || rs[0].Error.Code != worktree.CodeNotARepo || !strings.Contains(resultText(rs[0]), plain+" is not inside one") {
		t.Fatalf("result %+v %q", rs[0].Error, resultText(rs[0]))
	}
}

// A child aborted after it wrote keeps its worktree, and the result says
// where; one aborted before it wrote leaves nothing.
func TestAbortedChildsWorktree(t *testing.T) {
	repo := gitRepo(t)
	wrote := make(chan struct{}, 2)
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		for _, m := range req.Messages {
			if m.Source.Kind == content.SourceTool {
				wrote <- struct{}{}
				return scripted.New(scripted.Hang("")).Stream(ctx, req)
			}
		}
		if lastPrompt(req) == "idle" {
			wrote <- struct{}{}
			return scripted.New(scripted.Hang("")).Stream(ctx, req)
		}
		return writer(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"w","prompt":"write","isolation":"worktree"}`),
			call("subagent_typed", `{"description":"i","prompt":"idle","isolation":"worktree"}`)))
	a := e.typed(repo, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-wrote; <-wrote; cancel() }()
	end, err := a.Run(ctx, content.UserText("go"))
	if err != nil || end.Reason.Kind != session.EndAborted {
		t.Fatalf("end %+v %v", end, err)
	}
	rs := results(a)
	if len(rs) != 2 || !strings.Contains(resultText(rs[0]), "subagent run cancelled") ||
		!strings.Contains(resultText(rs[0]), "[worktree] the changes are kept in the git worktree") ||
		strings.Contains(resultText(rs[1]), "[worktree]") {
		t.Fatalf("results %q | %q", resultText(rs[0]), resultText(rs[1]))
	}
	infos, _ := worktree.List(t.Context(), repo)
	if len(infos) != 1 || infos[0].Stale || infos[0].Owner != 0 || !infos[0].Changed {
		t.Fatalf("worktrees %+v", infos)
	}
}

// A tool offering the types checks those without a provider of their own
// against its provider's capabilities when it mounts.
func TestTypesCheckedAgainstTheToolsProvider(t *testing.T) {
	e := newEnv(t, echoChild)
	if _, err := e.rt.Subagents.Register(bareProvider{}); err != nil {
		t.Fatal(err)
	}
	catalog, _, err := agentdef.Load(agentdef.Options{Tools: []string{"read_file", "grep", "glob"}})
	if err != nil {
		t.Fatal(err)
	}
	deps := e.deps()
	deps.Types = catalog
	on := true
	_, err = subagenttool.Mount(deps, subagenttool.Config{Provider: "bare", ToolName: "subagent_bare", SubagentTypes: &on})
	want := `subagent tool subagent_bare: agent definition explore (built-in): tools: provider "bare" does not support the toolFilter capability`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	off := false
	if _, err := subagenttool.Mount(deps, subagenttool.Config{Provider: "bare", ToolName: "subagent_bare", SubagentTypes: &off}); err != nil {
		t.Fatalf("without types: %v", err)
	}
}

// A background child in a worktree: its task's output names the kept
// worktree; a type's background default starts it as a task.
func TestBackgroundChildInAWorktree(t *testing.T) {
	repo := gitRepo(t)
	release := make(chan struct{})
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		<-release // after the parent's first turn, so that the notice opens a turn of its own
		return writer(ctx, req)
	}
	e := newEnv(t, child,
		scripted.ToolCalls("", call("subagent_typed", `{"description":"bg","prompt":"from bg","subagent_type":"isolated"}`)),
		scripted.Text("started"),
		scripted.ToolCalls("", call("task_output", `{"task_id":"subagent-1","wait":true,"timeout_ms":10000}`)),
		scripted.Text("collected"))
	a := e.typed(repo, map[string]string{"i.md": "---\nname: isolated\ndescription: d\nbackground: true\nisolation: worktree\n---\n"})
	rs := runOn(t, a, "go")
	if resultText(rs[0]) != "started background subagent task subagent-1" {
		t.Fatalf("ack %q", resultText(rs[0]))
	}
	// The completion notice opens a turn that collects the output. The
	// child works in a git worktree (real processes), so this test runs on
	// the real clock and waits for that turn's end event.
	second := make(chan struct{})
	var once sync.Once
	defer a.Session().Observe(func(ev session.Event) {
		if end, ok := ev.Data.(session.TurnEnd); ok && end.Turn == 2 {
			once.Do(func() { close(second) })
		}
	})()
	close(release)
	select {
	case <-second:
	case <-time.After(time.Minute):
		t.Fatal("the completion notice opened no second turn")
	}
	if err := a.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs = results(a)
	out := resultText(rs[len(rs)-1])
	infos, _ := worktree.List(t.Context(), repo)
	if len(infos) != 1 || !strings.Contains(out, "wrote it\n[worktree] the changes are kept in the git worktree "+infos[0].Path) {
		t.Fatalf("task output %q, worktrees %+v", out, infos)
	}
}
