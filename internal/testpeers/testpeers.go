// Package testpeers locates the third-party programs the interop tests run
// against (installed by scripts/peers.sh from tools/peers/package.json).
package testpeers

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Path returns the absolute path of rel inside the peers folder named by
// $DSH_PEERS_DIR. When the peers or node are missing the test is skipped,
// except under CI (CI=true), where it fails: CI must run the interop tier.
func Path(t testing.TB, rel string) string {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("interop peers unavailable under CI: %s (run scripts/test.sh)", why)
		}
		t.Skipf("interop peers unavailable: %s (scripts/test.sh installs them)", why)
	}
	dir := os.Getenv("DSH_PEERS_DIR")
	if dir == "" {
		missing("DSH_PEERS_DIR is not set")
	}
	p := filepath.Join(dir, rel)
	if _, err := os.Stat(p); err != nil {
		missing(err.Error())
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node is not on PATH")
	}
	return p
}
