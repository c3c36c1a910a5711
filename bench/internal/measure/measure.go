// Package measure takes the per-batch readings the bench commands report:
// bytes and objects allocated (runtime.ReadMemStats, which flushes every
// P's cache, so the counts are exact) and the process's CPU time
// (getrusage), which a shared, noisy machine disturbs far less than wall
// time.
package measure

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Reading is a snapshot of the process's counters.
type Reading struct {
	TotalAlloc uint64 // bytes allocated so far
	Mallocs    uint64 // objects allocated so far
	NumGC      uint32
	CPU        time.Duration // user + system time of the process
}

// Read takes a reading. It stops the world briefly (ReadMemStats).
func Read() Reading {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Reading{TotalAlloc: ms.TotalAlloc, Mallocs: ms.Mallocs, NumGC: ms.NumGC, CPU: CPU()}
}

// CPU returns the process's user + system time.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Heap is the memory a set of live objects holds, after a forced GC.
type Heap struct {
	HeapAlloc  uint64 // bytes of live heap objects
	StackInuse uint64 // bytes of goroutine stacks
	Goroutines int
	RSS        uint64 // resident set size, from /proc/self/status (0 elsewhere)
}

// Settle forces garbage collection (twice, so that finalizers and the
// objects they free are gone too) and returns the live memory.
func Settle() Heap {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Heap{HeapAlloc: ms.HeapAlloc, StackInuse: ms.StackInuse, Goroutines: runtime.NumGoroutine(), RSS: RSS()}
}

// RSS returns the resident set size in bytes (Linux), or 0.
func RSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// LoadAvg returns the 1-minute load average (Linux), or -1.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
