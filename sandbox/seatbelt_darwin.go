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

// CheckNetwork reports whether this system can enforce n: nil for allow
// and unset, and where sandbox-exec exists.
func CheckNetwork(n Network) error {
	if n != NetworkDeny {
		return nil
	}
	if _, err := os.Stat(sandboxExec); err != nil {
		return fmt.Errorf("sandbox: %s is missing, so network %s cannot be enforced", sandboxExec, n)
	}
	return nil
}

// RestrictThread only validates p on macOS: Command wraps the program in
// sandbox-exec instead.
func (p Policy) RestrictThread() error { return p.validate() }

// Command returns the program and arguments that run argv (argv[0]
// included) under p: sandbox-exec with a profile that allows everything
// but writing outside the devices and, under WorkspaceWrite, p.Writable;
// reading p.Unreadable; and, with NetworkDeny, IP traffic. The program sees
// path as its argv[0].
func (p Policy) Command(path string, argv []string) (string, []string) {
	if !p.Restricted() {
		return path, argv
	}
	var profile strings.Builder
	profile.WriteString("(version 1)\n(allow default)\n")
	args := []string{sandboxExec}
	param := func(prefix string, i int, d string) string {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			d = real // Seatbelt matches resolved paths (/tmp is /private/tmp)
		}
		name := fmt.Sprintf("%s%d", prefix, i)
		args = append(args, "-D", name+"="+d)
		return name
	}
	if p.restrictsFiles() {
		profile.WriteString("(deny file-write*)\n(allow file-write*")
		for _, d := range devices() {
			fmt.Fprintf(&profile, " (literal %q)", d)
		}
		profile.WriteString(` (regex #"^/dev/fd/") (regex #"^/dev/ttys"))` + "\n")
		if p.Mode == WorkspaceWrite {
			for i, d := range p.Writable {
				fmt.Fprintf(&profile, "(allow file-write* (subpath (param %q)))\n", param("W", i, d))
			}
		}
		for i, d := range p.Unreadable { // last, so that they win over the allows
			fmt.Fprintf(&profile, "(deny file-read* file-write* (subpath (param %q)))\n", param("R", i, d))
		}
	}
	if p.Network == NetworkDeny {
		profile.WriteString("(deny network-outbound (remote ip))\n(deny network-bind (local ip))\n(deny network-inbound (local ip))\n")
	}
	args = append(args, "-p", profile.String(), path)
	return sandboxExec, append(args, argv[1:]...)
}
