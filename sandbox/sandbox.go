// Package sandbox says where the commands dsh runs may write, what they may
// not read and whether they may use the network, and has the kernel
// enforce it: Landlock on Linux, sandbox-exec (Seatbelt) on macOS.
//
// Three modes, from narrowest to widest: ReadOnly (no writes anywhere but
// /dev/null and its kin), WorkspaceWrite (writes only under the session's
// working directory and the temporary directories) and Full (no
// restriction). Default is WorkspaceWrite. Under ReadOnly and
// WorkspaceWrite the user's credential stores and dsh's session logs are
// not readable either (Unreadable). A child can narrow its parent's mode,
// never widen it (Narrow); the kernel enforces the same, since a sandboxed
// process cannot leave its sandbox and everything it starts inherits it.
// The network is a separate setting: NetworkDeny refuses TCP connections
// and listening sockets, whatever the mode.
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
	"strings"
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

// Network says whether commands may use the network. The zero value is
// unset and means Allow.
type Network string

// Network settings.
const (
	NetworkAllow Network = "allow" // no restriction (the default)
	// NetworkDeny refuses TCP connect and bind (Landlock ABI 4 and later;
	// UDP too from ABI 10; Seatbelt refuses all IP traffic).
	NetworkDeny Network = "deny"
)

// ParseNetwork checks s: allow, deny or "" (unset).
func ParseNetwork(s string) (Network, error) {
	switch n := Network(s); n {
	case "", NetworkAllow, NetworkDeny:
		return n, nil
	}
	return "", fmt.Errorf("unknown network setting %q (want %s or %s)", s, NetworkAllow, NetworkDeny)
}

// Policy is a mode applied to one command.
type Policy struct {
	Mode Mode `json:"mode,omitempty"`
	// Writable are the directories WorkspaceWrite lets the command write
	// under (absolute paths; missing ones are skipped).
	Writable []string `json:"writable,omitempty"`
	// Unreadable are the files and directories a ReadOnly or
	// WorkspaceWrite command may not read (absolute paths; missing ones
	// are skipped), even where it may write (see Unreadable).
	Unreadable []string `json:"unreadable,omitempty"`
	// Network, when NetworkDeny, refuses the command TCP connections and
	// listening sockets, in every mode.
	Network Network `json:"network,omitempty"`
}

// For returns the policy of mode m for a command working in cwd: under
// WorkspaceWrite, cwd, the temporary directories and, when cwd lies in a
// linked git worktree, the parts of its repository a commit writes
// (GitDirs) are writable; under ReadOnly and WorkspaceWrite the credential
// stores of Unreadable are not readable. The network is allowed: set
// Policy.Network to deny it.
func For(m Mode, cwd string) Policy {
	p := Policy{Mode: m.known()}
	if p.Mode == WorkspaceWrite {
		add := func(d string) {
			if !slices.Contains(p.Writable, d) {
				p.Writable = append(p.Writable, d)
			}
		}
		if cwd != "" {
			add(cwd)
			for _, d := range GitDirs(cwd) {
				add(d)
			}
		}
		for _, d := range TempDirs() {
			add(d)
		}
	}
	if p.Mode == WorkspaceWrite || p.Mode == ReadOnly {
		p.Unreadable = Unreadable(os.Getenv)
	}
	return p
}

// WithNetwork returns p with network setting n.
func (p Policy) WithNetwork(n Network) Policy {
	p.Network = n
	return p
}

// Unreadable returns what ReadOnly and WorkspaceWrite commands may not
// read: the user's credential stores under $HOME — ~/.ssh, ~/.aws,
// ~/.config/gcloud, ~/.azure, ~/.kube, ~/.gnupg, ~/.docker, ~/.netrc,
// ~/.git-credentials, ~/.npmrc, ~/.pypirc, ~/.config/gh — and dsh's session
// logs, $DSH_HOME/sessions (DSH_HOME defaults to ~/.dsh). getenv reads
// HOME and DSH_HOME; an unset HOME leaves its entries out.
func Unreadable(getenv func(string) string) []string {
	var out []string
	home := getenv("HOME")
	if filepath.IsAbs(home) {
		for _, rel := range []string{".ssh", ".aws", ".config/gcloud", ".azure", ".kube", ".gnupg", ".docker",
			".netrc", ".git-credentials", ".npmrc", ".pypirc", ".config/gh"} {
			out = append(out, filepath.Join(home, rel))
		}
	}
	dshHome := getenv("DSH_HOME")
	if dshHome == "" && filepath.IsAbs(home) {
		dshHome = filepath.Join(home, ".dsh")
	}
	if filepath.IsAbs(dshHome) {
		out = append(out, filepath.Join(dshHome, "sessions"))
	}
	return out
}

// MayRead reports whether a command under p may read path (absolute): not
// when it, or the file it resolves to, lies in one of p.Unreadable. Tools
// that read files for the model (read_file, grep, glob) ask it, so that
// they refuse what the kernel refuses to commands.
func (p Policy) MayRead(path string) bool {
	if len(p.Unreadable) == 0 {
		return true
	}
	paths := []string{filepath.Clean(path)}
	if r, err := filepath.EvalSymlinks(path); err == nil {
		paths = append(paths, r)
	}
	for _, d := range p.Unreadable {
		denied := []string{filepath.Clean(d)}
		if r, err := filepath.EvalSymlinks(d); err == nil {
			denied = append(denied, r)
		}
		for _, path := range paths {
			for _, d := range denied {
				if path == d || strings.HasPrefix(path, d+string(filepath.Separator)) {
					return false
				}
			}
		}
	}
	return true
}

// Restricted reports whether p restricts anything.
func (p Policy) Restricted() bool { return p.restrictsFiles() || p.Network == NetworkDeny }

// restrictsFiles reports whether p's mode restricts file access.
func (p Policy) restrictsFiles() bool { return p.Mode != "" && p.Mode != Full }

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
	if _, err := ParseNetwork(string(p.Network)); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	for _, d := range p.Writable {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("sandbox: writable directory %q is not absolute", d)
		}
	}
	for _, d := range p.Unreadable {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("sandbox: unreadable path %q is not absolute", d)
		}
	}
	return nil
}
