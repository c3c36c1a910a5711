package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// GitDirs returns what a commit in the linked git worktree holding dir
// writes outside the worktree: its own git directory (index, HEAD, logs)
// and the objects, refs and logs of the repository's common directory.
// The rest of the common directory — hooks and config above all — stays
// out. It returns nil when dir is not in a linked worktree.
//
// The worktree's .git file is writable by the commands in it, so it is
// not trusted: the git directory it names must be an entry of the common
// directory's worktrees folder whose gitdir file names this very .git, as
// git worktree add leaves them. No git process is run.
func GitDirs(dir string) []string {
	top, dotgit := findDotGit(dir)
	if dotgit == "" {
		return nil
	}
	gitdir, ok := readPointer(dotgit, "gitdir: ", top)
	if !ok {
		return nil
	}
	common, ok := readPointer(filepath.Join(gitdir, "commondir"), "", gitdir)
	if !ok || filepath.Dir(gitdir) != filepath.Join(common, "worktrees") {
		return nil
	}
	back, ok := readPointer(filepath.Join(gitdir, "gitdir"), "", gitdir)
	if !ok || back != dotgit {
		return nil
	}
	out := []string{gitdir}
	for _, sub := range []string{"objects", "refs", "logs", "reftable"} {
		if fi, err := os.Lstat(filepath.Join(common, sub)); err == nil && fi.IsDir() {
			out = append(out, filepath.Join(common, sub))
		}
	}
	return out
}

// findDotGit returns the nearest folder at or above dir holding a .git
// entry, and that entry's resolved path when it is a regular file (a
// linked worktree's); "" otherwise.
func findDotGit(dir string) (top, dotgit string) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil || !filepath.IsAbs(dir) {
		return "", ""
	}
	for {
		fi, err := os.Lstat(filepath.Join(dir, ".git"))
		if err == nil {
			if !fi.Mode().IsRegular() {
				return "", ""
			}
			return dir, filepath.Join(dir, ".git")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ""
		}
		dir = parent
	}
}

// readPointer reads a small file holding prefix and a path, and returns
// the path resolved (relative to base when relative) with symbolic links
// evaluated.
func readPointer(file, prefix, base string) (string, bool) {
	data, err := os.ReadFile(file)
	if err != nil || len(data) > 4096 {
		return "", false
	}
	s, ok := strings.CutPrefix(strings.TrimRight(string(data), "\r\n"), prefix)
	if !ok || s == "" || strings.ContainsAny(s, "\n\x00") {
		return "", false
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(base, s)
	}
	s, err = filepath.EvalSymlinks(s)
	return s, err == nil
}
