// Package toolname names dsh's built-in tools and maps them to Claude
// Code's names for the same tools. It is the vocabulary shared by the
// packages that meet these names without running the tools (hook matchers,
// agent definitions) and by tool/builtin, which defines the tools: it sits
// below all of them and imports nothing.
package toolname

// The names of the built-in tools (package tool/builtin).
const (
	Bash      = "bash"
	ReadFile  = "read_file"
	WriteFile = "write_file"
	EditFile  = "edit_file"
	Glob      = "glob"
	Grep      = "grep"
)

// Builtin returns the names of the built-in tools, in a fixed order.
func Builtin() []string {
	return []string{Bash, ReadFile, WriteFile, EditFile, Glob, Grep}
}

// Claude returns Claude Code's name for the built-in tool name ("Read" for
// read_file), or "" when Claude Code has no counterpart. Claude Code's
// subagent definitions list tools, and its hooks match them, by these names.
func Claude(name string) string {
	switch name {
	case Bash:
		return "Bash"
	case ReadFile:
		return "Read"
	case WriteFile:
		return "Write"
	case EditFile:
		return "Edit"
	case Glob:
		return "Glob"
	case Grep:
		return "Grep"
	}
	return ""
}

// FromClaude returns the built-in tool that Claude Code's tool name names
// (read_file for "Read"); ok is false when it names none.
func FromClaude(name string) (builtin string, ok bool) {
	for _, n := range Builtin() {
		if Claude(n) == name {
			return n, true
		}
	}
	return "", false
}
