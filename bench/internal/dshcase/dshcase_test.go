package dshcase

import (
	"context"
	"testing"
)

// BenchmarkDelegation is compare's dsh case as a Go benchmark, for
// profiling: a fresh parent whose turn delegates once through the subagent
// tool, on a store that keeps nothing.
func BenchmarkDelegation(b *testing.B) {
	e, err := New(Options{Backend: NullBackend{}, Tool: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	cwd := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Delegation(context.Background(), cwd); err != nil {
			b.Fatal(err)
		}
	}
}
