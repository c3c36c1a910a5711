// Package sandbox says where the commands dsh runs may write, and has the
// kernel enforce it: Landlock on Linux, sandbox-exec (Seatbelt) on macOS.
//
// Three modes, from narrowest to widest: ReadOnly (no writes anywhere but
// /dev/null and its kin), WorkspaceWrite (writes only under the session's
// working directory and the temporary directories) and Full (no
// restriction). Default is WorkspaceWrite. A child can narrow its parent's
// mode, never widen it (Narrow); the kernel enforces the same, since a
// sandboxed process cannot leave its sandbox and everything it starts
// inherits it.
//
// Enforcement happens in the process that starts the command, right before
// exec, on a dedicated OS thread (RestrictThread) — never on dsh's own
// threads. Where the kernel cannot enforce a mode (Linux without Landlock,
// other systems), Check says so and the command runs unrestricted; dsh
// warns once at start-up.
package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Mode is how far commands may write. The zero value is unset: it takes
// whatever a wider scope decides (see Narrow and Or).
type Mode string

// Modes, from narrowest to widest.
const (
	ReadOnly       Mode = "read-only"       // no writes but to /dev/null and the like
	WorkspaceWrite Mode = "workspace-write" // writes only in the working directory and temporary directories
	Full           Mode = "full"            // no restriction
	// Default is the mode of commands when nothing else is configured.
	Default = WorkspaceWrite
)

// ParseMode checks s: one of the modes, or "" (unset).
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if m != "" && m.rank() < 0 {
		return "", fmt.Errorf("unknown sandbox mode %q (want %s, %s or %s)", s, ReadOnly, WorkspaceWrite, Full)
	}
	return m, nil
}

// rank orders the modes by how much they allow; unset and unknown modes
// rank -1.
func (m Mode) rank() int {
	switch m {
	case ReadOnly:
		return 0
	case WorkspaceWrite:
		return 1
	case Full:
		return 2
	}
	return -1
}

// Or returns m, or def when m is unset.
func (m Mode) Or(def Mode) Mode {
	if m == "" {
		return def
	}
	return m
}

// Narrow returns the mode a child runs in when its parent runs in parent
// and the child asks for child: the narrower of the two. An unset mode
// leaves the other in force; an unknown one counts as ReadOnly, so that a
// typo never widens anything.
func Narrow(parent, child Mode) Mode {
	switch {
	case parent == "":
		return child.known()
	case child == "":
		return parent.known()
	}
	parent, child = parent.known(), child.known()
	if child.rank() < parent.rank() {
		return child
	}
	return parent
}

// known maps an unknown non-empty mode to ReadOnly.
func (m Mode) known() Mode {
	if m != "" && m.rank() < 0 {
		return ReadOnly
	}
	return m
}

type ctxKey struct{}

// WithMode returns a context whose commands run at most in mode m: the
// mode in ctx, if any, is narrowed by m. Tools that run commands read it
// with FromContext; a delegation's permission policy sets it for a child.
func WithMode(ctx context.Context, m Mode) context.Context {
	if prev, ok := FromContext(ctx); ok {
		m = Narrow(prev, m)
	}
	return context.WithValue(ctx, ctxKey{}, m.known())
}

// FromContext returns the mode set by WithMode, if any.
func FromContext(ctx context.Context) (Mode, bool) {
	m, ok := ctx.Value(ctxKey{}).(Mode)
	return m, ok
}

// Policy is a mode applied to one command.
type Policy struct {
	Mode Mode `json:"mode,omitempty"`
	// Writable are the directories WorkspaceWrite lets the command write
	// under (absolute paths; missing ones are skipped).
	Writable []string `json:"writable,omitempty"`
}

// For returns the policy of mode m for a command working in cwd: under
// WorkspaceWrite, cwd and the temporary directories are writable.
func For(m Mode, cwd string) Policy {
	p := Policy{Mode: m.known()}
	if p.Mode == WorkspaceWrite {
		if cwd != "" {
			p.Writable = append(p.Writable, cwd)
		}
		for _, d := range TempDirs() {
			if !slices.Contains(p.Writable, d) {
				p.Writable = append(p.Writable, d)
			}
		}
	}
	return p
}

// Restricted reports whether p restricts anything.
func (p Policy) Restricted() bool { return p.Mode != "" && p.Mode != Full }

// TempDirs are the temporary directories WorkspaceWrite leaves writable:
// $TMPDIR (os.TempDir), /tmp, /var/tmp and /dev/shm, those that exist.
func TempDirs() []string {
	var out []string
	for _, d := range []string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm"} {
		d = filepath.Clean(d)
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// devices are the character devices every mode may open for writing.
func devices() []string { return []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"} }

// validate checks p before it is applied.
func (p Policy) validate() error {
	if p.Mode != "" && p.Mode.rank() < 0 {
		return fmt.Errorf("sandbox: unknown mode %q", p.Mode)
	}
	for _, d := range p.Writable {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("sandbox: writable directory %q is not absolute", d)
		}
	}
	return nil
}
