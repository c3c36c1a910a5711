package codex_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
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

// children lists the live (non-zombie) processes whose parent is this test.
func children() []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[0] != "Z" && f[1] == fmt.Sprint(os.Getpid()) {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}

func noChildren() error {
	if c := children(); len(c) > 0 {
		return fmt.Errorf("child processes left: %v", c)
	}
	return nil
}

// checkNoChildren fails t when a child process of the test remains.
func checkNoChildren(t *testing.T) {
	t.Helper()
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}
