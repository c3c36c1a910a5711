package codex_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/internal/proc"
)

func TestMain(m *testing.M) {
	// Re-exec branch: this test binary plays a fake `codex app-server`.
	if mode := os.Getenv(fakeEnv); mode != "" {
		fakeServer(mode)
		os.Exit(0)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func noChildren() error { return proc.NoChildren() }

// checkNoChildren fails t when a child process of the test remains.
func checkNoChildren(t *testing.T) {
	t.Helper()
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}
