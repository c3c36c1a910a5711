package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Children lists the live (not zombie) child processes of pid, each as
// "pid (command)", by reading /proc. Tests use it to prove nothing was left
// running.
func Children(pid int) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	parent := fmt.Sprint(pid)
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
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[0] != "Z" && f[1] == parent {
			out = append(out, s[:i+1])
		}
	}
	return out
}

// NoChildren reports the live child processes of this process as an error,
// or nil when there are none.
func NoChildren() error {
	if c := Children(os.Getpid()); len(c) > 0 {
		return fmt.Errorf("child processes left: %v", c)
	}
	return nil
}
