package tool

import (
	"math"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// plainSchema is a parameters schema that Execute checks without the
// generic validator, which costs about a kilobyte of garbage per call: an
// object whose properties are each of one JSON type (string, boolean,
// integer or number), some of them required, other properties allowed or
// refused. It answers only "valid": an instance it does not accept goes to
// the generic validator, which gives the error.
type plainSchema struct {
	props    map[string]string // property → its type
	required []string
	closed   bool // additionalProperties: false
}

// plainOf returns s as a plainSchema, or nil when s uses anything else:
// enum, const, bounds, formats, patterns, nested schemas, references.
// Annotations (title, description, default, comment) do not validate.
func plainOf(s *jsonschema.Schema) *plainSchema {
	if s == nil || s.Type != "object" || !onlyAnnotations(s, true) {
		return nil
	}
	p := &plainSchema{props: make(map[string]string, len(s.Properties)), required: s.Required}
	switch a := s.AdditionalProperties; {
	case a == nil:
	case reflect.DeepEqual(*a, jsonschema.Schema{Not: &jsonschema.Schema{}}): // false
		p.closed = true
	case reflect.DeepEqual(*a, jsonschema.Schema{}): // true
	default:
		return nil
	}
	for name, ps := range s.Properties {
		if ps == nil || !plainType(ps.Type) || !onlyAnnotations(ps, false) {
			return nil
		}
		p.props[name] = ps.Type
	}
	return p
}

// onlyAnnotations reports whether s has no keyword but its type (and, for
// an object, properties, required and additionalProperties) and
// annotations.
func onlyAnnotations(s *jsonschema.Schema, object bool) bool {
	c := *s
	c.Type, c.Title, c.Description, c.Comment, c.Default, c.PropertyOrder = "", "", "", "", nil, nil
	if object {
		c.Properties, c.Required, c.AdditionalProperties = nil, nil, nil
	}
	return reflect.DeepEqual(c, jsonschema.Schema{})
}

// plainType reports whether a plainSchema checks properties of type t.
func plainType(t string) bool {
	return t == "string" || t == "boolean" || t == "integer" || t == "number"
}

// valid reports whether the generic validator would accept instance, a
// value decoded by encoding/json into an any; false means "ask it".
func (p *plainSchema) valid(instance any) bool {
	m, ok := instance.(map[string]any)
	if !ok {
		return false
	}
	for _, r := range p.required {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	for k, v := range m {
		t, ok := p.props[k]
		if !ok {
			if p.closed {
				return false
			}
			continue
		}
		if !hasType(v, t) {
			return false
		}
	}
	return true
}

// hasType reports whether v, decoded by encoding/json, is of JSON type t
// as jsonschema sees it: an integer is a number without a fraction.
func hasType(v any, t string) bool {
	switch v := v.(type) {
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case float64:
		if t == "number" {
			return true
		}
		_, f := math.Modf(v)
		return t == "integer" && f == 0
	}
	return false
}
