// Package builtin provides the built-in tools every agent gets: bash,
// read_file, write_file, edit_file, glob and grep. Their names, and Claude
// Code's names for them, are in package tool/toolname, which the packages
// that only meet the names (hook, agentdef) import instead of this one.
package builtin

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
)

// Error codes of the built-in tools, besides those of package tool.
const (
	CodeExitStatus = "EXIT_STATUS" // bash: the command exited non-zero
	CodeTimeout    = "TIMEOUT"     // bash: the command ran out of time
	// CodeSandbox: a file tool was refused by the sandbox mode
	// in force (read-only, or a path outside workspace-write's writable set).
	CodeSandbox = "SANDBOX"
	// CodeProtected: write_file or edit_file was refused a path no tool may
	// write whatever the mode (Options.Protected, git hooks and git
	// configuration).
	CodeProtected = "PROTECTED"
)

// Defaults and limits of Options and of per-call arguments.
const (
	DefaultBashTimeout = 2 * time.Minute
	MaxBashTimeout     = 10 * time.Minute // cap of a per-call timeout_ms
	DefaultOutputLimit = tool.DefaultOutputLimit
)

// Options configures the built-in tools. Zero values take the defaults.
type Options struct {
	BashTimeout time.Duration // default timeout of a bash call
	OutputLimit int           // cap in bytes of one tool result's text
	// Sandbox is where bash commands, write_file and edit_file may write
	// (default sandbox.Default, workspace-write); a call's context may
	// narrow it (sandbox.WithMode), never widen it.
	Sandbox sandbox.Mode
	// Protected are absolute files and directories write_file and edit_file
	// never write, whatever the mode: dsh's configuration file and
	// $DSH_HOME. Git hooks and git configuration are always protected.
	Protected []string
	// Worktrees is the directory inside Protected that holds the worktrees
	// dsh makes ($DSH_HOME/worktrees): a call working in one of them may
	// write its own working directory.
	Worktrees string
	// Network is whether bash commands may use the network (default
	// allow).
	Network sandbox.Network
	// Redact, when set, rewrites the text of every result and error (dsh
	// removes the credentials it holds).
	Redact func(string) string
}

func (o Options) withDefaults() Options {
	if o.BashTimeout <= 0 {
		o.BashTimeout = DefaultBashTimeout
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}
	o.Sandbox = o.Sandbox.Or(sandbox.Default)
	return o
}

// Tools returns the built-in tool definitions.
func Tools(opts Options) []tool.Definition {
	opts = opts.withDefaults()
	return redacted(opts.Redact, bashTool(opts, &gitGuard{}), readFileTool(opts, nil), writeFileTool(opts, nil), editFileTool(opts, nil), globTool(opts), grepTool(opts))
}

// Register adds every built-in tool to r as a global tool. It is
// all-or-nothing: on an error the tools it registered are removed again.
// dispose removes them all.
func Register(r *tool.Registry, opts Options) (dispose func(), err error) {
	var disposers []func()
	dispose = func() {
		for _, d := range slices.Backward(disposers) {
			d()
		}
	}
	for _, def := range Tools(opts) {
		d, err := r.Register(def)
		if err != nil {
			dispose()
			return nil, err
		}
		disposers = append(disposers, d)
	}
	return dispose, nil
}

// resolve makes p absolute against cwd, or the process working directory
// when cwd is empty.
func resolve(cwd, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	return filepath.Join(cwd, p)
}

// statErr turns a failed stat or open of path into a message for the model.
func statErr(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return tool.Errorf(tool.CodeFailed, "%s does not exist", path)
	}
	return tool.Errorf(tool.CodeFailed, "cannot access %s: %v", path, err)
}

// writeAtomic replaces path with data through a temporary file in the same
// directory, keeping the mode of an existing file and writing through a
// symlink to its target.
func writeAtomic(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return tool.Errorf(tool.CodeFailed, "%s is a directory", path)
		}
		mode = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return tool.Errorf(tool.CodeFailed, "cannot create directory %s: %v", dir, err)
	}
	removeStaleTemps(dir, filepath.Base(path))
	f, err := os.CreateTemp(dir, tempPrefix(filepath.Base(path), os.Getpid())+"*")
	if err != nil {
		return tool.Errorf(tool.CodeFailed, "cannot write %s: %v", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return tool.Errorf(tool.CodeFailed, "cannot write %s: %v", path, err)
	}
	return nil
}

// tempPrefix begins the name of the temporary file through which process
// pid writes the file named base: hidden, and recognisable as dsh's.
func tempPrefix(base string, pid int) string {
	return "." + base + ".dsh-tmp-" + strconv.Itoa(pid) + "-"
}

// removeStaleTemps removes the temporary files of writes to dir/base that
// a process no longer running left behind (a dsh killed mid-write).
func removeStaleTemps(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + base + ".dsh-tmp-"
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		if pid, err := strconv.Atoi(pidText); err == nil && pid > 0 && pid != os.Getpid() && !running(pid) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// running reports whether process pid may still be running: only a
// process known to be gone counts as not running.
func running(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH)
}

// truncLine cuts s to at most n bytes on a rune boundary, marking the cut.
func truncLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// lines accumulates output lines up to a byte limit.
type lines struct {
	strings.Builder
	limit int
}

// add appends line and a newline, or reports false when that would exceed
// the limit.
func (b *lines) add(line string) bool {
	if b.Len()+len(line)+1 > b.limit {
		return false
	}
	b.WriteString(line)
	b.WriteByte('\n')
	return true
}
