package builtin

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
)

// mode returns the sandbox mode in force for a call: the configured one,
// narrowed by the call's context (a child's policy), never widened.
func (o Options) mode(ctx context.Context) sandbox.Mode {
	m := o.Sandbox
	if c, ok := sandbox.FromContext(ctx); ok {
		m = sandbox.Narrow(m, c)
	}
	return m
}

// readPolicy is the sandbox policy in force for a call working in cwd:
// what it says of reads (Unreadable) binds the file tools as it binds
// commands.
func (o Options) readPolicy(ctx context.Context, cwd string) sandbox.Policy {
	return sandbox.For(o.mode(ctx), resolve(cwd, "."))
}

// checkRead refuses tool name a read of path that the sandbox in force
// keeps from commands (the credential stores and session logs of
// sandbox.Unreadable).
func checkRead(pol sandbox.Policy, name, path string) error {
	if pol.MayRead(path) {
		return nil
	}
	return tool.Errorf(CodeSandbox, "%s: refused: %s is unreadable under tools.sandbox: %s (credential stores and dsh's session logs are "+
		"kept from tools and commands); reading it needs tools.sandbox: full, which only the user can set", name, path, pol.Mode)
}

// checkWrite decides whether write_file or edit_file (name) may write dest,
// the destination of path (path with every symbolic link followed), for a
// call working in cwd. Protected files are refused whatever the mode
// (CodeProtected); then the sandbox mode in force decides as it does for
// bash (CodeSandbox): read-only refuses every write, workspace-write every
// write outside its writable set, full none.
func (o Options) checkWrite(ctx context.Context, name, cwd, path, dest string) error {
	if why := o.protected(cwd, path, dest); why != "" {
		return tool.Errorf(CodeProtected, "%s: refused: %s is %s; no tool may write it, whatever tools.sandbox says", name, path, why)
	}
	mode := o.mode(ctx)
	setting := "tools.sandbox: " + string(mode)
	if mode != o.Sandbox {
		setting = fmt.Sprintf("this agent's sandbox policy (%s, narrower than tools.sandbox: %s)", mode, o.Sandbox)
	}
	switch mode {
	case sandbox.Full:
		return nil
	case sandbox.WorkspaceWrite:
		writable := sandbox.For(mode, cwd).Writable
		for _, d := range writable {
			if within(d, dest) {
				return nil
			}
			if real, err := realPath(d); err == nil && within(real, dest) {
				return nil
			}
		}
		return tool.Errorf(CodeSandbox, "%s: refused: %s is outside the sandbox: under %s files may be written only below %s; "+
			"writing there needs tools.sandbox: full, which only the user can set", name, destName(path, dest), setting, strings.Join(writable, ", "))
	}
	return tool.Errorf(CodeSandbox, "%s: refused: %s cannot be written: under %s no file may be written; "+
		"writing needs tools.sandbox: workspace-write or full, which only the user can set", name, destName(path, dest), setting)
}

// destName names path, and dest when a link makes it differ.
func destName(path, dest string) string {
	if path == dest {
		return path
	}
	return fmt.Sprintf("%s (→ %s)", path, dest)
}

// protected says why path, landing on dest, is never writable by a tool
// call working in cwd, or "" when it is not protected.
func (o Options) protected(cwd, path, dest string) (why string) {
	for _, p := range []string{path, dest} {
		if why := gitProtected(p); why != "" {
			return why
		}
	}
	for _, prot := range o.Protected {
		if prot == "" || !filepath.IsAbs(prot) {
			continue
		}
		prot = filepath.Clean(prot)
		real, err := realPath(prot)
		if err != nil {
			real = prot
		}
		if !within(prot, path) && !within(prot, dest) && !within(real, dest) {
			continue
		}
		if o.Worktrees != "" && o.inWorktree(cwd, dest) {
			continue
		}
		if fi, err := os.Stat(prot); err == nil && !fi.IsDir() {
			return "dsh's configuration file" // the most precise reason
		}
		why = cmp.Or(why, fmt.Sprintf("inside %s, which holds dsh's own files (configuration, sessions, agents)", prot))
	}
	return why
}

// inWorktree reports whether cwd lies in a worktree dsh made below
// o.Worktrees and dest is inside cwd: a worktree child writes its own tree.
func (o Options) inWorktree(cwd, dest string) bool {
	root := filepath.Clean(o.Worktrees)
	if real, err := realPath(root); err == nil {
		root = real
	}
	realCwd, err := realPath(cwd)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(root, realCwd)
	// A worktree is <root>/<repository folder>/<name>: two levels down.
	if err != nil || !within(root, realCwd) || len(strings.Split(rel, string(filepath.Separator))) < 2 {
		return false
	}
	return within(realCwd, dest)
}

// gitProtected says why p is a git file that no tool may write — a hook,
// which git runs, or git's configuration, which names commands git runs
// (core.fsmonitor, core.hooksPath, filters) — or "" when it is none: a
// .git file or folder's config or hooks/**, the same in any git directory
// (a linked worktree's, a common one, a submodule's), and a .git file
// (which says where the git directory is).
func gitProtected(p string) string {
	parts := strings.Split(filepath.Clean(p), string(filepath.Separator))
	for i, part := range parts {
		if part == ".git" && i == len(parts)-1 {
			return "a repository's .git, which tells git where its configuration and hooks are"
		}
		if i == 0 || (part != "hooks" && !(i == len(parts)-1 && isConfigName(part))) {
			continue
		}
		dir := string(filepath.Separator) + filepath.Join(parts[:i]...)
		if parts[i-1] != ".git" && !isGitDir(dir) {
			continue
		}
		if part == "hooks" {
			return "a git hook (" + filepath.Join(dir, "hooks") + "), which git runs"
		}
		return "git configuration (" + filepath.Join(dir, part) + "), which can make git run commands"
	}
	return ""
}

// isConfigName reports whether name is a git configuration file of a git
// directory.
func isConfigName(name string) bool { return name == "config" || name == "config.worktree" }

// isGitDir reports whether dir looks like a git directory: a HEAD file
// with an objects folder, or a commondir file (a linked worktree's).
func isGitDir(dir string) bool {
	if fi, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	for _, name := range []string{"objects", "commondir"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
