package toolname_test

import (
	"testing"

	"github.com/dsh-go/dsh/tool/toolname"
)

// Every built-in tool has a Claude Code name, and the mapping is a
// bijection: FromClaude inverts Claude, and no other name maps.
func TestClaudeRoundTrip(t *testing.T) {
	seen := map[string]string{}
	for _, n := range toolname.Builtin() {
		c := toolname.Claude(n)
		if c == "" {
			t.Fatalf("Claude(%q) is empty", n)
		}
		if prev, dup := seen[c]; dup {
			t.Fatalf("Claude(%q) = Claude(%q) = %q", n, prev, c)
		}
		seen[c] = n
		if back, ok := toolname.FromClaude(c); !ok || back != n {
			t.Fatalf("FromClaude(%q) = %q, %v; want %q", c, back, ok, n)
		}
	}
	for _, name := range []string{"", "read", "Read", "subagent", "WebFetch"} {
		if got := toolname.Claude(name); got != "" {
			t.Errorf("Claude(%q) = %q, want none", name, got)
		}
	}
	for _, name := range []string{"", "read_file", "read", "WebFetch", "Task"} {
		if got, ok := toolname.FromClaude(name); ok {
			t.Errorf("FromClaude(%q) = %q, want none", name, got)
		}
	}
}
