package trust_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/trust"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func state(t *testing.T, s *trust.Store, dir string) trust.State {
	t.Helper()
	st, err := s.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

// A folder is untrusted until trusted; a changed, added or removed item
// makes it untrusted again; revoking forgets it.
func TestStates(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	s := trust.Open(home)
	if got := state(t, s, dir); got != trust.Nothing {
		t.Fatalf("empty folder: %v", got)
	}
	write(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers":{}}`)
	write(t, filepath.Join(dir, ".claude", "agents", "explore.md"), "---\nname: explore\n---\nx")
	write(t, filepath.Join(dir, ".claude", "agents", "notes.txt"), "not an item")
	st, err := s.Check(dir)
	if err != nil || st.State != trust.Untrusted || len(st.Items) != 2 || st.Count(trust.KindAgent) != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := os.Stat(s.Path()); !os.IsNotExist(err) {
		t.Errorf("checking wrote the record: %v", err)
	}
	if _, err := s.Trust(dir); err != nil {
		t.Fatal(err)
	}
	if got := state(t, s, dir); got != trust.Trusted {
		t.Fatalf("after trust: %v", got)
	}
	fi, err := os.Stat(s.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("record %v %v", fi, err)
	}
	// Only items count: another file changes nothing.
	write(t, filepath.Join(dir, "main.go"), "package main")
	if got := state(t, s, dir); got != trust.Trusted {
		t.Errorf("after a non-item file: %v", got)
	}
	for _, change := range []func(){
		func() { write(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers":{"x":{"command":"sh"}}}`) },
		func() { write(t, filepath.Join(dir, ".dsh", "agents", "new.md"), "---\nname: new\n---\n") },
		func() { os.Remove(filepath.Join(dir, ".claude", "agents", "explore.md")) },
	} {
		change()
		if got := state(t, s, dir); got != trust.Changed {
			t.Errorf("after a change: %v", got)
		}
		if _, err := s.Trust(dir); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Revoke(dir); !ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if got := state(t, s, dir); got != trust.Untrusted {
		t.Errorf("after revoke: %v", got)
	}
	if ok, err := s.Revoke(dir); ok || err != nil {
		t.Errorf("second revoke: %v %v", ok, err)
	}
}

// A folder is keyed by its resolved path: a symlink to it is the same
// folder.
func TestSymlinkedFolder(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	write(t, filepath.Join(dir, ".mcp.json"), `{}`)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	s := trust.Open(home)
	if _, err := s.Trust(link); err != nil {
		t.Fatal(err)
	}
	if got := state(t, s, dir); got != trust.Trusted {
		t.Errorf("through the real path: %v", got)
	}
	list, err := s.List()
	real, _ := filepath.EvalSymlinks(dir)
	if err != nil || len(list) != 1 || list[0].Dir != real {
		t.Errorf("list %+v %v", list, err)
	}
}

// A FIFO among the items, or as the record, never blocks; a corrupt
// record is an error naming it.
func TestHostileFiles(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, ".mcp.json"), 0o644); err != nil {
		t.Skip(err)
	}
	write(t, filepath.Join(dir, ".dsh", "agents", "big.md"), strings.Repeat("x", trust.MaxItem+1))
	s := trust.Open(home)
	st, err := s.Check(dir)
	if err != nil || st.State != trust.Untrusted {
		t.Fatalf("%+v %v", st, err)
	}
	if it, _ := st.Item(".mcp.json"); it.Problem != "not a regular file" {
		t.Errorf("fifo item %+v", it)
	}
	if it, _ := st.Item(".dsh/agents/big.md"); !strings.Contains(it.Problem, "larger than") {
		t.Errorf("big item %q", it.Problem)
	}

	write(t, s.Path(), "{not json")
	if _, err := s.Check(dir); err == nil || !strings.Contains(err.Error(), s.Path()) || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt record: %v", err)
	}
	os.Remove(s.Path())
	if err := syscall.Mkfifo(s.Path(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trust(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("fifo record: %v", err)
	}
	if _, err := s.Check(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing folder checked")
	}
}

// The user's own folders of definitions are never a project's items, as
// when dsh runs in the home directory and .dsh/agents is $DSH_HOME/agents.
func TestUserFoldersAreNotProjectItems(t *testing.T) {
	home := t.TempDir()
	dshHome := filepath.Join(home, ".dsh")
	write(t, filepath.Join(dshHome, "agents", "mine.md"), "---\nname: mine\n---\n")
	write(t, filepath.Join(home, ".claude", "agents", "also.md"), "---\nname: also\n---\n")
	if st, err := trust.Open(dshHome).Check(home); err != nil || st.State != trust.Untrusted || len(st.Items) != 2 {
		t.Fatalf("without the user's folders: %+v %v", st, err)
	}
	s := trust.Open(dshHome, filepath.Join(dshHome, "agents"), filepath.Join(home, ".claude", "agents"))
	if st, err := s.Check(home); err != nil || st.State != trust.Nothing {
		t.Errorf("the user's folders counted: %+v %v", st, err)
	}
}

// Folders trusted at once by several processes all stay in the record.
func TestConcurrentTrust(t *testing.T) {
	home := t.TempDir()
	var dirs []string
	for range 8 {
		dir := t.TempDir()
		write(t, filepath.Join(dir, ".mcp.json"), `{}`)
		dirs = append(dirs, dir)
	}
	errs := make(chan error, len(dirs))
	for _, dir := range dirs {
		go func() { _, err := trust.Open(home).Trust(dir); errs <- err }()
	}
	for range dirs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if list, err := trust.Open(home).List(); err != nil || len(list) != len(dirs) {
		t.Errorf("%d of %d folders recorded: %v", len(list), len(dirs), err)
	}
}

// Agent definitions in subfolders of an agents folder are items too (they
// load, as in Claude Code): adding one makes a trusted folder changed.
// Hidden subfolders are not read, and so are no items.
func TestAgentSubfoldersAreItems(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	s := trust.Open(home)
	write(t, filepath.Join(dir, ".claude", "agents", "a.md"), "x")
	write(t, filepath.Join(dir, ".claude", "agents", ".git", "b.md"), "hidden")
	if _, err := s.Trust(dir); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, ".claude", "agents", "team", "lead.md"), "y")
	st, err := s.Check(dir)
	if err != nil || st.State != trust.Changed {
		t.Fatalf("after a new file in a subfolder: %v %v", st.State, err)
	}
	if _, ok := st.Item(".claude/agents/team/lead.md"); !ok || st.Count(trust.KindAgent) != 2 {
		t.Errorf("items %+v", st.Items)
	}
}
