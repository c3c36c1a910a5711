package tool

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// plainSchemas are schemas plainOf takes, one of each shape.
func plainSchemas() []*jsonschema.Schema {
	props := func() map[string]*jsonschema.Schema {
		return map[string]*jsonschema.Schema{
			"s": {Type: "string", Description: "a string"}, "b": {Type: "boolean"},
			"i": {Type: "integer", Title: "an integer"}, "n": {Type: "number", Default: json.RawMessage(`1.5`)},
		}
	}
	return []*jsonschema.Schema{
		{Type: "object"},
		{Type: "object", Properties: props()},
		{Type: "object", Properties: props(), Required: []string{"s", "i", "x"}},
		{Type: "object", Properties: props(), Required: []string{"b"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}},
		{Type: "object", Properties: props(), AdditionalProperties: &jsonschema.Schema{}},
	}
}

func TestPlainOfTakesOnlyPlainSchemas(t *testing.T) {
	for i, s := range plainSchemas() {
		if plainOf(s) == nil {
			t.Errorf("schema %d: not plain", i)
		}
	}
	one := func(s *jsonschema.Schema) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"p": s}}
	}
	min, pattern := 1.0, "^a"
	for name, s := range map[string]*jsonschema.Schema{
		"not an object":          {Type: "string"},
		"types":                  {Type: "object", Types: []string{"object", "null"}},
		"minProperties":          {Type: "object", MinProperties: new(int)},
		"additional of a type":   {Type: "object", AdditionalProperties: &jsonschema.Schema{Type: "string"}},
		"$ref":                   {Type: "object", Ref: "#"},
		"$schema":                {Type: "object", Schema: "http://json-schema.org/draft-07/schema#"},
		"unknown keyword":        {Type: "object", Extra: map[string]any{"x-check": true}},
		"allOf":                  {Type: "object", AllOf: []*jsonschema.Schema{{Required: []string{"a"}}}},
		"enum property":          one(&jsonschema.Schema{Type: "string", Enum: []any{"a"}}),
		"minimum property":       one(&jsonschema.Schema{Type: "number", Minimum: &min}),
		"pattern property":       one(&jsonschema.Schema{Type: "string", Pattern: pattern}),
		"array property":         one(&jsonschema.Schema{Type: "array"}),
		"untyped property":       one(&jsonschema.Schema{}),
		"format property":        one(&jsonschema.Schema{Type: "string", Format: "uri"}),
		"property with not":      one(&jsonschema.Schema{Type: "string", Not: &jsonschema.Schema{}}),
		"nested object property": one(&jsonschema.Schema{Type: "object"}),
	} {
		if plainOf(s) != nil {
			t.Errorf("%s: taken as plain", name)
		}
	}
}

// checkPlain fails when plain and the generic validator disagree on the
// instance args decode to.
func checkPlain(t *testing.T, args []byte) {
	var instance any
	if json.Unmarshal(args, &instance) != nil {
		return
	}
	for i, s := range plainSchemas() {
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Validate(instance)
		if got := plainOf(s).valid(instance); got != (err == nil) {
			t.Errorf("schema %d, %s: plain says %v, jsonschema says %v", i, args, got, err)
		}
	}
}

func TestPlainAgreesWithJSONSchema(t *testing.T) {
	for _, args := range []string{
		`{}`, `[]`, `"x"`, `null`, `1`, `{"s":"a","i":3,"x":null}`, `{"s":"a","i":3.5,"x":1}`, `{"s":"a","i":-0,"x":1,"b":true}`,
		`{"s":1,"i":3,"x":1}`, `{"s":"a","i":1e300,"x":[]}`, `{"b":false}`, `{"b":false,"y":1}`, `{"n":2,"b":true}`,
		`{"n":"2","b":true}`, `{"b":null}`, `{"s":"a","s":2,"i":1,"x":1}`, `{"i":1e-7,"s":"","x":{}}`,
	} {
		checkPlain(t, []byte(args))
	}
}

// shapedSchema is a plain schema drawn from the bits of shape: each of the
// properties a, b, c and d of one of the four types, each of a, b, c, d and
// x required or not, additionalProperties absent, false or true.
func shapedSchema(shape uint16) *jsonschema.Schema {
	types := []string{"string", "boolean", "integer", "number"}
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
	for i, name := range []string{"a", "b", "c", "d"} {
		s.Properties[name] = &jsonschema.Schema{Type: types[shape>>(2*i)&3]}
	}
	for i, name := range []string{"a", "b", "c", "d", "x"} {
		if shape>>(8+i)&1 == 1 {
			s.Required = append(s.Required, name)
		}
	}
	switch shape >> 13 & 3 {
	case 1:
		s.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
	case 2:
		s.AdditionalProperties = &jsonschema.Schema{}
	}
	return s
}

func FuzzPlainAgreesWithJSONSchema(f *testing.F) {
	for i, s := range []string{`{}`, `{"s":"a","i":3,"x":null}`, `{"b":true,"n":0.5,"q":1}`, `{"i":2.5}`, `[]`,
		`{"a":"x","b":true,"c":2,"d":2.5}`, `{"a":1,"b":"t","c":1.5,"d":null,"x":0}`} {
		f.Add([]byte(s), uint16(i*0x1357))
	}
	f.Fuzz(func(t *testing.T, args []byte, shape uint16) {
		checkPlain(t, args)
		var instance any
		if json.Unmarshal(args, &instance) != nil {
			return
		}
		s := shapedSchema(shape)
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		p := plainOf(s)
		if p == nil {
			t.Fatalf("shape %#x: not plain", shape)
		}
		err = r.Validate(instance)
		if got := p.valid(instance); got != (err == nil) {
			t.Errorf("shape %#x, %s: plain says %v, jsonschema says %v", shape, args, got, err)
		}
	})
}

// A call on a plain schema is validated without jsonschema: the subagent
// tool's arguments cost their decoding alone.
func TestExecutePlainSchemaAllocations(t *testing.T) {
	r := NewRegistry()
	if _, err := r.Register(Definition{Name: "t", Parameters: &jsonschema.Schema{Type: "object",
		Properties: map[string]*jsonschema.Schema{"description": {Type: "string"}, "prompt": {Type: "string"}},
		Required:   []string{"description", "prompt"}},
		Execute: func(context.Context, Call) (Result, error) { return Result{}, nil }}); err != nil {
		t.Fatal(err)
	}
	s := r.NewScope()
	call := Call{ID: "c", Name: "t", Arguments: json.RawMessage(`{"description":"bench","prompt":"do X"}`)}
	var res Result
	allocs := testing.AllocsPerRun(100, func() { res = s.Execute(context.Background(), call) })
	if res.IsError {
		t.Fatalf("result %+v", res)
	}
	// encoding/json's decoding into an any (the map, its group, its keys
	// and values) and the result; jsonschema's validation added 21.
	if allocs > 12 {
		t.Errorf("Execute: %v allocations, want ≤ 12", allocs)
	}
}
