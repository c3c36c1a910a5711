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

// Claude Code's tool names in an agent definition map to dsh's tools where
// dsh has one; the others are known (for the warning) or not.
func TestCounterpart(t *testing.T) {
	for _, tc := range []struct {
		claude, dsh string
		ok, known   bool
	}{
		{"Read", toolname.ReadFile, true, true},
		{"MultiEdit", toolname.EditFile, true, true},
		{"Agent", toolname.Subagent, true, true},
		{"Task", toolname.Subagent, true, true},
		{"TaskList", toolname.TaskList, true, true},
		{"TaskOutput", toolname.TaskOutput, true, true},
		{"BashOutput", toolname.TaskOutput, true, true},
		{"TaskStop", toolname.TaskKill, true, true},
		{"KillShell", toolname.TaskKill, true, true},
		{"SendMessage", toolname.SendMessage, true, true},
		{"ListAgents", toolname.ListAgents, true, true},
		{"TaskCreate", "", false, true},
		{"TeamCreate", "", false, true},
		{"Workflow", "", false, true},
		{"Monitor", "", false, true},
		{"WebFetch", "", false, true},
		{"WebSearch", "", false, true},
		{"NotebookEdit", "", false, true},
		{"TodoWrite", "", false, true},
		{"Raed", "", false, false},
		{"read_file", "", false, false},
	} {
		dsh, ok, known := toolname.Counterpart(tc.claude)
		if dsh != tc.dsh || ok != tc.ok || known != tc.known {
			t.Errorf("Counterpart(%q) = %q, %v, %v; want %q, %v, %v", tc.claude, dsh, ok, known, tc.dsh, tc.ok, tc.known)
		}
	}
}
