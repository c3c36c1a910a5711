// Package sandboxtest helps tests of commands run under the OS sandbox.
package sandboxtest

import (
	"os"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/sandbox"
)

// Require skips tb where the OS cannot enforce a sandbox.
func Require(tb testing.TB) {
	tb.Helper()
	if err := sandbox.Check(sandbox.ReadOnly); err != nil {
		tb.Skip(err)
	}
}

// OutsideDir returns a new directory, removed at the end of the test, that
// is neither a temporary directory nor the working directory of the
// commands under test: a sandboxed command may not write there. It skips
// tb when the package directory itself lies in a temporary directory.
func OutsideDir(tb testing.TB) string {
	tb.Helper()
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp(wd, ".sandbox-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	for _, tmp := range sandbox.TempDirs() {
		if strings.HasPrefix(dir, tmp+"/") {
			tb.Skipf("the package directory %s lies in a temporary directory", wd)
		}
	}
	return dir
}
