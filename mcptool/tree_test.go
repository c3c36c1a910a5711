package mcptool_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/tool"
)

func runtime(t *testing.T) *dsh.Runtime {
	t.Helper()
	rt, err := dsh.New(dsh.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func visible(s *tool.Scope, prefix string) []string {
	var out []string
	for _, spec := range s.Specs() {
		if strings.HasPrefix(spec.Name, prefix) {
			out = append(out, spec.Name)
		}
	}
	return out
}

// A tree's servers (an ACP client's) reach its root and every child the
// root creates later, through each child's tool filter (and its
// ancestors'), and no other tree.
func TestAttachTree(t *testing.T) {
	rt := runtime(t)
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{})
	set.Ready(context.Background())
	ctx := context.Background()
	opts := agent.Options{Provider: "test"}
	root, err := rt.Agents.Create(ctx, agent.CreateOptions{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	detach := mcptool.AttachTree(root, set)
	other, err := rt.Agents.Create(ctx, agent.CreateOptions{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	child, err := rt.Agents.Create(ctx, agent.CreateOptions{Owner: root, Options: opts, Setup: func(a *agent.Agent) error {
		_, err := a.Tools().Restrict(tool.Restriction{Deny: []string{"mcp__fake__p*", "mcp__fake__crash"}})
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := rt.Agents.Create(ctx, agent.CreateOptions{Owner: child, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	if got := visible(root.Tools(), "mcp__"); len(got) != fakeTools {
		t.Errorf("root sees %v", got)
	}
	if got := visible(other.Tools(), "mcp__"); len(got) != 0 {
		t.Errorf("another tree sees %v", got)
	}
	want := []string{"mcp__fake__big", "mcp__fake__block", "mcp__fake__echo", "mcp__fake__env", "mcp__fake__fail", "mcp__fake__grow", "mcp__fake__link", "mcp__fake__log", "mcp__fake__roots", "mcp__fake__weather", "mcp__fake__weird_name_with_spaces"}
	if got := visible(child.Tools(), "mcp__"); !slices.Equal(got, want) {
		t.Errorf("filtered child sees %v, want %v", got, want)
	}
	if got := visible(grandchild.Tools(), "mcp__"); !slices.Equal(got, want) { // a child's filter holds for what it starts
		t.Errorf("grandchild sees %v, want %v", got, want)
	}
	r := child.Tools().Execute(ctx, tool.Call{ID: "1", Name: "mcp__fake__echo", Arguments: []byte(`{"message":"from a child"}`)})
	if text(r) != "echo: from a child" {
		t.Errorf("child call: %+v", r)
	}
	wantError(t, child.Tools().Execute(ctx, tool.Call{ID: "2", Name: "mcp__fake__pid", Arguments: []byte(`{}`)}), tool.CodeUnknownTool)
	detach()
	if got := append(visible(root.Tools(), "mcp__"), visible(grandchild.Tools(), "mcp__")...); len(got) != 0 {
		t.Errorf("after detach: %v", got)
	}
}

// MountGlobal starts nothing until a top-level agent is created; that
// creation waits for the tools, so its first request lists them.
func TestMountGlobalOnFirstTopLevelAgent(t *testing.T) {
	rt := runtime(t)
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{})
	defer mcptool.MountGlobal(set, rt.Tools, rt.Events)()
	if err := proc.NoChildren(); err != nil || len(set.Status()[0].Tools) != 0 {
		t.Fatalf("started before any agent: %v %+v", err, set.Status())
	}
	root, err := rt.Agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := visible(root.Tools(), "mcp__fake__"); len(got) != fakeTools {
		t.Errorf("the first agent sees %v", got)
	}
}

// roots/list answers the folders the agents work in: the Set's folder, and
// a child's own folder (a worktree) while the child lives.
func TestRootsAreTheAgentsFolders(t *testing.T) {
	rt := runtime(t)
	dir, worktree := t.TempDir(), t.TempDir()
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{Dir: dir})
	defer mcptool.MountGlobal(set, rt.Tools, rt.Events)()
	ctx := context.Background()
	root, err := rt.Agents.Create(ctx, agent.CreateOptions{Options: agent.Options{Provider: "test"}, Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	roots := func() string {
		r := root.Tools().Execute(ctx, tool.Call{ID: "1", Name: "mcp__fake__roots", Arguments: []byte(`{}`)})
		if r.IsError {
			t.Fatalf("roots: %+v", r)
		}
		return text(r)
	}
	if got, want := roots(), mcptool.FileURI(dir); got != want {
		t.Errorf("roots %q, want %q", got, want)
	}
	child, err := rt.Agents.Create(ctx, agent.CreateOptions{Owner: root, Options: agent.Options{Provider: "test"}, Cwd: worktree})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{mcptool.FileURI(dir), mcptool.FileURI(worktree)}
	slices.Sort(want)
	if got := roots(); got != strings.Join(want, " ") {
		t.Errorf("with a worktree child, roots %q, want %q", got, want)
	}
	if err := child.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := roots(), mcptool.FileURI(dir); got != want {
		t.Errorf("after the child, roots %q, want %q", got, want)
	}
}

// The pinned server-filesystem, started without a folder (its roots
// mode), serves the folder dsh works in and nothing else. It asks for the
// roots once initialized and takes them in asynchronously, so a call made
// at once may find none yet: the first read is tried again for a while.
func TestFilesystemServerInRootsMode(t *testing.T) {
	server := testpeers.Path(t, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.txt"), []byte("read me"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := newSet(t, map[string]mcptool.ServerConfig{"files": {Command: "node", Args: []string{server}, StartTimeout: time.Minute}},
		mcptool.Options{Dir: dir})
	s := mounted(t, set)
	args := fmt.Sprintf(`{"path":%q}`, filepath.Join(dir, "r.txt"))
	r := call(t, s, "mcp__files__read_text_file", args)
	for deadline := time.Now().Add(10 * time.Second); r.IsError && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		r = call(t, s, "mcp__files__read_text_file", args)
	}
	if r.IsError || text(r) != "read me" {
		t.Errorf("read in the root: %+v", r)
	}
	r = call(t, s, "mcp__files__read_text_file", `{"path":"/etc/hostname"}`)
	wantError(t, r, mcptool.CodeToolError, "Access denied")
}

// A server's tools/list_changed is followed: a call that changed the tools
// returns once they are listed again, so the agent's next request offers
// the new ones.
func TestToolListChangedIsFollowed(t *testing.T) {
	rt := runtime(t)
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{})
	defer mcptool.MountGlobal(set, rt.Tools, rt.Events)()
	ctx := context.Background()
	root, err := rt.Agents.Create(ctx, agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(visible(root.Tools(), "mcp__"), "mcp__fake__extra") {
		t.Fatal("extra before it was added")
	}
	if r := root.Tools().Execute(ctx, tool.Call{ID: "1", Name: "mcp__fake__grow", Arguments: []byte(`{}`)}); r.IsError {
		t.Fatalf("grow: %+v", r)
	}
	if got := visible(root.Tools(), "mcp__"); !slices.Contains(got, "mcp__fake__extra") || len(got) != fakeTools+1 {
		t.Fatalf("after grow, the agent sees %v", got)
	}
	if r := root.Tools().Execute(ctx, tool.Call{ID: "2", Name: "mcp__fake__extra", Arguments: []byte(`{}`)}); r.IsError || text(r) != "extra" {
		t.Errorf("extra: %+v", r)
	}
}

// The pinned server-everything's task-required tool is not offered (dsh
// cannot call it); its other tools are.
func TestTaskRequiredToolsAreLeftOut(t *testing.T) {
	server := testpeers.Path(t, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	set := newSet(t, map[string]mcptool.ServerConfig{"everything": {Command: "node", Args: []string{server}, StartTimeout: time.Minute}},
		mcptool.Options{})
	got := visible(mounted(t, set), "mcp__")
	if slices.Contains(got, "mcp__everything__simulate-research-query") || !slices.Contains(got, "mcp__everything__echo") {
		t.Errorf("tools %v", got)
	}
}

// The resource tools follow the caller's tool filter: a child that does
// not see a server's tools cannot list or read its resources.
func TestResourcesFollowTheToolFilter(t *testing.T) {
	rt := runtime(t)
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{})
	defer mcptool.MountGlobal(set, rt.Tools, rt.Events)()
	ctx := context.Background()
	opts := agent.Options{Provider: "test"}
	root, err := rt.Agents.Create(ctx, agent.CreateOptions{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	child, err := rt.Agents.Create(ctx, agent.CreateOptions{Owner: root, Options: opts, Setup: func(a *agent.Agent) error {
		_, err := a.Tools().Restrict(tool.Restriction{Deny: []string{"mcp__fake__*"}})
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	read := func(a *agent.Agent) tool.Result {
		return a.Tools().Execute(ctx, tool.Call{ID: "1", Name: mcptool.ReadResourceTool, Arguments: []byte(`{"server":"fake","uri":"fake://page/2"}`), Caller: a})
	}
	if r := read(root); r.IsError || text(r) != "page fake://page/2" {
		t.Errorf("root: %+v", r)
	}
	wantError(t, read(child), tool.CodeDenied, `the tools of MCP server "fake" are not this agent's`)
	r := child.Tools().Execute(ctx, tool.Call{ID: "2", Name: mcptool.ListResourcesTool, Arguments: []byte(`{}`), Caller: child})
	if text(r) != "no connected MCP server has resources" {
		t.Errorf("child's list: %+v", r)
	}
}

// A tree's servers (an ACP session's) get the folders of that tree's
// agents as roots, and not another tree's.
func TestAttachTreeRoots(t *testing.T) {
	rt := runtime(t)
	dir, worktree, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	set := newSet(t, map[string]mcptool.ServerConfig{"fake": fake("ok")}, mcptool.Options{Dir: dir, Events: rt.Events})
	set.Ready(context.Background())
	ctx := context.Background()
	opts := agent.Options{Provider: "test"}
	root, err := rt.Agents.Create(ctx, agent.CreateOptions{Options: opts, Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer mcptool.AttachTree(root, set)()
	if _, err := rt.Agents.Create(ctx, agent.CreateOptions{Options: opts, Cwd: elsewhere}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Agents.Create(ctx, agent.CreateOptions{Owner: root, Options: opts, Cwd: worktree}); err != nil {
		t.Fatal(err)
	}
	r := root.Tools().Execute(ctx, tool.Call{ID: "1", Name: "mcp__fake__roots", Arguments: []byte(`{}`)})
	want := []string{mcptool.FileURI(dir), mcptool.FileURI(worktree)}
	slices.Sort(want)
	if text(r) != strings.Join(want, " ") {
		t.Errorf("roots %q, want %q", text(r), want)
	}
}

// Over streamable HTTP, whose messages dsh does not see as they are read,
// a tools/list_changed is followed in the background.
func TestToolListChangedOverHTTP(t *testing.T) {
	srv := fakeServer()
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(func() { // after the Set's close (cleanups run last first)
		web.CloseClientConnections()
		web.Close()
	})
	set := newSet(t, map[string]mcptool.ServerConfig{"web": {URL: web.URL}}, mcptool.Options{})
	s := mounted(t, set)
	if r := call(t, s, "mcp__web__grow", `{}`); r.IsError {
		t.Fatalf("grow: %+v", r)
	}
	for deadline := time.Now().Add(10 * time.Second); !s.Has("mcp__web__extra"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("extra never listed: %v", visible(s, "mcp__"))
		}
	}
}
