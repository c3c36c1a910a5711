package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/builtin"
)

// sameAsMarshal fails t unless tool.EncodeSchema and json.Marshal agree on
// s: the same bytes, or both an error.
func sameAsMarshal(t *testing.T, what string, s *jsonschema.Schema) {
	t.Helper()
	want, werr := json.Marshal(s)
	got, gerr := tool.EncodeSchema(s)
	if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s: encoded\n%s (%v)\njson.Marshal makes\n%s (%v)", what, got, gerr, want, werr)
	}
}

func ptr[T any](v T) *T { return &v }

// The schemas dsh gives its own tools encode as json.Marshal encodes them.
func TestEncodeSchemaOfTheBuiltInTools(t *testing.T) {
	type nested struct {
		Name  string   `json:"name" jsonschema:"a <name> & more"`
		Tags  []string `json:"tags,omitempty"`
		Limit *int     `json:"limit,omitempty"`
	}
	type args struct {
		Path    string            `json:"path" jsonschema:"the file's path"`
		Items   []nested          `json:"items"`
		Options map[string]string `json:"options,omitempty"`
		Ratio   float64           `json:"ratio,omitempty"`
		Flag    bool              `json:"flag"`
		Any     any               `json:"any,omitempty"`
	}
	defs := append(builtin.Tools(builtin.Options{}), tool.Func("typed", "", true,
		func(_ context.Context, _ tool.Call, _ args) (tool.Result, error) { return tool.Result{}, nil }))
	for _, d := range defs {
		sameAsMarshal(t, d.Name, d.Parameters)
	}
}

// Edge cases of jsonschema-go's MarshalJSON: empty schemas as true and
// false, property order (with names it does not have, and twice: an
// error), both type forms, characters HTML escapes, keywords written only
// by json.Marshal (at the root and deep down), values it cannot encode.
func TestEncodeSchemaEdges(t *testing.T) {
	for name, s := range map[string]*jsonschema.Schema{
		"nil":              nil,
		"empty":            {},
		"not empty":        {Not: &jsonschema.Schema{}},
		"empty properties": {Type: "object", Properties: map[string]*jsonschema.Schema{}},
		"nil property":     {Properties: map[string]*jsonschema.Schema{"a": nil, "b": {}}},
		"ordered": {Type: "object", PropertyOrder: []string{"z", "missing", "a"},
			Properties: map[string]*jsonschema.Schema{"a": {Type: "string"}, "m": {Type: "integer"}, "z": {Type: "number"}}},
		"order twice":    {Properties: map[string]*jsonschema.Schema{"a": {}}, PropertyOrder: []string{"a", "a"}},
		"types":          {Types: []string{"string", "null"}},
		"empty types":    {Types: []string{}},
		"type and types": {Type: "string", Types: []string{"null"}},
		"html":           {Description: "<b> & \u2028 \xff", Enum: []any{"<", 1.5, nil, true}, Pattern: "^a&b$"},
		"numbers": {MultipleOf: ptr(0.1), Minimum: ptr(math.Copysign(0, -1)), Maximum: ptr(1e21), ExclusiveMinimum: ptr(1e-7),
			ExclusiveMaximum: ptr(123456789.0), MinLength: ptr(0), MaxLength: ptr(-1)},
		"nan":         {Minimum: ptr(math.NaN())},
		"default":     {Default: json.RawMessage(` { "a" : "<x>" } `)},
		"bad default": {Default: json.RawMessage(`{`)},
		"const":       {Const: ptr[any](nil)},
		"examples":    {Examples: []any{map[string]any{"k": "v"}}},
		"unencodable": {Enum: []any{func() {}}},
		"extra":       {Type: "object", Extra: map[string]any{"x-kind": "y"}},
		"empty extra": {Extra: map[string]any{}},
		"ref deep":    {Properties: map[string]*jsonschema.Schema{"a": {Items: &jsonschema.Schema{Ref: "#/$defs/x"}}}},
		"deprecated":  {Deprecated: true},
		"items array": {ItemsArray: []*jsonschema.Schema{{}}},
		"closed":      {Type: "object", AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}},
		"combinators": {AllOf: []*jsonschema.Schema{{Type: "string"}, nil}, AnyOf: []*jsonschema.Schema{{}}, OneOf: []*jsonschema.Schema{{Format: "uri"}}},
		"draft":       {Schema: "https://json-schema.org/draft/2020-12/schema", Title: "t", UniqueItems: true, MinItems: ptr(1), MaxItems: ptr(3), MinProperties: ptr(1), MaxProperties: ptr(2), Required: []string{"a"}},
	} {
		sameAsMarshal(t, name, s)
	}
}

// Random schemas over every keyword, written directly or not, encode as
// json.Marshal encodes them.
func TestEncodeSchemaRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		sameAsMarshal(t, fmt.Sprintf("schema %d", i), randomSchema(r, 3))
	}
}

func randomSchema(r *rand.Rand, depth int) *jsonschema.Schema {
	words := []string{"a", "b", "<c>", "d&e", "é", "\x00", "z"}
	word := func() string { return words[r.IntN(len(words))] }
	sub := func() *jsonschema.Schema {
		if depth == 0 || r.IntN(3) > 0 {
			return nil
		}
		return randomSchema(r, depth-1)
	}
	s := &jsonschema.Schema{}
	maybe := func() bool { return r.IntN(4) == 0 }
	if maybe() {
		s.Type = []string{"object", "string", "array", "integer"}[r.IntN(4)]
	} else if maybe() {
		s.Types = []string{word(), word()}
	}
	if maybe() {
		s.Description, s.Title, s.Format, s.Pattern = word(), word(), word(), word()
	}
	if maybe() {
		s.Enum = []any{word(), float64(r.IntN(5)) / 4, nil}
	}
	if maybe() {
		s.Minimum, s.MaxLength, s.MinItems = ptr(r.Float64()*1e6), ptr(r.IntN(9)), ptr(r.IntN(9))
	}
	if maybe() {
		s.Properties = map[string]*jsonschema.Schema{}
		for range r.IntN(4) {
			s.Properties[word()] = sub()
		}
		if maybe() {
			s.PropertyOrder = []string{word()}
		}
		s.Required = []string{word()}
	}
	if maybe() {
		s.Items = sub()
	}
	if maybe() {
		s.AdditionalProperties = sub()
	}
	if maybe() {
		s.AnyOf = []*jsonschema.Schema{sub(), sub()}
	}
	if maybe() {
		s.Not = sub()
	}
	if maybe() {
		s.Default = json.RawMessage(fmt.Sprintf("%q", word()))
	}
	if r.IntN(20) == 0 { // a keyword only json.Marshal writes
		s.Ref = "#/$defs/" + word()
	}
	return s
}

// Any schema that decodes encodes as json.Marshal encodes it.
func FuzzEncodeSchema(f *testing.F) {
	for _, seed := range []string{`{}`, `true`, `false`, `{"type":"object","properties":{"a":{"type":"string","enum":["<x>",1]}},"required":["a"]}`,
		`{"type":["string","null"],"minimum":1e21,"default":{"k":[1,2]}}`, `{"anyOf":[{"not":{}},{"$ref":"#/x"}],"x-extra":1}`,
		`{"items":{"items":{"format":"uri","additionalProperties":false}}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s jsonschema.Schema
		if json.Unmarshal(data, &s) != nil {
			return
		}
		sameAsMarshal(t, string(data), &s)
	})
}

// The built-in tools' schemas, as a session's first model request encodes
// them: directly, and through jsonschema-go's MarshalJSON.
func BenchmarkEncodeSchema(b *testing.B) {
	defs := builtin.Tools(builtin.Options{})
	for _, c := range []struct {
		name   string
		encode func(*jsonschema.Schema) ([]byte, error)
	}{{"direct", tool.EncodeSchema}, {"marshal", func(s *jsonschema.Schema) ([]byte, error) { return json.Marshal(s) }}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for _, d := range defs {
					if _, err := c.encode(d.Parameters); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// Each field of Schema set on its own encodes as json.Marshal encodes it:
// a field jsonschema-go adds fails this until encodeSchema knows it.
func TestEncodeSchemaEveryField(t *testing.T) {
	typ := reflect.TypeFor[jsonschema.Schema]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var s jsonschema.Schema
		v := reflect.ValueOf(&s).Elem().Field(i)
		switch f.Type.Kind() {
		case reflect.String:
			v.SetString("<x>")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(f.Type.Elem()))
		case reflect.Slice:
			if f.Type.Elem().Kind() == reflect.Uint8 { // json.RawMessage
				v.SetBytes([]byte(`"d"`))
			} else {
				v.Set(reflect.MakeSlice(f.Type, 1, 1))
			}
		case reflect.Map:
			v.Set(reflect.MakeMap(f.Type))
			v.SetMapIndex(reflect.ValueOf("k"), reflect.Zero(f.Type.Elem()))
		default:
			t.Fatalf("field %s of kind %s: the test does not know how to set it", f.Name, f.Type.Kind())
		}
		if f.Name == "PropertyOrder" { // an order needs properties to order
			s.Properties = map[string]*jsonschema.Schema{"": {}, "a": {}}
		}
		sameAsMarshal(t, f.Name, &s)
	}
}
