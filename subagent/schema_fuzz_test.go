package subagent_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/subagent"
)

// FuzzCheckSchema: any schema a client could send either passes the subset
// check or fails with an UNSUPPORTED_SCHEMA error listing violations; the
// check never panics.
func FuzzCheckSchema(f *testing.F) {
	for _, seed := range []string{
		`{"type":"object","properties":{"a":{"type":"string","enum":["x"]}},"required":["a"]}`,
		`{"type":"object","properties":{"n":{"type":"integer","const":3}},"additionalProperties":false}`,
		`{"type":"object","properties":{"l":{"type":"array","items":{"oneOf":[{"type":"string"},{"type":"null"}]}}}}`,
		`{"type":"string"}`,
		`{"type":["object","null"],"$ref":"#/x","pattern":"a"}`,
		`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"number","enum":[1,"x",null]}}}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s jsonschema.Schema
		if json.Unmarshal(data, &s) != nil {
			return
		}
		err := subagent.CheckSchema(&s)
		var se *subagent.Error
		if err != nil && (!errors.As(err, &se) || se.Code != subagent.CodeUnsupportedSchema || len(se.Violations) == 0) {
			t.Fatalf("CheckSchema(%s) = %v: want UNSUPPORTED_SCHEMA with violations", data, err)
		}
	})
}
