package sandbox

import (
	"context"
	"slices"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, s := range []string{"", "read-only", "workspace-write", "full"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("Full"); err == nil {
		t.Error("ParseMode accepted a misspelt mode")
	}
}

// A child never gets more than its parent: the narrower mode wins, an
// unset one defers to the other, and an unknown one counts as read-only.
func TestNarrow(t *testing.T) {
	for _, tc := range []struct{ parent, child, want Mode }{
		{Full, ReadOnly, ReadOnly},
		{ReadOnly, Full, ReadOnly},
		{WorkspaceWrite, Full, WorkspaceWrite},
		{Full, WorkspaceWrite, WorkspaceWrite},
		{ReadOnly, WorkspaceWrite, ReadOnly},
		{"", Full, Full},
		{WorkspaceWrite, "", WorkspaceWrite},
		{"", "", ""},
		{Full, "wide-open", ReadOnly},
		{"bogus", Full, ReadOnly},
	} {
		if got := Narrow(tc.parent, tc.child); got != tc.want {
			t.Errorf("Narrow(%q, %q) = %q, want %q", tc.parent, tc.child, got, tc.want)
		}
	}
}

func TestContextNarrowsOnly(t *testing.T) {
	ctx := context.Background()
	if _, ok := FromContext(ctx); ok {
		t.Fatal("a mode in an empty context")
	}
	ctx = WithMode(ctx, WorkspaceWrite)
	ctx = WithMode(ctx, Full) // a grandchild asking for more
	if m, _ := FromContext(ctx); m != WorkspaceWrite {
		t.Fatalf("mode = %q, want workspace-write", m)
	}
	if m, _ := FromContext(WithMode(ctx, ReadOnly)); m != ReadOnly {
		t.Fatalf("mode = %q, want read-only", m)
	}
}

func TestFor(t *testing.T) {
	p := For(WorkspaceWrite, "/work/dir")
	if len(p.Writable) == 0 || p.Writable[0] != "/work/dir" || !slices.Contains(p.Writable, "/tmp") || !p.Restricted() {
		t.Fatalf("For(workspace-write) = %+v", p)
	}
	if p := For(ReadOnly, "/work/dir"); len(p.Writable) != 0 || !p.Restricted() {
		t.Fatalf("For(read-only) = %+v", p)
	}
	if p := For(Full, "/work/dir"); p.Restricted() {
		t.Fatalf("For(full) = %+v", p)
	}
	if err := (Policy{Mode: WorkspaceWrite, Writable: []string{"rel"}}).validate(); err == nil {
		t.Fatal("a relative writable directory passed")
	}
}
