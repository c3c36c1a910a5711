package builtin

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree returns the files, folders and links under each of paths, with
// their modes and contents.
func tree(t *testing.T, paths ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, root := range paths {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, _ := os.Lstat(p)
			v := fi.Mode().String()
			if fi.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				v += " " + string(b)
			}
			out[p] = v
			return nil
		})
	}
	return out
}

// A bash command cannot leave a git hook or git configuration behind, in
// the repository it works in nor, from a linked worktree, in its common
// git directory; what else it writes stays.
func TestBashUndoesGitHooksAndConfig(t *testing.T) {
	top, wt := repo(t)
	gitDir := filepath.Join(top, ".git")
	wtGitDir := filepath.Join(gitDir, "worktrees", "wt")
	guarded := []string{filepath.Join(gitDir, "hooks"), filepath.Join(gitDir, "config"), filepath.Join(wtGitDir, "config.worktree"),
		filepath.Join(wt, ".git")}
	os.WriteFile(filepath.Join(gitDir, "hooks", "pre-push"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	before := tree(t, guarded...)
	s := scope(t, Options{})
	for _, c := range []struct{ name, cwd, cmd string }{
		{"post-checkout and fsmonitor", top, `printf '#!/bin/sh\nid > "$HOME/ran"\n' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout
			git config core.fsmonitor "$PWD/.git/fsmon"; echo planted`},
		{"changed, removed and replaced hooks", top, `echo 'id > /tmp/x' >> .git/hooks/pre-push; chmod 600 .git/hooks/pre-push
			rm -f .git/hooks/*.sample; mkdir -p .git/hooks/sub; echo x > .git/hooks/sub/x; git config core.hooksPath /tmp; echo planted`},
		{"hooks folder made a link", top, `rm -rf .git/hooks && ln -s /tmp .git/hooks; echo planted`},
		{"git directory made unreadable", top, `echo x > .git/hooks/post-checkout; chmod 000 .git; echo planted`},
		{"from a linked worktree", wt, `printf '#!/bin/sh\nid\n' > "$(git rev-parse --git-common-dir)/hooks/post-checkout"
			git config core.fsmonitor true; git config extensions.worktreeConfig true; git config --worktree core.fsmonitor true
			echo 'gitdir: /tmp/evil' > .git; echo planted`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, text := run(t, s, c.cwd, "bash", args("command", `echo kept > kept.txt; echo '*.o' >> "$(git rev-parse --git-common-dir)/info/exclude"; `+c.cmd))
			wantOK(t, res, text)
			if !strings.Contains(text, "planted") || !strings.Contains(text, "[dsh undid this command's changes to git hooks and git configuration") {
				t.Fatalf("result: %s", text)
			}
			after := tree(t, guarded...)
			for p, v := range before {
				if after[p] != v {
					t.Errorf("%s: %q, want %q", p, after[p], v)
				}
			}
			for p, v := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("%s left behind: %q", p, v)
				}
			}
			if b, err := os.ReadFile(filepath.Join(c.cwd, "kept.txt")); err != nil || string(b) != "kept\n" {
				t.Errorf("the command's other write was undone: %q, %v", b, err)
			}
			if b, _ := os.ReadFile(filepath.Join(gitDir, "info", "exclude")); !strings.HasSuffix(string(b), "*.o\n") {
				t.Errorf("the command's write to .git/info/exclude was undone: %q", b)
			}
		})
	}

	// A command that changes nothing guarded gets no note; outside a
	// repository nothing is snapshotted.
	for _, dir := range []string{top, t.TempDir()} {
		res, text := run(t, s, dir, "bash", args("command", "echo hi > f.txt; cat f.txt"))
		if wantOK(t, res, text); text != "hi\n" {
			t.Fatalf("result: %q", text)
		}
	}
}

func TestGuardedPaths(t *testing.T) {
	top, wt := repo(t)
	gitDir := filepath.Join(top, ".git")
	wtGitDir := filepath.Join(gitDir, "worktrees", "wt")
	os.MkdirAll(filepath.Join(top, "sub", "deeper"), 0o755)
	bare, linked := filepath.Join(t.TempDir(), "bare.git"), t.TempDir()
	git(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	if err := os.Symlink(gitDir, filepath.Join(linked, ".git")); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string][]string{
		top:                                 gitFiles(gitDir),
		filepath.Join(top, "sub", "deeper"): gitFiles(gitDir),
		filepath.Join(gitDir, "hooks"):      gitFiles(gitDir),
		wt:                                  append(append([]string{filepath.Join(wt, ".git")}, gitFiles(wtGitDir)...), gitFiles(gitDir)...),
		wtGitDir:                            append(gitFiles(wtGitDir), gitFiles(gitDir)...),
		bare:                                gitFiles(bare),
		linked:                              gitFiles(filepath.Join(linked, ".git")),
		t.TempDir():                         nil,
	} {
		if got := guardedPaths(dir); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: %q, want %q", dir, got, want)
		}
	}
}

func gitFiles(dir string) []string {
	return []string{filepath.Join(dir, "config"), filepath.Join(dir, "config.worktree"), filepath.Join(dir, "hooks")}
}
