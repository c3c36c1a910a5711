package worktree_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/worktree"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run runs a command in dir and returns its output.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Repo makes a git repository with one commit holding README and
// sub/file.txt.
func Repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "git", "init", "--quiet", "-b", "main")
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "file.txt"), []byte("x\n"), 0o644)
	run(t, dir, "git", "add", ".")
	run(t, dir, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "init")
	return dir
}

func manager(t *testing.T) *worktree.Manager {
	t.Helper()
	m, err := worktree.New(t.TempDir(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func worktrees(t *testing.T, repo string) []string {
	t.Helper()
	var paths []string
	for _, line := range strings.Split(run(t, repo, "git", "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			paths = append(paths, p)
		}
	}
	return paths
}

func TestOutsideARepositoryIsAClearError(t *testing.T) {
	dir := t.TempDir()
	_, err := manager(t).Create(t.Context(), dir, "x")
	var we *worktree.Error
	if !errors.As(err, &we) || we.Code != worktree.CodeNotARepo || !strings.Contains(err.Error(), dir+" is not inside one") {
		t.Fatalf("err = %v", err)
	}
	empty := t.TempDir()
	run(t, empty, "git", "init", "--quiet")
	if _, err := manager(t).Create(t.Context(), empty, "x"); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Fatalf("a repository without commits: %v", err)
	}
}

// A worktree without changes is removed with its branch; the child's cwd
// is the parent's folder inside the new tree.
func TestUnchangedWorktreeIsRemoved(t *testing.T) {
	repo := Repo(t)
	m := manager(t)
	w, err := m.Create(t.Context(), filepath.Join(repo, "sub"), "Look around!")
	if err != nil {
		t.Fatal(err)
	}
	if w.Dir != filepath.Join(w.Path, "sub") || !strings.HasPrefix(w.Branch, "dsh/look-around-") || !strings.HasPrefix(w.Path, m.Root()) {
		t.Fatalf("worktree %+v", w)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir, "file.txt")); string(b) != "x\n" {
		t.Fatalf("the worktree does not hold the repository: %q", b)
	}
	if infos, _ := worktree.List(t.Context(), repo); len(infos) != 1 || infos[0].Owner != os.Getpid() || infos[0].Stale {
		t.Fatalf("while in use: %+v", infos)
	}
	out, err := w.Finish(t.Context())
	if err != nil || out.Kept {
		t.Fatalf("finish: %+v %v", out, err)
	}
	if _, err := os.Stat(w.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worktree is still there: %v", err)
	}
	if got := worktrees(t, repo); len(got) != 1 {
		t.Errorf("git worktree list: %v", got)
	}
	if branches := run(t, repo, "git", "branch", "--list", "dsh/*"); branches != "" {
		t.Errorf("branch left: %s", branches)
	}
	if again, err := w.Finish(t.Context()); err != nil || again != out {
		t.Errorf("second Finish: %+v %v", again, err)
	}
}

// Three children at once, each writing the same file name in its own
// worktree: the parent's tree is unchanged, each worktree is kept with its
// own content, and git agrees.
func TestParallelChildrenNeverShareAWorktree(t *testing.T) {
	repo := Repo(t)
	m := manager(t)
	const n = 3
	outs := make([]worktree.Outcome, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			w, err := m.Create(t.Context(), repo, "same label")
			if err != nil {
				errs <- err
				return
			}
			if err := os.WriteFile(filepath.Join(w.Dir, "result.txt"), []byte(fmt.Sprint(i)), 0o644); err != nil {
				errs <- err
				return
			}
			out, err := w.Finish(t.Context())
			outs[i] = out
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var paths []string
	for i, out := range outs {
		if !out.Kept {
			t.Fatalf("child %d: worktree not kept: %+v", i, out)
		}
		if b, _ := os.ReadFile(filepath.Join(out.Path, "result.txt")); string(b) != fmt.Sprint(i) {
			t.Errorf("child %d's file holds %q", i, b)
		}
		if !strings.Contains(out.String(), out.Path) || !strings.Contains(out.String(), out.Branch) {
			t.Errorf("outcome text %q does not name the worktree", out)
		}
		paths = append(paths, out.Path)
	}
	slices.Sort(paths)
	if len(slices.Compact(paths)) != n {
		t.Fatalf("children shared a worktree: %v", paths)
	}
	if status := run(t, repo, "git", "status", "--porcelain"); status != "" {
		t.Errorf("the parent's tree changed:\n%s", status)
	}
	if _, err := os.Stat(filepath.Join(repo, "result.txt")); err == nil {
		t.Error("a child wrote into the parent's tree")
	}
	infos, err := worktree.List(t.Context(), repo)
	if err != nil || len(infos) != n {
		t.Fatalf("List: %+v %v", infos, err)
	}
	for _, in := range infos {
		if in.Owner != 0 || in.Stale {
			t.Errorf("a kept worktree is still locked: %+v", in)
		}
	}
}

// A child that committed (and left a clean tree) has changes too.
func TestCommitsCountAsChanges(t *testing.T) {
	repo := Repo(t)
	w, err := manager(t).Create(t.Context(), repo, "commit")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(w.Dir, "new.txt"), []byte("n"), 0o644)
	run(t, w.Dir, "git", "add", ".")
	run(t, w.Dir, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "child")
	if out, err := w.Finish(t.Context()); err != nil || !out.Kept {
		t.Fatalf("finish: %+v %v", out, err)
	}
}

// A worktree still locked by a process that is gone is stale.
func TestStaleWorktreeFromADeadProcess(t *testing.T) {
	repo := Repo(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "wt")
	run(t, repo, "git", "worktree", "add", "--quiet", "--lock", "--reason", fmt.Sprintf("dsh pid %d", dead.Process.Pid), "-b", "dsh/crashed-1", path)
	run(t, repo, "git", "worktree", "add", "--quiet", "-b", "mine", filepath.Join(t.TempDir(), "user")) // not dsh's
	infos, err := worktree.List(t.Context(), repo)
	if err != nil || len(infos) != 1 {
		t.Fatalf("List: %+v %v", infos, err)
	}
	if in := infos[0]; in.Path != path || in.Branch != "dsh/crashed-1" || in.Owner != dead.Process.Pid || !in.Stale {
		t.Fatalf("info %+v", in)
	}
}
