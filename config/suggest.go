package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/dsh-go/dsh/tool"
)

// didYouMean is the " (did you mean "maxSteps"?)" of a decoder's unknown
// field error: the closest key that the block holding the field takes (a
// field of root's type at that place), when one is close; else "".
func didYouMean(data []byte, err error, root reflect.Type) string {
	var ufe *yaml.UnknownFieldError
	if !errors.As(err, &ufe) || ufe.Token == nil {
		return ""
	}
	file, perr := parser.ParseBytes(data, 0)
	if perr != nil {
		return ""
	}
	f := &fieldFinder{line: ufe.Token.Position.Line, column: ufe.Token.Position.Column}
	for _, doc := range file.Docs {
		ast.Walk(f, doc)
	}
	if f.path == "" {
		return ""
	}
	t := typeAt(root, parentPath(f.path))
	if t == nil {
		return ""
	}
	if near := tool.Suggest(yamlKeys(t), ufe.Token.Value); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// fieldFinder finds the path of the mapping value whose key is at a place.
type fieldFinder struct {
	line, column int
	path         string
}

func (f *fieldFinder) Visit(n ast.Node) ast.Visitor {
	if f.path != "" {
		return nil
	}
	if mv, ok := n.(*ast.MappingValueNode); ok && mv.Key != nil {
		if p := mv.Key.GetToken().Position; p.Line == f.line && p.Column == f.column {
			f.path = mv.GetPath()
			return nil
		}
	}
	return f
}

// typeAt follows a YAML path ($.a.b[0].c) through the yaml tags of root's
// fields; nil where it leaves the structs.
func typeAt(root reflect.Type, path string) reflect.Type {
	t := root
	rest := strings.TrimPrefix(path, "$")
	for rest != "" {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch rest[0] {
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 || (t.Kind() != reflect.Slice && t.Kind() != reflect.Array) {
				return nil
			}
			if _, err := strconv.Atoi(rest[1:end]); err != nil {
				return nil
			}
			t, rest = t.Elem(), rest[end+1:]
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			name := rest[:end]
			rest = rest[end:]
			if t.Kind() != reflect.Struct {
				return nil
			}
			ft, ok := fieldType(t, name)
			if !ok {
				return nil
			}
			t = ft
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

// yamlKeys lists the yaml keys of struct t's fields.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case strings.Contains(opts, "inline"):
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				keys = append(keys, yamlKeys(ft)...)
			}
		case key != "" && key != "-":
			keys = append(keys, key)
		}
	}
	return keys
}
