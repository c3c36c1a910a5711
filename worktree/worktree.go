// Package worktree gives a child agent a git worktree of its own: a fresh
// checkout of the parent's repository on a new branch, so that children
// editing one repository in parallel never touch each other's files or the
// parent's. When the child ends, a worktree without changes is removed with
// its branch, and one with changes is kept for review.
//
// While a child uses it, a worktree is locked (git worktree lock) with a
// reason naming the process ("dsh pid N"); a worktree still locked by a
// process that is gone was left by a crash, and List reports it as stale.
// It uses the git command line, hardened and sandboxed: the repository
// cannot make dsh's git run anything (see runner).
package worktree

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/sandbox"
)

// BranchPrefix starts the name of every branch this package creates.
const BranchPrefix = "dsh/"

// lockPrefix starts the lock reason of a worktree in use: "dsh pid N".
const lockPrefix = "dsh pid "

// Code is a stable error code of this package.
const (
	CodeNotARepo = "NOT_A_GIT_REPOSITORY"
	CodeGit      = "GIT_FAILED"
)

// Error is a failure with a stable code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// Manager creates worktrees under one root directory. It is safe for
// concurrent use.
type Manager struct {
	root string
	git  runner
	mu   sync.Mutex // serialises the git commands that change a repository's worktrees
}

// New returns a manager keeping worktrees under root (absolute), one
// folder per repository. Its git commands run under the sandbox mode
// (unset: sandbox.Default; a call's context may narrow it) and network
// setting of the commands dsh runs.
func New(root string, mode sandbox.Mode, network sandbox.Network) (*Manager, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("worktree: root %q is not an absolute path", root)
	}
	if _, err := sandbox.ParseMode(string(mode)); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	if _, err := sandbox.ParseNetwork(string(network)); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	return &Manager{root: root, git: runner{mode: mode, network: network, root: root}}, nil
}

// Root returns the directory the manager keeps worktrees under.
func (m *Manager) Root() string { return m.root }

// Worktree is a worktree a child works in.
type Worktree struct {
	m *Manager
	// Repo is the top level of the repository it was made from.
	Repo string
	// Path is its top level; Dir is the child's cwd inside it (the
	// parent's cwd, relative to Repo, in the new tree).
	Path, Dir string
	// Branch is the branch it has checked out; Base is the commit it
	// started from.
	Branch, Base string

	once   sync.Once
	result Outcome
	err    error
}

// Outcome is how a worktree ended.
type Outcome struct {
	// Kept is true when the child left changes (edits, new files or
	// commits): the worktree and its branch stay for review.
	Kept bool
	// Path and Branch name the worktree.
	Path, Branch string
}

// String describes the outcome for the model and the user.
func (o Outcome) String() string {
	if !o.Kept {
		return "the worktree had no changes and was removed"
	}
	return fmt.Sprintf("the changes are kept in the git worktree %s on branch %s: review them there, then merge the branch "+
		"(and remove the worktree with `git worktree remove %s`)", o.Path, o.Branch, o.Path)
}

// Create makes a worktree of the repository holding cwd, at its HEAD, on a
// new branch named after label, and locks it for this process. The new
// tree holds the committed state: the parent's uncommitted changes are not
// in it. Outside a git repository it fails with code NOT_A_GIT_REPOSITORY.
func (m *Manager) Create(ctx context.Context, cwd, label string) (*Worktree, error) {
	top, err := m.git.read(ctx, cwd, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, &Error{Code: CodeNotARepo, Msg: fmt.Sprintf("worktree isolation needs a git repository, and %s is not inside one", cwd)}
	}
	rel, err := filepath.Rel(top, cwd)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = "."
	}
	base, err := m.git.read(ctx, top, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return nil, &Error{Code: CodeGit, Msg: fmt.Sprintf("worktree isolation needs a commit to start from, and the repository at %s has none", top)}
	}
	id := make([]byte, 4)
	rand.Read(id)
	name := slug(label) + "-" + hex.EncodeToString(id)
	dir := filepath.Join(m.root, repoFolder(top), name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	w := &Worktree{m: m, Repo: top, Path: dir, Dir: filepath.Join(dir, rel), Branch: BranchPrefix + name, Base: base}
	m.mu.Lock()
	_, err = m.git.change(ctx, top, "worktree", "add", "--quiet", "--lock", "--reason", lockPrefix+strconv.Itoa(os.Getpid()), "-b", w.Branch, dir, base)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(w.Dir); err != nil { // the parent's folder is not tracked: start at the top
		w.Dir = dir
	}
	return w, nil
}

// Finish ends the child's use of the worktree: without changes it is
// removed with its branch, with changes it is unlocked and kept. It is
// idempotent; a ctx that ends stops the git commands (the worktree then
// stays locked, for List to find).
func (w *Worktree) Finish(ctx context.Context) (Outcome, error) {
	w.once.Do(func() { w.result, w.err = w.finish(ctx) })
	return w.result, w.err
}

func (w *Worktree) finish(ctx context.Context) (Outcome, error) {
	out := Outcome{Path: w.Path, Branch: w.Branch}
	git := w.m.git
	changed, err := changed(ctx, git, w.Path, w.Base)
	if err != nil {
		return out, err
	}
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if _, err := git.change(ctx, w.Repo, "worktree", "unlock", w.Path); err != nil {
		return out, err
	}
	if changed {
		out.Kept = true
		return out, nil
	}
	if _, err := git.change(ctx, w.Repo, "worktree", "remove", "--force", w.Path); err != nil {
		return out, err
	}
	_, err = git.change(ctx, w.Repo, "branch", "-D", w.Branch)
	return out, err
}

// Changed reports whether the worktree at path differs from base: edited,
// new or deleted files (ignored ones aside) or commits of its own. Its git
// commands run read-only (or as ctx's sandbox mode says).
func Changed(ctx context.Context, path, base string) (bool, error) {
	return changed(ctx, runner{}, path, base)
}

func changed(ctx context.Context, git runner, path, base string) (bool, error) {
	status, err := git.read(ctx, path, "status", "--porcelain", "--untracked-files=all")
	if err != nil || status != "" {
		return status != "", err
	}
	ahead, err := git.read(ctx, path, "rev-list", "--count", base+"..HEAD")
	return ahead != "0", err
}

// Info is one dsh worktree of a repository.
type Info struct {
	Path, Branch string
	// Owner is the process that locked it, 0 when it is not locked by dsh
	// (a worktree kept for review).
	Owner int
	// Stale is true when Owner is a process that is gone: a crash left it.
	Stale bool
	// Changed is true when it holds edits, new files or commits that the
	// main worktree's HEAD lacks.
	Changed bool
	// Missing is true when its folder is gone (git worktree prune drops it).
	Missing bool
}

// Remedy says how to clean a worktree up by hand.
func (in Info) Remedy() string {
	unlock := ""
	if in.Owner != 0 {
		unlock = "git worktree unlock " + in.Path + " && "
	}
	if in.Changed {
		return fmt.Sprintf("it has changes: review them, merge branch %s, then %sgit worktree remove %s", in.Branch, unlock, in.Path)
	}
	return fmt.Sprintf("it has no changes: %sgit worktree remove --force %s && git branch -D %s", unlock, in.Path, in.Branch)
}

// List returns the worktrees of the repository holding dir that dsh
// created (their branch starts with BranchPrefix). Its git commands run
// read-only (or as ctx's sandbox mode says).
func List(ctx context.Context, dir string) ([]Info, error) {
	git := runner{}
	out, err := git.read(ctx, dir, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	var infos []Info
	var mainHead string
	for i, rec := range strings.Split(out, "\n\n") {
		var in Info
		for _, line := range strings.Split(rec, "\n") {
			key, val, _ := strings.Cut(line, " ")
			switch key {
			case "HEAD":
				if i == 0 {
					mainHead = val
				}
			case "worktree":
				in.Path = val
			case "branch":
				in.Branch = strings.TrimPrefix(val, "refs/heads/")
			case "prunable":
				in.Missing = true
			case "locked":
				if pid, err := strconv.Atoi(strings.TrimPrefix(val, lockPrefix)); err == nil && strings.HasPrefix(val, lockPrefix) {
					in.Owner, in.Stale = pid, !alive(pid)
				}
			}
		}
		if !strings.HasPrefix(in.Branch, BranchPrefix) {
			continue
		}
		if !in.Missing && mainHead != "" {
			if in.Changed, err = changed(ctx, git, in.Path, mainHead); err != nil {
				return nil, err
			}
		}
		infos = append(infos, in)
	}
	return infos, nil
}

var unsafeChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9]+`) })

// slug makes a short branch-safe name of label.
func slug(label string) string {
	s := strings.Trim(unsafeChars().ReplaceAllString(strings.ToLower(label), "-"), "-")
	if len(s) > 32 {
		s = strings.TrimRight(s[:32], "-")
	}
	if s == "" {
		s = "child"
	}
	return s
}

// repoFolder names a repository's folder under the root: its base name
// and a hash of its path, so that two repositories never share one.
func repoFolder(top string) string {
	h := fnv.New32a()
	h.Write([]byte(top))
	return fmt.Sprintf("%s-%08x", slug(filepath.Base(top)), h.Sum32())
}
