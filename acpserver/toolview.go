package acpserver

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"unicode"

	acpsdk "github.com/coder/acp-go-sdk"
)

// toolArgs are the arguments of dsh's tools an editor can show: what runs,
// which file, which change.
type toolArgs struct {
	Command     string `json:"command"`
	Path        string `json:"path"`
	Pattern     string `json:"pattern"`
	Offset      int    `json:"offset"`
	Content     string `json:"content"`
	OldString   string `json:"old_string"`
	NewString   string `json:"new_string"`
	Description string `json:"description"`
	Prompt      string `json:"prompt"`
}

// toolView is how a tool call shows in an editor.
type toolView struct {
	title     string
	kind      acpsdk.ToolKind
	locations []acpsdk.ToolCallLocation
	diff      []acpsdk.ToolCallContent // an edit's change, for the completing update
}

// viewOf describes a call of tool name with arguments (JSON) in a session
// working in cwd: a title that says what runs (`bash: go test ./...`,
// `edit_file: main.go`), its kind, the file it touches as a location
// (absolute), and for write_file and edit_file the change as diff content.
func viewOf(name, arguments, cwd string) toolView {
	v := toolView{title: name, kind: kindOf(name)}
	var a toolArgs
	if json.Unmarshal([]byte(arguments), &a) != nil {
		return v
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) || cwd == "" {
			return p
		}
		return filepath.Join(cwd, p)
	}
	detail := ""
	switch name {
	case "bash":
		detail = a.Command
	case "read_file", "write_file", "edit_file":
		detail = a.Path
		if p := abs(a.Path); p != "" {
			loc := acpsdk.ToolCallLocation{Path: p}
			if name == "read_file" && a.Offset > 0 {
				line := a.Offset
				loc.Line = &line
			}
			v.locations = []acpsdk.ToolCallLocation{loc}
			switch {
			case len(a.Content)+len(a.OldString)+len(a.NewString) > maxDiff:
				// too big to show twice more; rawInput has it
			case name == "write_file":
				v.diff = []acpsdk.ToolCallContent{acpsdk.ToolDiffContent(p, a.Content)}
			case name == "edit_file":
				v.diff = []acpsdk.ToolCallContent{acpsdk.ToolDiffContent(p, a.NewString, a.OldString)}
			}
		}
	case "glob", "grep":
		detail = a.Pattern
		if a.Path != "" {
			detail += " in " + a.Path
			v.locations = []acpsdk.ToolCallLocation{{Path: abs(a.Path)}}
		}
	default:
		detail = a.Description
	}
	if detail = oneLine(detail, 120); detail != "" {
		v.title = name + ": " + detail
	}
	return v
}

// maxDiff bounds the text of an edit shown as diff content: a bigger one
// is left to the call's raw input.
const maxDiff = 256 << 10

// oneLine is s on one line without control characters (a terminal escape
// in a command stays out of the editor's title), cut to n bytes (at a rune
// boundary) with an ellipsis.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
