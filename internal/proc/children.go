package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Children lists the live (not zombie) child processes of pid, each as
// "pid (command)", by reading /proc (empty where there is none). Tests use
// it to prove nothing was left running.
func Children(pid int) []string {
	var out []string
	for _, c := range scanChildren(pid) {
		out = append(out, c.stat)
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

type child struct {
	pid  int
	stat string // "pid (command)"
}

// scanChildren finds the live children of pid in /proc.
func scanChildren(pid int) []child {
	var out []child
	entries, _ := os.ReadDir("/proc")
	parent := strconv.Itoa(pid)
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[0] != "Z" && f[0] != "X" && f[1] == parent {
			out = append(out, child{pid: n, stat: s[:i+1]})
		}
	}
	return out
}
