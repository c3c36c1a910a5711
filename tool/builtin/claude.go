package builtin

// ClaudeName returns Claude Code's name for the built-in tool name ("Read"
// for read_file), or "" when Claude Code has no counterpart. Claude Code's
// subagent definitions list tools, and its hooks match them, by these names.
func ClaudeName(name string) string {
	switch name {
	case "bash":
		return "Bash"
	case "read_file":
		return "Read"
	case "write_file":
		return "Write"
	case "edit_file":
		return "Edit"
	case "glob":
		return "Glob"
	case "grep":
		return "Grep"
	}
	return ""
}

// FromClaude returns the built-in tool that Claude Code's tool name names
// (read_file for "Read").
func FromClaude(name string) (string, bool) {
	for _, n := range [...]string{"bash", "read_file", "write_file", "edit_file", "glob", "grep"} {
		if ClaudeName(n) == name {
			return n, true
		}
	}
	return "", false
}
