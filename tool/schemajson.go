package tool

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
)

// encodeSchema returns the JSON of s, byte for byte what json.Marshal
// makes of it. json.Marshal goes through jsonschema-go's MarshalJSON,
// which reflects over the whole Schema struct at every node: encoding the
// schemas of a session's tools that way was about half a millisecond of a
// process's first model request. The keywords tool schemas use are written
// here directly; a schema with any other keyword at any node, or one
// MarshalJSON would refuse, is left to json.Marshal.
func encodeSchema(s *jsonschema.Schema) ([]byte, error) {
	w := schemaWriter{ok: true}
	w.enc = json.NewEncoder(&w.b)
	if w.schema(s); w.ok {
		return w.b.Bytes(), nil
	}
	return json.Marshal(s)
}

// unwritten reports whether s has a keyword schemaWriter does not write.
// TestEncodeSchemaEveryField sets each field of Schema in turn, so a
// field a new jsonschema-go adds fails it until it is listed here.
func unwritten(s *jsonschema.Schema) bool {
	return s.ID != "" || s.Ref != "" || s.Comment != "" || s.Defs != nil || s.Definitions != nil ||
		s.DependencySchemas != nil || s.DependencyStrings != nil || s.Anchor != "" || s.DynamicAnchor != "" ||
		s.DynamicRef != "" || s.Vocabulary != nil || s.Deprecated || s.ReadOnly || s.WriteOnly ||
		s.PrefixItems != nil || s.ItemsArray != nil || s.AdditionalItems != nil || s.Contains != nil ||
		s.MinContains != nil || s.MaxContains != nil || s.UnevaluatedItems != nil || s.DependentRequired != nil ||
		s.PatternProperties != nil || s.PropertyNames != nil || s.UnevaluatedProperties != nil ||
		s.If != nil || s.Then != nil || s.Else != nil || s.DependentSchemas != nil ||
		s.ContentEncoding != "" || s.ContentMediaType != "" || s.ContentSchema != nil || s.Extra != nil ||
		(s.Type != "" && s.Types != nil)
}

// schemaWriter writes schemas as jsonschema-go's MarshalJSON does: type,
// properties, items, then the struct's fields in their order; {} as true
// and {"not":true} as false. ok turns false at the first node it cannot
// write; b is then of no use.
type schemaWriter struct {
	b     bytes.Buffer
	enc   *json.Encoder // onto b
	ok    bool
	comma bool // the object being written has a member already
}

func (w *schemaWriter) schema(s *jsonschema.Schema) {
	if s == nil {
		w.b.WriteString("null")
		return
	}
	if unwritten(s) {
		w.ok = false
		return
	}
	start, outer := w.b.Len(), w.comma
	w.b.WriteByte('{')
	w.comma = false
	switch {
	case s.Type != "":
		w.member("type", s.Type)
	case s.Types != nil:
		w.member("type", s.Types)
	}
	if s.Properties != nil {
		w.key("properties")
		w.properties(s.Properties, s.PropertyOrder)
	}
	w.sub("items", s.Items)
	w.str("$schema", s.Schema)
	w.str("title", s.Title)
	w.str("description", s.Description)
	if len(s.Default) > 0 {
		w.member("default", s.Default)
	}
	if len(s.Examples) > 0 {
		w.member("examples", s.Examples)
	}
	if len(s.Enum) > 0 {
		w.member("enum", s.Enum)
	}
	if s.Const != nil {
		w.member("const", s.Const)
	}
	w.num("multipleOf", s.MultipleOf)
	w.num("minimum", s.Minimum)
	w.num("maximum", s.Maximum)
	w.num("exclusiveMinimum", s.ExclusiveMinimum)
	w.num("exclusiveMaximum", s.ExclusiveMaximum)
	w.int("minLength", s.MinLength)
	w.int("maxLength", s.MaxLength)
	w.str("pattern", s.Pattern)
	w.int("minItems", s.MinItems)
	w.int("maxItems", s.MaxItems)
	if s.UniqueItems {
		w.member("uniqueItems", true)
	}
	w.int("minProperties", s.MinProperties)
	w.int("maxProperties", s.MaxProperties)
	if len(s.Required) > 0 {
		w.member("required", s.Required)
	}
	w.sub("additionalProperties", s.AdditionalProperties)
	w.list("allOf", s.AllOf)
	w.list("anyOf", s.AnyOf)
	w.list("oneOf", s.OneOf)
	w.sub("not", s.Not)
	w.str("format", s.Format)
	w.b.WriteByte('}')
	w.comma = outer
	switch string(w.b.Bytes()[start:]) {
	case `{}`:
		w.b.Truncate(start)
		w.b.WriteString("true")
	case `{"not":true}`:
		w.b.Truncate(start)
		w.b.WriteString("false")
	}
}

// properties writes a properties object: the names of order first, then
// the others sorted. A name twice in order is MarshalJSON's error.
func (w *schemaWriter) properties(props map[string]*jsonschema.Schema, order []string) {
	outer := w.comma
	w.b.WriteByte('{')
	w.comma = false
	done := make(map[string]bool, len(order))
	for _, name := range order {
		if done[name] {
			w.ok = false
			return
		}
		done[name] = true
		if p, ok := props[name]; ok {
			w.key(name)
			w.schema(p)
		}
	}
	rest := make([]string, 0, len(props))
	for name := range props {
		if !done[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		w.key(name)
		w.schema(props[name])
	}
	w.b.WriteByte('}')
	w.comma = outer
}

func (w *schemaWriter) key(name string) {
	if w.comma {
		w.b.WriteByte(',')
	}
	w.comma = true
	w.value(name)
	w.b.WriteByte(':')
}

// value writes v as json.Marshal does.
func (w *schemaWriter) value(v any) {
	if err := w.enc.Encode(v); err != nil {
		w.ok = false
		return
	}
	w.b.Truncate(w.b.Len() - 1) // the newline Encode ends with
}

func (w *schemaWriter) member(name string, v any) {
	w.key(name)
	w.value(v)
}

func (w *schemaWriter) str(name, v string) {
	if v != "" {
		w.member(name, v)
	}
}

func (w *schemaWriter) num(name string, v *float64) {
	if v != nil {
		w.member(name, *v)
	}
}

func (w *schemaWriter) int(name string, v *int) {
	if v != nil {
		w.key(name)
		w.b.WriteString(strconv.Itoa(*v))
	}
}

func (w *schemaWriter) sub(name string, s *jsonschema.Schema) {
	if s != nil {
		w.key(name)
		w.schema(s)
	}
}

func (w *schemaWriter) list(name string, schemas []*jsonschema.Schema) {
	if len(schemas) == 0 {
		return
	}
	w.key(name)
	w.b.WriteByte('[')
	for i, s := range schemas {
		if i > 0 {
			w.b.WriteByte(',')
		}
		w.schema(s)
	}
	w.b.WriteByte(']')
}
