// Package dshbin builds the dsh command for tests that run it as a separate
// process (ACP children, third-party clients).
package dshbin

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Build compiles github.com/dsh-go/dsh/cmd/dsh into dir and returns the
// executable's path. Test binaries call it once, from TestMain.
func Build(dir string) (string, error) {
	path := filepath.Join(dir, "dsh")
	if out, err := exec.Command("go", "build", "-o", path, "github.com/dsh-go/dsh/cmd/dsh").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building dsh: %v\n%s", err, out)
	}
	return path, nil
}
