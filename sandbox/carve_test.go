//go:build linux

package sandbox

import (
	"os"
	"testing"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// BenchmarkFileRules measures building the Landlock rules of a
// workspace-write policy with and without the deny-list (the walk along
// the denied paths), the part of a command's start the deny-list adds.
func BenchmarkFileRules(b *testing.B) {
	p := For(WorkspaceWrite, b.TempDir())
	if len(p.Unreadable) == 0 {
		b.Skip("no deny-list: HOME is unset")
	}
	for _, bc := range []struct {
		name       string
		unreadable []string
	}{{"no-deny-list", nil}, {"deny-list", p.Unreadable}} {
		q := p
		q.Unreadable = bc.unreadable
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_ = q.fileRules(7)
			}
		})
	}
}

// A folder holding a denied path is carved: its other entries are granted
// in full, the denied one and symbolic links not at all.
func TestCarve(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/secret", "a/open", "b"} {
		os.MkdirAll(dir+"/"+d, 0o755)
	}
	os.WriteFile(dir+"/a/file", nil, 0o644)
	os.Symlink("secret", dir+"/a/link")
	c := newCarver([]string{dir + "/a/secret", dir + "/missing"})
	c.grant(dir, readRights)
	for path, want := range map[string]uint64{
		dir: uint64(ll.AccessFSReadDir), dir + "/a": uint64(ll.AccessFSReadDir), dir + "/b": readRights, dir + "/a/open": readRights,
		dir + "/a/file": readRights & fileRights,
	} {
		if got := c.access[path]; got != want {
			t.Errorf("%s: rights %b, want %b", path, got, want)
		}
	}
	for _, path := range []string{dir + "/a/secret", dir + "/a/link"} {
		if _, ok := c.access[path]; ok {
			t.Errorf("%s was granted", path)
		}
	}
}
