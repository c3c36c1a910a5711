package main

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The TUI's code highlighter adds next to nothing to the start of every
// dsh process (`dsh acp` children included): chroma's core and its regular
// expressions build no tables at init. chroma's lexers and styles packages
// do (~70,000 allocations, 20–50 ms; BENCHMARKS §5g), so dsh must not link
// them.
func TestInitTraceOfHighlighter(t *testing.T) {
	cmd := exec.Command(dshBinary, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dsh --version: %v\n%s", err, stderr.String())
	}
	var allocs, bytesAllocated int
	var seen []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		// init PKG @0.5 ms, 0.02 ms clock, 11056 bytes, 22 allocs
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" {
			continue
		}
		pkg := f[1]
		if !strings.HasPrefix(pkg, "github.com/alecthomas/chroma") && !strings.HasPrefix(pkg, "github.com/dlclark/regexp2") {
			continue
		}
		for _, heavy := range []string{"/lexers", "/styles", "/formatters", "/quick"} {
			if strings.HasPrefix(pkg, "github.com/alecthomas/chroma/v2"+heavy) {
				t.Errorf("dsh links %s, whose init builds a registry", pkg)
			}
		}
		b, _ := strconv.Atoi(f[7])
		a, _ := strconv.Atoi(f[9])
		bytesAllocated += b
		allocs += a
		seen = append(seen, pkg)
	}
	if len(seen) == 0 {
		t.Fatalf("no init of chroma in the trace:\n%s", stderr.String())
	}
	// Today: 105 allocations, 49 KB in chroma and regexp2.
	if allocs > 300 || bytesAllocated > 128<<10 {
		t.Errorf("the highlighter's packages allocate %d times, %d bytes at init (%v)", allocs, bytesAllocated, seen)
	}
}
