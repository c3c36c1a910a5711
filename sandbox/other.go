//go:build !linux && !darwin

package sandbox

import (
	"fmt"
	"runtime"
)

// Check reports whether this system can enforce m: only Full and unset
// modes can be honoured here.
func Check(m Mode) error {
	if !(Policy{Mode: m}).Restricted() {
		return nil
	}
	return fmt.Errorf("sandbox: %s cannot be enforced on %s", m, runtime.GOOS)
}

// CheckNetwork reports whether this system can enforce n: only allow and
// unset can be honoured here.
func CheckNetwork(n Network) error {
	if n != NetworkDeny {
		return nil
	}
	return fmt.Errorf("sandbox: network %s cannot be enforced on %s", n, runtime.GOOS)
}

// RestrictThread only validates p: nothing can be enforced here.
func (p Policy) RestrictThread() error { return p.validate() }

// Command returns path and argv unchanged.
func (p Policy) Command(path string, argv []string) (string, []string) { return path, argv }
