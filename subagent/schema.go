package subagent

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaKeywords are the keywords of the enforced output-schema subset.
var schemaKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "oneOf": true, "description": true, "title": true, "default": true, "examples": true,
}

// CheckSchema reports whether s is an object-rooted schema within the subset
// that in-process providers enforce: one type per schema (object, array,
// string, number, integer, boolean or null), properties, required (naming
// declared properties), boolean additionalProperties, items, type-correct
// scalar enum and const, oneOf with at least two branches, and the
// annotations description, title, default and examples. The error is an
// UNSUPPORTED_SCHEMA *Error listing every violation.
func CheckSchema(s *jsonschema.Schema) error {
	if s == nil {
		return schemaError([]string{"schema is nil"})
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return schemaError([]string{fmt.Sprintf("schema is not JSON: %v", err)})
	}
	var root any
	if err := json.Unmarshal(raw, &root); err != nil {
		return schemaError([]string{fmt.Sprintf("schema is not JSON: %v", err)})
	}
	var v []string
	if m, ok := root.(map[string]any); !ok || m["type"] != "object" {
		v = append(v, `root: type must be "object"`)
	}
	checkNode("root", root, &v)
	if len(v) > 0 {
		return schemaError(v)
	}
	return nil
}

func checkNode(path string, node any, v *[]string) {
	add := func(format string, args ...any) { *v = append(*v, path+": "+fmt.Sprintf(format, args...)) }
	m, ok := node.(map[string]any)
	if !ok {
		add("a schema must be an object")
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !schemaKeywords[k] {
			add("keyword %q is not supported", k)
		}
	}
	typ, hasType := m["type"].(string)
	_, hasOneOf := m["oneOf"]
	switch {
	case m["type"] != nil && !hasType:
		add("type must be a single type name")
	case hasType && !slices.Contains([]string{"object", "array", "string", "number", "integer", "boolean", "null"}, typ):
		add("unknown type %q", typ)
	case !hasType && !hasOneOf:
		add("type is required")
	}
	if props, ok := m["properties"]; ok {
		pm, isMap := props.(map[string]any)
		if typ != "object" || !isMap {
			add("properties need type object and an object of schemas")
		}
		for _, name := range slices.Sorted(maps.Keys(pm)) {
			checkNode(path+".properties."+name, pm[name], v)
		}
	}
	if req, ok := m["required"]; ok {
		list, isList := req.([]any)
		if !isList {
			add("required must be a list of property names")
		}
		props, _ := m["properties"].(map[string]any)
		for _, r := range list {
			name, isStr := r.(string)
			if _, declared := props[name]; !isStr || !declared {
				add("required names undeclared property %v", r)
			}
		}
	}
	if ap, ok := m["additionalProperties"]; ok {
		if _, isBool := ap.(bool); !isBool {
			add("additionalProperties must be true or false")
		}
	}
	if items, ok := m["items"]; ok {
		if typ != "array" {
			add("items need type array")
		}
		checkNode(path+".items", items, v)
	}
	if enum, ok := m["enum"]; ok {
		list, isList := enum.([]any)
		if !isList || len(list) == 0 {
			add("enum must be a non-empty list")
		}
		for _, e := range list {
			if !scalarOf(typ, e) {
				add("enum value %v does not match type %q", e, typ)
			}
		}
	}
	if c, ok := m["const"]; ok && !scalarOf(typ, c) {
		add("const value %v does not match type %q", c, typ)
	}
	if one, ok := m["oneOf"]; ok {
		list, isList := one.([]any)
		if !isList || len(list) < 2 {
			add("oneOf needs at least two branches")
		}
		for i, b := range list {
			checkNode(fmt.Sprintf("%s.oneOf[%d]", path, i), b, v)
		}
	}
}

// scalarOf reports whether x is a scalar JSON value of type typ.
func scalarOf(typ string, x any) bool {
	switch typ {
	case "string":
		_, ok := x.(string)
		return ok
	case "number":
		_, ok := x.(float64)
		return ok
	case "integer":
		f, ok := x.(float64)
		return ok && f == math.Trunc(f)
	case "boolean":
		_, ok := x.(bool)
		return ok
	case "null":
		return x == nil
	}
	return false
}
