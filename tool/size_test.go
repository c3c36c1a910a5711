package tool

import (
	"context"
	"testing"
	"unsafe"
)

// Every agent has a Scope; most register no tools of their own and have
// no masks or layers, so the table of its own tools is made by its first
// Register and its specs cache by its first Specs that needs one: a Scope
// fits the allocator's 160-byte class, not the 208-byte one.
func TestScopeSize(t *testing.T) {
	if n := unsafe.Sizeof(Scope{}); n > 160 {
		t.Errorf("a tool Scope is %d bytes, want at most 160", n)
	}
	reg := NewRegistry()
	s := reg.NewScope()
	if s.local.Load() != nil || len(s.Specs()) != 0 || s.Has("x") {
		t.Fatal("a new scope has tools of its own")
	}
	if s.cached != nil {
		t.Fatal("a plain scope cached the registry's specs")
	}
	dispose, err := s.Register(Func("x", "x", true, func(context.Context, Call, struct{}) (Result, error) { return Result{}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Has("x") || len(s.Specs()) != 1 {
		t.Fatal("a registered tool is not in its scope")
	}
	dispose()
	if s.Has("x") || len(s.Specs()) != 0 {
		t.Fatal("a disposed tool is still in its scope")
	}
}
