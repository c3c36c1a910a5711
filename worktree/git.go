package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/sandbox"
)

// gitStderrTail bounds the stderr a failure quotes.
const gitStderrTail = 4096

// safety returns the configuration every git command of this package runs
// with, whatever the repository says: no hooks (post-checkout,
// reference-transaction…), no file system monitor, no submodule recursion
// and no automatic garbage collection. The repository and its checkout
// are the agent's to write, so anything they could make git run is off.
func safety() [][2]string {
	return [][2]string{
		{"core.hooksPath", "/dev/null"},
		{"core.fsmonitor", "false"},
		{"submodule.recurse", "false"},
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
	}
}

// runner runs dsh's own git commands: hardened (see safety; the
// repository's filters, which git runs on checkout and status, are
// switched off one by one, see filterOff), with the
// scrubbed environment of child processes (internal/proc), and under a
// sandbox. Commands that only read run read-only; those that change the
// repository's worktrees may write only its common git folder and the
// worktrees root. A mode of Full (configured, or narrowed from the call's
// context) runs them unrestricted but still hardened.
type runner struct {
	mode    sandbox.Mode
	network sandbox.Network
	root    string // the worktrees root; "" for a runner that only reads
}

// policy is the sandbox of a command; writable lists the folders a
// command that changes the repository writes, nil for one that reads.
func (r runner) policy(ctx context.Context, writable []string) sandbox.Policy {
	mode := r.mode.Or(sandbox.Default)
	if m, ok := sandbox.FromContext(ctx); ok {
		mode = sandbox.Narrow(mode, m)
	}
	p := sandbox.Policy{Mode: sandbox.Full, Network: r.network}
	if mode == sandbox.Full {
		return p
	}
	p.Mode, p.Unreadable = sandbox.ReadOnly, sandbox.Unreadable(os.Getenv)
	if writable != nil {
		p.Mode, p.Writable = sandbox.WorkspaceWrite, writable
	}
	return p
}

// read runs a git command that only reads the repository at dir.
func (r runner) read(ctx context.Context, dir string, args ...string) (string, error) {
	return r.run(ctx, dir, r.policy(ctx, nil), args...)
}

// change runs a git command that changes the worktrees of the repository
// at dir: its common git folder and the worktrees root are writable.
func (r runner) change(ctx context.Context, dir string, args ...string) (string, error) {
	common, err := r.read(ctx, dir, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(common) { // relative to dir
		common = filepath.Join(dir, common)
	}
	writable := []string{common}
	if r.root != "" {
		writable = append(writable, r.root)
	}
	return r.run(ctx, dir, r.policy(ctx, writable), args...)
}

// run runs git in dir under p with the safety settings and the
// repository's filters off, and returns its trimmed stdout; a failure says
// what git said.
func (r runner) run(ctx context.Context, dir string, p sandbox.Policy, args ...string) (string, error) {
	filters, err := r.exec(ctx, dir, p, nil, "config", "-z", "--show-scope", "--name-only", "--get-regexp", `^filter\.`)
	if err != nil && !isExit(err, 1) { // 1: no filter configured
		return "", r.fail(args, err)
	}
	out, err := r.exec(ctx, dir, p, filterOff(filters), args...)
	if err != nil {
		return "", r.fail(args, err)
	}
	return strings.TrimSpace(out), nil
}

// filterOff is the configuration that switches off every filter that the
// repository's own configuration (any scope but the user's global and the
// system's, includes counted where they are included) names in the
// listing, NUL-separated scope and key (filter.<name>.<variable>) pairs:
// no clean, smudge or process command, and none required. A filter only
// the user configured (git-lfs in ~/.gitconfig) keeps working, unless the
// repository redefines any of it.
func filterOff(listing string) [][2]string {
	fields := strings.Split(listing, "\x00")
	repo := map[string]bool{}
	var names []string
	for i := 0; i+1 < len(fields); i += 2 {
		scope, key := fields[i], fields[i+1]
		j, k := strings.IndexByte(key, '.'), strings.LastIndexByte(key, '.')
		if j < 0 || k <= j || scope == "system" || scope == "global" {
			continue
		}
		if name := key[j+1 : k]; !repo[name] {
			repo[name] = true
			names = append(names, name)
		}
	}
	var out [][2]string
	for _, name := range names {
		for _, v := range []string{"clean", "smudge", "process"} {
			out = append(out, [2]string{"filter." + name + "." + v, ""})
		}
		out = append(out, [2]string{"filter." + name + ".required", "false"})
	}
	return out
}

// gitError is a git command that failed: its exit error and stderr.
type gitError struct {
	err    error
	stderr string
}

func (e *gitError) Error() string { return e.err.Error() }

func (e *gitError) Unwrap() error { return e.err }

// isExit reports whether err is git exiting with code.
func isExit(err error, code int) bool {
	var ee *proc.ExitError
	return errors.As(err, &ee) && ee.Code == code
}

// fail is the package error of a failed git command.
func (runner) fail(args []string, err error) error {
	msg := err.Error()
	if ge := (*gitError)(nil); errors.As(err, &ge) && strings.TrimSpace(ge.stderr) != "" {
		msg = strings.TrimSpace(ge.stderr)
	}
	return &Error{Code: CodeGit, Msg: fmt.Sprintf("git %s: %s", strings.Join(args[:min(len(args), 2)], " "), msg)}
}

// exec runs git once and returns its stdout.
func (r runner) exec(ctx context.Context, dir string, p sandbox.Policy, extra [][2]string, args ...string) (string, error) {
	config := append(safety(), extra...)
	// GIT_CONFIG_PARAMETERS (git -c) would win over GIT_CONFIG_COUNT.
	env := []string{"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C", "GIT_CONFIG_PARAMETERS=", "GIT_CONFIG_COUNT=" + strconv.Itoa(len(config))}
	for i, kv := range config {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	pr, err := proc.Start(proc.Spec{Path: "git", Args: args, Dir: dir, Env: env, StderrTail: gitStderrTail, Sandbox: p})
	if err != nil {
		return "", err
	}
	pr.Stdin().Close()
	var stdout bytes.Buffer
	copied := make(chan struct{})
	go func() {
		io.Copy(&stdout, pr.Stdout())
		close(copied)
	}()
	select {
	case <-pr.Done():
	case <-ctx.Done():
	}
	pr.Stop(0, 0)
	<-copied
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := pr.Err(); err != nil {
		return "", &gitError{err: err, stderr: pr.StderrTail()}
	}
	return stdout.String(), nil
}
