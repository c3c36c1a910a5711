package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/dsh-go/dsh/internal/yamlalias"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/builtin"
)

// checkTypes refuses a document whose aliases expand past
// yamlalias.MaxNodes nodes (before the decoder expands them), then walks
// the YAML document beside the Go type of Config and reports the first
// value that does not fit its field, as "line N: path: want …, got …".
// Syntax errors and unknown keys are left to the decoder.
func checkTypes(data []byte) error { return checkNodeTypes(data, reflect.TypeFor[Config]()) }

// checkNodeTypes is checkTypes for a document of type t.
func checkNodeTypes(data []byte, t reflect.Type) error {
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil
	}
	if err := yamlalias.Check(file, yamlalias.MaxNodes); err != nil {
		return err
	}
	for _, doc := range file.Docs {
		if err := checkNode(doc.Body, t, ""); err != nil {
			return err
		}
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

// checkNode checks n against t; path names n for messages.
func checkNode(n ast.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := n.(type) {
	case nil, *ast.NullNode, *ast.AnchorNode, *ast.AliasNode, *ast.TagNode, *ast.CommentGroupNode:
		return nil // anchors, aliases and tags are left to the decoder
	case *ast.MappingNode:
		for _, mv := range v.Values {
			if err := checkEntry(mv, t, path); err != nil {
				return err
			}
		}
		return nil
	case *ast.MappingValueNode:
		return checkEntry(v, t, path)
	case *ast.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Interface {
			return typeError(n, path, t, "a list")
		}
		for i, item := range v.Values {
			if t.Kind() == reflect.Slice {
				if err := checkNode(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return checkScalar(n, t, path)
}

// checkEntry checks one key: value of a mapping into t (a struct or map).
func checkEntry(mv *ast.MappingValueNode, t reflect.Type, path string) error {
	key := mv.Key.GetToken().Value
	sub := key
	if path != "" {
		sub = path + "." + key
	}
	switch t.Kind() {
	case reflect.Map:
		return checkNode(mv.Value, t.Elem(), sub)
	case reflect.Struct:
		if ft, ok := fieldType(t, key); ok {
			return checkNode(mv.Value, ft, sub)
		}
		return nil // an unknown key: the decoder names it
	case reflect.Interface:
		return nil
	}
	return typeError(mv, path, t, "a mapping")
}

// fieldType finds the field of struct t that the YAML key names, looking
// into inline fields.
func fieldType(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if ft, ok := fieldType(f.Type, key); ok {
				return ft, true
			}
			continue
		}
		if f.IsExported() && name == key {
			return f.Type, true
		}
	}
	return nil, false
}

// checkScalar checks a scalar against t.
func checkScalar(n ast.Node, t reflect.Type, path string) error {
	text := n.GetToken().Value
	ok := true
	switch {
	case t == durationType:
		_, err := time.ParseDuration(text)
		ok = err == nil
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		_, ok = n.(*ast.IntegerNode)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		_, err := strconv.ParseFloat(text, 64)
		ok = err == nil
	case t.Kind() == reflect.Bool:
		_, ok = n.(*ast.BoolNode)
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map || t.Kind() == reflect.Slice:
		ok = false
	}
	if !ok {
		return typeError(n, path, t, fmt.Sprintf("%q", text))
	}
	return nil
}

// typeError says that what a path holds is not what t wants.
func typeError(n ast.Node, path string, t reflect.Type, got string) error {
	var want string
	switch {
	case t == durationType:
		want = "a duration such as 30s or 2m"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		want = "an integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		want = "a number"
	case t.Kind() == reflect.Bool:
		want = "true or false"
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		want = "a mapping"
	case t.Kind() == reflect.Slice:
		want = "a list"
	default:
		want = "a string"
	}
	return located(n, path, "want %s, got %s", want, got)
}

func located(n ast.Node, path, format string, args ...any) error {
	return fmt.Errorf("line %d: %s: %s", n.GetToken().Position.Line, path, fmt.Sprintf(format, args...))
}

// knownTools are the global tools a configuration can name: the built-in
// tools, the task tools and the configured subagent tool instances.
func (cfg Config) knownTools() []string {
	var names []string
	for _, d := range builtin.Tools(builtin.Options{}) {
		names = append(names, d.Name)
	}
	names = append(names, task.ToolList, task.ToolOutput, task.ToolKill, mcptool.ListResourcesTool, mcptool.ReadResourceTool)
	if cfg.Subagents != nil {
		for _, t := range cfg.Subagents.Tools {
			names = append(names, toolNameOf(t.ToolName))
		}
		names = append(names, subagenttool.ToolSendMessage, subagenttool.ToolInterrupt, subagenttool.ToolListAgents, subagenttool.ToolReport)
	}
	slices.Sort(names)
	return names
}

func toolNameOf(name string) string {
	if name == "" {
		return "subagent"
	}
	return name
}

// checkToolName refuses a tool name that names no known tool, with a
// did-you-mean. Patterns (mcp__server__*) and MCP tools (listed only once
// their server runs) are not checked.
func checkToolName(known []string, path, name string) error {
	if permission.IsPattern(name) || strings.HasPrefix(name, mcptool.Prefix) || slices.Contains(known, name) {
		return nil
	}
	msg := fmt.Sprintf("unknown tool %q", name)
	if near := tool.Suggest(known, name); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return bad(path, "%s; known tools: %s", msg, strings.Join(known, ", "))
}
