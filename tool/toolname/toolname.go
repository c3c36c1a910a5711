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

// The names of dsh tools that are not built-in but have a Claude Code
// counterpart: the background-task tools (package task), the subagent tool
// and the control tools (package subagent/subagenttool), as mounted by
// default.
const (
	Subagent    = "subagent"
	TaskList    = "task_list"
	TaskOutput  = "task_output"
	TaskKill    = "task_kill"
	SendMessage = "send_message"
	ListAgents  = "list_agents"
)

// Counterpart returns the dsh tool that Claude Code's tool name names in
// an agent definition's tool list: the built-in ones (as FromClaude),
// MultiEdit as edit_file, Agent and Task as the subagent tool, and Claude
// Code's background-task and team tools as dsh's. ok is false when dsh
// has no counterpart; known then says whether name is a Claude Code tool
// at all (WebFetch, TodoWrite, …), for the warning.
func Counterpart(claude string) (dsh string, ok, known bool) {
	if b, ok := FromClaude(claude); ok {
		return b, true, true
	}
	switch claude {
	case "MultiEdit":
		return EditFile, true, true
	case "Agent", "Task":
		return Subagent, true, true
	case "TaskList":
		return TaskList, true, true
	case "TaskOutput", "BashOutput":
		return TaskOutput, true, true
	case "TaskStop", "KillShell", "KillBash":
		return TaskKill, true, true
	case "SendMessage":
		return SendMessage, true, true
	case "ListAgents":
		return ListAgents, true, true
	}
	for _, n := range claudeOnly() {
		if n == claude {
			return "", false, true
		}
	}
	return "", false, false
}

// claudeOnly are Claude Code tools dsh has no counterpart for.
func claudeOnly() []string {
	return []string{"LS", "NotebookEdit", "NotebookRead", "WebFetch", "WebSearch", "TodoWrite", "TodoRead",
		"ExitPlanMode", "EnterPlanMode", "SlashCommand", "Skill", "AskUserQuestion", "ListMcpResourcesTool",
		"ReadMcpResourceTool", "TaskCreate", "TaskGet", "TaskUpdate", "TeamCreate", "TeamDelete", "Workflow",
		"Monitor", "ToolSearch", "CronCreate", "CronDelete", "CronList", "EnterWorktree", "ExitWorktree", "LSP"}
}
