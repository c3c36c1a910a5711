package tool_test

import (
	"slices"
	"testing"

	"github.com/dsh-go/dsh/tool"
)

// Patterns in a restriction match tools by glob, those of layers and
// globals registered later included; a malformed pattern is refused.
func TestRestrictPatterns(t *testing.T) {
	r := tool.NewRegistry()
	for _, n := range []string{"read", "bash", "mcp__fs__read", "mcp__fs__write", "mcp__web__fetch"} {
		mustRegister(t, r.Register, echo(n, n))
	}
	allow := r.NewScope()
	if _, err := allow.Restrict(tool.Restriction{Allow: []string{"read", "mcp__fs__*"}}); err != nil {
		t.Fatal(err)
	}
	deny := r.NewScope()
	if _, err := deny.Restrict(tool.Restriction{Deny: []string{"mcp__*__write", "bash"}}); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r.Register, echo("mcp__fs__list", "late"))
	if got, want := specNames(allow), []string{"mcp__fs__list", "mcp__fs__read", "mcp__fs__write", "read"}; !slices.Equal(got, want) {
		t.Errorf("allow sees %v, want %v", got, want)
	}
	if got, want := specNames(deny), []string{"mcp__fs__list", "mcp__fs__read", "mcp__web__fetch", "read"}; !slices.Equal(got, want) {
		t.Errorf("deny sees %v, want %v", got, want)
	}
	res, _ := exec(t, allow, "mcp__web__fetch", "")
	wantError(t, res, tool.CodeUnknownTool, "Error: unknown tool")
	res, _ = exec(t, deny, "mcp__fs__write", "")
	wantError(t, res, tool.CodeUnknownTool, "Error: unknown tool")

	if _, err := r.NewScope().Restrict(tool.Restriction{Deny: []string{"mcp__[fs"}}); err == nil {
		t.Error("a malformed pattern was accepted")
	}
	// A pattern that matches nothing yet is fine: its tools may come later.
	if _, err := r.NewScope().Restrict(tool.Restriction{Allow: []string{"mcp__later__*"}}); err != nil {
		t.Errorf("pattern matching nothing refused: %v", err)
	}
}

// A layer's tools show in the scopes that have it, masked like globals,
// shadowing globals of the same name; a later layer shadows an earlier one.
func TestLayers(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("read", "global read"))
	mustRegister(t, r.Register, echo("mcp__s__x", "global x"))
	first, second := tool.NewLayer(), tool.NewLayer()
	mustRegister(t, first.Register, echo("mcp__s__x", "first x"))
	mustRegister(t, first.Register, echo("mcp__s__y", "first y"))
	mustRegister(t, second.Register, echo("mcp__s__y", "second y"))
	if _, err := second.Register(echo("mcp__s__y", "dup")); err == nil {
		t.Error("duplicate in a layer accepted")
	}

	s := r.NewScope()
	if got := specNames(s); !slices.Equal(got, []string{"mcp__s__x", "read"}) {
		t.Fatalf("before layers: %v", got)
	}
	remove := s.AddLayers(first, second)
	if got := specNames(s); !slices.Equal(got, []string{"mcp__s__x", "mcp__s__y", "read"}) {
		t.Errorf("with layers: %v", got)
	}
	if _, text := exec(t, s, "mcp__s__x", ""); text != "first x" {
		t.Errorf("x runs %q, want the layer's", text)
	}
	if _, text := exec(t, s, "mcp__s__y", ""); text != "second y" {
		t.Errorf("y runs %q, want the later layer's", text)
	}
	if got := s.Layers(); len(got) != 2 || got[0] != first || got[1] != second {
		t.Errorf("Layers() = %v", got)
	}

	// A child scope given the same layers sees the same tools; a filter
	// naming a layer tool exactly is accepted and masks it.
	child := r.NewScope()
	child.AddLayers(s.Layers()...)
	if _, err := child.Restrict(tool.Restriction{Deny: []string{"mcp__s__y"}}); err != nil {
		t.Fatal(err)
	}
	if got := specNames(child); !slices.Equal(got, []string{"mcp__s__x", "read"}) {
		t.Errorf("child sees %v", got)
	}
	// A tool added to a layer later reaches every scope that has it.
	mustRegister(t, first.Register, echo("mcp__s__z", "z"))
	if !s.Has("mcp__s__z") || !child.Has("mcp__s__z") {
		t.Error("a later layer tool is not visible")
	}

	remove()
	if got := specNames(s); !slices.Equal(got, []string{"mcp__s__x", "read"}) {
		t.Errorf("after removal: %v", got)
	}
	if _, text := exec(t, s, "mcp__s__x", ""); text != "global x" {
		t.Errorf("x runs %q after removal", text)
	}
}
