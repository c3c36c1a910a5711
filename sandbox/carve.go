//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Landlock access rights, grouped as the rules use them.
const (
	readRights  = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	writeRights = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSTruncate
	// fileRights are the rights a rule on a file (not a folder) may hold.
	fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// carver builds Landlock rules that grant access to file hierarchies
// except some paths inside them. Landlock rules only add rights, and a
// right granted on a folder holds for everything beneath it, so a folder
// holding a denied path is granted only the listing of its entries (and,
// for a writable one, the right to change them), and each of its entries
// but the denied one gets the full grant, recursively along the path.
//
// Two consequences: a denied folder can still be listed by name from its
// parent's rule, and a file a command creates directly in a carved folder
// cannot be read back by that command (the next command's rules cover
// it). Symbolic links among the entries are skipped: their targets are
// covered where they live.
type carver struct {
	denied []string          // resolved, existing
	access map[string]uint64 // path → rights granted
	dirs   map[string]bool   // path → is a folder
}

// newCarver returns a carver denying the existing paths of denied,
// symbolic links resolved.
func newCarver(denied []string) *carver {
	c := &carver{access: map[string]uint64{}, dirs: map[string]bool{}}
	for _, d := range denied {
		if r, err := filepath.EvalSymlinks(d); err == nil && !slices.Contains(c.denied, r) {
			c.denied = append(c.denied, r)
		}
	}
	return c
}

// grant gives access to the hierarchy at path (resolved), but the denied
// paths.
func (c *carver) grant(path string, access uint64) {
	inside := false
	for _, d := range c.denied {
		if within(path, d) {
			return // denied itself
		}
		inside = inside || within(d, path)
	}
	if !inside {
		c.add(path, access)
		return
	}
	c.add(path, ll.AccessFSReadDir|access&^readRights&^ll.AccessFSResolveUnix)
	entries, err := os.ReadDir(path)
	if err != nil {
		return // nothing beneath is granted
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 {
			p := filepath.Join(path, e.Name())
			c.dirs[p] = e.IsDir()
			c.grant(p, access)
		}
	}
}

// add grants access to path, limited to the rights of a file when it is
// not a folder.
func (c *carver) add(path string, access uint64) {
	isDir, ok := c.dirs[path]
	if !ok {
		fi, err := os.Stat(path)
		if err != nil {
			return
		}
		isDir = fi.IsDir()
		c.dirs[path] = isDir
	}
	if !isDir {
		access &= fileRights
	}
	c.access[path] |= access
}

// rules returns the grants as Landlock rules, in path order.
func (c *carver) rules() []landlock.Rule {
	paths := make([]string, 0, len(c.access))
	for p := range c.access {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([]landlock.Rule, 0, len(paths))
	for _, p := range paths {
		out = append(out, landlock.PathAccess(landlock.AccessFSSet(c.access[p]), p).IgnoreIfMissing())
	}
	return out
}

// within reports whether path is dir or lies beneath it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// resolved is path with symbolic links evaluated, or path when that fails.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}
