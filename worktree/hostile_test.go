package worktree_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/worktree"
)

// A repository's agent may write its .git: a planted hook, file system
// monitor or filter never runs when dsh creates, inspects, lists or
// removes a worktree (N3), and the worktree still works. Under full, only
// git's settings hold it; otherwise the sandbox holds it too.
func TestPlantedGitCommandsNeverRun(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.Full, sandbox.WorkspaceWrite} {
		t.Run(string(mode), func(t *testing.T) { testPlanted(t, mode) })
	}
}

func testPlanted(t *testing.T, mode sandbox.Mode) {
	repo := Repo(t)
	marks := t.TempDir()
	mark := func(name string) string {
		return "#!/bin/sh\necho ran > " + filepath.Join(marks, name) + "\ncat\n"
	}
	os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("* filter=evil\n*.txt filter=proc\n"), 0o644)
	run(t, repo, "git", "add", ".gitattributes")
	run(t, repo, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "attributes")
	for _, hook := range []string{"post-checkout", "reference-transaction", "post-index-change"} {
		os.WriteFile(filepath.Join(repo, ".git", "hooks", hook), []byte(mark(hook)), 0o755)
	}
	os.WriteFile(filepath.Join(repo, ".git", "fsmon"), []byte(mark("fsmonitor")+"exit 1\n"), 0o755)
	os.WriteFile(filepath.Join(repo, ".git", "filter"), []byte(mark("filter")), 0o755)
	for _, kv := range [][2]string{
		{"core.fsmonitor", filepath.Join(repo, ".git", "fsmon")},
		{"filter.evil.clean", filepath.Join(repo, ".git", "filter")},
		{"filter.evil.smudge", filepath.Join(repo, ".git", "filter")},
		{"filter.evil.required", "true"},
		{"filter.proc.process", filepath.Join(repo, ".git", "filter")},
	} {
		run(t, repo, "git", "config", kv[0], kv[1])
	}

	m, err := worktree.New(t.TempDir(), mode, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := sandbox.WithMode(t.Context(), mode) // List reads in ctx's mode
	w, err := m.Create(ctx, repo, "planted")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Path, "README")); string(got) != "hello\n" {
		t.Fatalf("the worktree's README = %q", got)
	}
	os.WriteFile(filepath.Join(w.Path, "README"), []byte("changed\n"), 0o644)
	if _, err := worktree.List(ctx, repo); err != nil {
		t.Fatal(err)
	}
	out, err := w.Finish(ctx)
	if err != nil || !out.Kept {
		t.Fatalf("Finish = %+v, %v", out, err)
	}
	os.WriteFile(filepath.Join(w.Path, "README"), []byte("hello\n"), 0o644)
	w2, err := m.Create(ctx, repo, "planted")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := w2.Finish(ctx); err != nil || out.Kept {
		t.Fatalf("Finish of an unchanged worktree = %+v, %v", out, err)
	}
	entries, _ := os.ReadDir(marks)
	for _, e := range entries {
		t.Errorf("%s ran", e.Name())
	}
}

// dsh's git runs sandboxed: whatever it runs (here a git found first in
// PATH) can write only the repository's git folder and the worktrees root
// while it changes worktrees, and nothing while it reads.
func TestGitIsSandboxed(t *testing.T) {
	sandboxtest.Require(t)
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip(err)
	}
	out := sandboxtest.OutsideDir(t)
	repo, root, bin := Repo(t), filepath.Join(out, "worktrees"), filepath.Join(out, "bin")
	os.MkdirAll(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\n"+
		"echo x >> "+filepath.Join(out, "escaped")+" 2>/dev/null\n"+
		"echo x >> "+filepath.Join(root, "allowed")+" 2>/dev/null\n"+
		"exec "+real+" \"$@\"\n"), 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	m, err := worktree.New(root, sandbox.WorkspaceWrite, "")
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Create(t.Context(), repo, "sandboxed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "escaped")); err == nil {
		t.Error("dsh's git wrote outside the repository and the worktrees root")
	}
	if _, err := os.Stat(filepath.Join(root, "allowed")); err != nil {
		t.Error("dsh's git could not write the worktrees root")
	}
	if _, err := worktree.New(out, "wide", ""); err == nil {
		t.Error("an unknown mode passed")
	}
}

// A filter the user configured (git-lfs in ~/.gitconfig) still runs when
// dsh checks a worktree out; one the repository defines, or redefines,
// does not.
func TestUserFiltersStillRun(t *testing.T) {
	global := filepath.Join(t.TempDir(), "gitconfig")
	os.WriteFile(global, []byte("[filter \"upper\"]\n\tsmudge = tr a-z A-Z\n\tclean = cat\n[filter \"mine\"]\n\tsmudge = tr a-z A-Z\n\tclean = cat\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	repo := Repo(t)
	os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("README filter=upper\nsub/file.txt filter=mine\n"), 0o644)
	run(t, repo, "git", "add", ".gitattributes")
	run(t, repo, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "attributes")
	run(t, repo, "git", "config", "filter.mine.smudge", "rev") // the repository takes the user's filter over
	w, err := manager(t).Create(t.Context(), repo, "filters")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finish(t.Context())
	if got, _ := os.ReadFile(filepath.Join(w.Path, "README")); string(got) != "HELLO\n" {
		t.Errorf("README = %q: the user's filter did not run", got)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Path, "sub", "file.txt")); string(got) != "x\n" {
		t.Errorf("sub/file.txt = %q: a filter the repository redefined ran", got)
	}
}
