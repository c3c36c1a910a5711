package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sandboxExec is the Seatbelt front end of macOS.
const sandboxExec = "/usr/bin/sandbox-exec"

// Check reports whether this system can enforce m: nil for Full and unset
// modes, and where sandbox-exec exists.
func Check(m Mode) error {
	if !(Policy{Mode: m}).Restricted() {
		return nil
	}
	if _, err := os.Stat(sandboxExec); err != nil {
		return fmt.Errorf("sandbox: %s is missing, so %s cannot be enforced", sandboxExec, m)
	}
	return nil
}

// RestrictThread only validates p on macOS: Command wraps the program in
// sandbox-exec instead.
func (p Policy) RestrictThread() error { return p.validate() }

// Command returns the program and arguments that run argv (argv[0]
// included) under p: sandbox-exec with a profile that allows everything
// but writing outside the devices and, under WorkspaceWrite, p.Writable.
// The program sees path as its argv[0].
func (p Policy) Command(path string, argv []string) (string, []string) {
	if !p.Restricted() {
		return path, argv
	}
	var profile strings.Builder
	profile.WriteString("(version 1)\n(allow default)\n(deny file-write*)\n(allow file-write*")
	for _, d := range devices() {
		fmt.Fprintf(&profile, " (literal %q)", d)
	}
	profile.WriteString(` (regex #"^/dev/fd/") (regex #"^/dev/ttys"))` + "\n")
	args := []string{sandboxExec}
	if p.Mode == WorkspaceWrite {
		for i, d := range p.Writable {
			if real, err := filepath.EvalSymlinks(d); err == nil {
				d = real // Seatbelt matches resolved paths (/tmp is /private/tmp)
			}
			fmt.Fprintf(&profile, "(allow file-write* (subpath (param \"W%d\")))\n", i)
			args = append(args, "-D", fmt.Sprintf("W%d=%s", i, d))
		}
	}
	args = append(args, "-p", profile.String(), path)
	return sandboxExec, append(args, argv[1:]...)
}
