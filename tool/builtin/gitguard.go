package builtin

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Bounds of what a git snapshot holds: hooks folders are small, and a
// bigger one is compared by size and time instead of content.
const (
	maxSnapEntries = 512     // files, folders and links per guarded tree
	maxSnapBytes   = 4 << 20 // file content kept per call
)

// gitGuard undoes what bash commands do to the git hooks and git
// configuration of the repository they work in. The sandbox cannot keep
// them out of a writable workspace (Landlock only adds rights), and git —
// dsh's own and the user's — runs hooks and the commands configuration
// names (core.fsmonitor, core.hooksPath, filters) outside the sandbox.
// Around each call it snapshots them and puts back what changed.
//
// Calls running at the same time in one repository share the state taken
// by the first of them, so that one call's restore is never taken for
// another's baseline.
type gitGuard struct {
	mu   sync.Mutex
	held map[string]*heldSnap // by guarded path
}

// heldSnap is the baseline of one guarded path, held while calls use it.
type heldSnap struct {
	entries map[string]snapEntry // the path and, for a folder, everything below it
	dirMode fs.FileMode          // the permissions of the folder holding the path
	users   int
}

// snapEntry is the state of one file, folder or link.
type snapEntry struct {
	mode    fs.FileMode // type and permission bits
	size    int64
	modTime int64
	data    []byte // a file's content or a link's target
	kept    bool   // data holds the whole content
	partial bool   // a folder whose entries were not all recorded
}

// begin snapshots the guarded paths of the repository holding dir and
// returns the function that restores them and describes what it put back
// ("" when nothing changed). Outside a repository it does nothing.
func (g *gitGuard) begin(dir string) (end func() string) {
	paths := guardedPaths(dir)
	if len(paths) == 0 {
		return func() string { return "" }
	}
	g.mu.Lock()
	if g.held == nil {
		g.held = map[string]*heldSnap{}
	}
	budget := maxSnapBytes
	for _, p := range paths {
		h := g.held[p]
		if h == nil {
			h = &heldSnap{entries: map[string]snapEntry{}}
			if fi, err := os.Stat(filepath.Dir(p)); err == nil {
				h.dirMode = fi.Mode().Perm()
			}
			snapshot(p, h.entries, &budget)
			g.held[p] = h
		}
		h.users++
	}
	g.mu.Unlock()
	return func() string {
		g.mu.Lock()
		defer g.mu.Unlock()
		var done []string
		for _, p := range paths {
			h := g.held[p]
			// A git directory made unreadable would hide what is in it.
			if fi, err := os.Stat(filepath.Dir(p)); h.dirMode != 0 && err == nil && fi.Mode().Perm() != h.dirMode {
				os.Chmod(filepath.Dir(p), h.dirMode)
				done = append(done, "restored the permissions of "+filepath.Dir(p))
			}
			done = append(done, restore(p, h.entries)...)
			if h.users--; h.users == 0 {
				delete(g.held, p)
			}
		}
		if len(done) == 0 {
			return ""
		}
		return fmt.Sprintf("[dsh undid this command's changes to git hooks and git configuration, which git runs outside the "+
			"sandbox and commands may not change: %s. Ask the user if such a change is needed.]", strings.Join(done, "; "))
	}
}

// guardedPaths returns the paths to guard for a command working in dir:
// the config, config.worktree and hooks of the git directory of the
// repository holding dir (a bare one included) and of its common
// directory, and the .git file of a linked worktree. Nil outside a
// repository.
func guardedPaths(dir string) []string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var paths, gitDirs []string
		dotGit := filepath.Join(d, ".git")
		if fi, err := os.Stat(dotGit); err == nil && fi.IsDir() {
			gitDirs = []string{dotGit}
		} else if err == nil && fi.Mode().IsRegular() {
			paths = append(paths, dotGit)
			if gd := readGitDir(d, dotGit); gd != "" {
				gitDirs = append(gitDirs, gd)
			}
		} else if isGitDir(d) { // a bare repository, or inside a git directory
			gitDirs = []string{d}
		}
		if len(gitDirs) > 0 {
			if cd := readCommonDir(gitDirs[0]); cd != "" && cd != gitDirs[0] {
				gitDirs = append(gitDirs, cd)
			}
		}
		for _, gd := range gitDirs {
			paths = append(paths, filepath.Join(gd, "config"), filepath.Join(gd, "config.worktree"), filepath.Join(gd, "hooks"))
		}
		if len(paths) > 0 {
			return paths
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// readGitDir reads the "gitdir: PATH" line of the .git file dotGit in
// folder top: the git directory of a linked worktree or a submodule.
func readGitDir(top, dotGit string) string {
	b, err := readSmall(dotGit)
	if err != nil {
		return ""
	}
	gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if gd = strings.TrimSpace(gd); !ok || gd == "" {
		return ""
	}
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(top, gd)
	}
	return filepath.Clean(gd)
}

// readCommonDir reads gitDir's commondir file: the main repository's git
// directory of a linked worktree.
func readCommonDir(gitDir string) string {
	b, err := readSmall(filepath.Join(gitDir, "commondir"))
	if err != nil {
		return ""
	}
	cd := strings.TrimSpace(string(b))
	if cd == "" {
		return ""
	}
	if !filepath.IsAbs(cd) {
		cd = filepath.Join(gitDir, cd)
	}
	return filepath.Clean(cd)
}

// readSmall reads a regular file of at most 4 KiB.
func readSmall(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4<<10 {
		return nil, fmt.Errorf("%s is not a small file", p)
	}
	return os.ReadFile(p)
}

// snapshot records p and, for a folder, what is below it (up to
// maxSnapEntries entries) into entries, keeping file content while budget
// lasts. A missing p records nothing.
func snapshot(p string, entries map[string]snapEntry, budget *int) {
	fi, err := os.Lstat(p)
	if err != nil || len(entries) >= maxSnapEntries {
		return
	}
	e := snapEntry{mode: fi.Mode(), size: fi.Size(), modTime: fi.ModTime().UnixNano()}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return
		}
		e.data, e.kept = []byte(target), true
	case fi.Mode().IsRegular() && fi.Size() <= int64(*budget):
		if b, err := os.ReadFile(p); err == nil && len(b) <= *budget {
			e.data, e.kept = b, true
			*budget -= len(b)
		}
	}
	entries[p] = e
	if !fi.IsDir() {
		return
	}
	names, err := readNames(p)
	for _, name := range names {
		if len(entries) >= maxSnapEntries {
			err = fmt.Errorf("too many entries")
			break
		}
		snapshot(filepath.Join(p, name), entries, budget)
	}
	if err != nil {
		e.partial = true
		entries[p] = e
	}
}

// readNames lists the names in folder p, sorted.
func readNames(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// restore puts p back as entries recorded it: what was added is removed,
// what changed or went away is written back (a file too big to have been
// kept is removed instead). Entries of a folder too big to have been
// recorded whole are left alone. It returns what it did, one phrase per
// path.
func restore(p string, entries map[string]snapEntry) []string {
	want, existed := entries[p]
	fi, err := os.Lstat(p)
	exists := err == nil
	parent, known := entries[filepath.Dir(p)]
	switch {
	case !existed && !exists:
		return nil
	case !existed && known && parent.partial:
		return nil
	case !existed:
		if err := os.RemoveAll(p); err != nil {
			return []string{fmt.Sprintf("could not remove the added %s: %v", p, err)}
		}
		return []string{"removed the added " + p}
	case want.mode.IsDir():
		var done []string
		if !exists || !fi.IsDir() {
			os.RemoveAll(p)
			if err := os.Mkdir(p, want.mode.Perm()); err != nil {
				return []string{fmt.Sprintf("could not recreate %s: %v", p, err)}
			}
			os.Chmod(p, want.mode.Perm()) // past the umask
			done = append(done, "recreated the folder "+p)
		} else if fi.Mode().Perm() != want.mode.Perm() {
			os.Chmod(p, want.mode.Perm())
			done = append(done, "restored the permissions of "+p)
		}
		names, _ := readNames(p)
		for name := range entries {
			if filepath.Dir(name) == p && !slices.Contains(names, filepath.Base(name)) {
				names = append(names, filepath.Base(name))
			}
		}
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			done = append(done, restore(filepath.Join(p, name), entries)...)
		}
		return done
	}
	if exists && same(p, fi, want) {
		return nil
	}
	verb := "restored"
	if !exists {
		verb = "put back the removed"
	}
	if !want.kept {
		if err := os.RemoveAll(p); err != nil {
			return []string{fmt.Sprintf("could not remove the changed %s: %v", p, err)}
		}
		return []string{"removed the changed " + p + " (too big to keep a copy of)"}
	}
	if err := put(p, want); err != nil {
		return []string{fmt.Sprintf("could not restore %s: %v", p, err)}
	}
	return []string{verb + " " + p}
}

// same reports whether the file or link p, described by fi, is still as
// want recorded it.
func same(p string, fi fs.FileInfo, want snapEntry) bool {
	if fi.Mode() != want.mode {
		return false
	}
	if !want.kept {
		return fi.Size() == want.size && fi.ModTime().UnixNano() == want.modTime
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		return err == nil && target == string(want.data)
	}
	if fi.Size() != int64(len(want.data)) {
		return false
	}
	b, err := os.ReadFile(p)
	return err == nil && bytes.Equal(b, want.data)
}

// put replaces whatever is at p with the recorded file or link, through a
// temporary name and a rename so that p is never half written.
func put(p string, want snapEntry) error {
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".dsh-restore")
	os.RemoveAll(tmp)
	var err error
	if want.mode&fs.ModeSymlink != 0 {
		err = os.Symlink(string(want.data), tmp)
	} else if err = os.WriteFile(tmp, want.data, want.mode.Perm()); err == nil {
		err = os.Chmod(tmp, want.mode.Perm()) // past the umask
	}
	if err == nil {
		if fi, lerr := os.Lstat(p); lerr == nil && fi.IsDir() {
			os.RemoveAll(p)
		}
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}
