package hook

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/tool/toolname"
)

// SubagentTool is dsh's subagent tool, which Claude Code calls Agent.
const SubagentTool = "subagent"

// ClaudeName returns Claude Code's name for the dsh tool name (Bash for
// bash, Agent for subagent), or name itself when Claude Code has no
// counterpart (an MCP tool keeps its mcp__server__tool name).
func ClaudeName(name string) string {
	if name == SubagentTool {
		return "Agent"
	}
	if c := toolname.Claude(name); c != "" {
		return c
	}
	return name
}

// argNames maps, per built-in tool, dsh's argument names to Claude Code's;
// the arguments not listed have the same name in both.
func argNames(tool string) map[string]string {
	switch tool {
	case toolname.Bash:
		return map[string]string{"timeout_ms": "timeout"}
	case toolname.ReadFile, toolname.WriteFile, toolname.EditFile:
		return map[string]string{"path": "file_path"}
	case toolname.Grep:
		return map[string]string{"ignore_case": "-i", "max_results": "head_limit"}
	}
	return nil
}

// pathArgs are the Claude Code arguments of a built-in tool that hold a
// path, which Claude Code gives absolute.
var pathArgs = []string{"file_path", "path"}

// claudeInput returns a built-in tool's arguments in Claude Code's names
// and shapes (paths absolute against cwd); other tools' are returned as
// they are.
func claudeInput(tool, cwd string, args json.RawMessage) json.RawMessage {
	if ClaudeName(tool) == tool || tool == SubagentTool || len(args) == 0 {
		return args
	}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil || m == nil {
		return args
	}
	names := argNames(tool)
	out := make(map[string]any, len(m))
	for k, v := range m {
		if n, ok := names[k]; ok {
			k = n
		}
		out[k] = v
	}
	for _, k := range pathArgs {
		if p, ok := out[k].(string); ok && p != "" && !filepath.IsAbs(p) && cwd != "" {
			out[k] = filepath.Join(cwd, p)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return args
	}
	return b
}

// dshInput maps the arguments a hook gave in Claude Code's names
// (updatedInput) back to the dsh tool's; names dsh's tool does not know
// are kept, so that the tool's schema refuses them.
func dshInput(tool string, in json.RawMessage) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal(in, &m); err != nil {
		return nil, err
	}
	back := map[string]string{}
	for k, v := range argNames(tool) {
		back[v] = k
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if n, ok := back[k]; ok {
			k = n
		}
		out[k] = v
	}
	return json.Marshal(out)
}

// claudeResponse returns what a tool call produced in the shape Claude
// Code gives its tool's tool_response, from the text the model read; other
// tools get {content, is_error, code}.
func claudeResponse(tool string, toolInput json.RawMessage, r *ToolResponse) any {
	var args map[string]any
	json.Unmarshal(toolInput, &args) // the Claude-shaped input
	str := func(k string) string { s, _ := args[k].(string); return s }
	base := map[string]any{}
	if r.IsError {
		base["is_error"], base["code"] = true, r.Code
	}
	switch tool {
	case toolname.Bash:
		base["stdout"], base["stderr"], base["interrupted"], base["isImage"] = r.Content, "", r.Code == "TIMEOUT", false
	case toolname.ReadFile:
		base["type"] = "text"
		base["file"] = map[string]any{"filePath": str("file_path"), "content": r.Content, "numLines": lines(r.Content)}
	case toolname.WriteFile:
		base["filePath"], base["content"], base["message"] = str("file_path"), str("content"), r.Content
	case toolname.EditFile:
		base["filePath"], base["oldString"], base["newString"], base["message"] = str("file_path"), str("old_string"), str("new_string"), r.Content
		base["replaceAll"], _ = args["replace_all"].(bool)
	case toolname.Glob:
		var names []string
		for l := range strings.Lines(r.Content) {
			if strings.HasPrefix(l, "no files match ") && len(names) == 0 {
				break
			}
			if l = strings.TrimRight(l, "\n"); l != "" {
				names = append(names, l)
			}
		}
		base["filenames"], base["numFiles"] = names, len(names)
	case toolname.Grep:
		base["mode"], base["content"], base["numLines"] = "content", r.Content, lines(r.Content)
	case SubagentTool:
		base["content"] = []map[string]string{{"type": "text", "text": r.Content}}
	default:
		base["content"] = r.Content
	}
	return base
}

func lines(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}
