package mcptool

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/tool"
)

// FuzzToResult reads a server's tools/call result as dsh does: never a
// panic, text bounded by the limit, an error result exactly when the
// server said isError.
func FuzzToResult(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"isError":true}`,
		`{"content":[],"structuredContent":{"a":[1,2,{"b":null}]}}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///x","text":"body"}},{"type":"resource_link","uri":"u","name":"n"}]}`,
		`{"content":[{"type":"audio","data":"AAAA","mimeType":"audio/wav"},{"type":"resource","resource":{"uri":"b","blob":"AAAA"}}]}`,
		`{"isError":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var res mcp.CallToolResult
		if json.Unmarshal(data, &res) != nil {
			return
		}
		r := toResult(&res, 1000, "fuzz")
		if n := len(content.JoinText(r.Content)); n > 1000+400 {
			t.Fatalf("%d bytes of text", n)
		}
		if r.IsError != res.IsError || (r.IsError && r.Code != CodeToolError) {
			t.Fatalf("isError %v, result %+v", res.IsError, r)
		}
		if r.Meta != nil && !json.Valid(r.Meta) {
			t.Fatalf("meta %q", r.Meta)
		}
	})
}

// FuzzParameters reads a server's input schema: either an error, or a
// schema the tool registry accepts and arguments are validated against.
func FuzzParameters(f *testing.F) {
	for _, seed := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"number","minimum":1}}}`,
		`{"properties":{"x":{"$ref":"#/$defs/y"}},"$defs":{"y":{"type":"integer"}}}`,
		`{"type":"array"}`,
		`{"type":["object","null"]}`,
		`{"type":"object","properties":{"x":{"$ref":"http://example.com/remote"}}}`,
		`true`,
		`{"anyOf":[{"type":"object"}],"type":"object","additionalProperties":false}`,
	} {
		f.Add([]byte(seed), []byte(`{"a":"x","n":2}`))
	}
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		var raw any
		if json.Unmarshal(schema, &raw) != nil {
			return
		}
		s, err := parameters(raw)
		if err != nil {
			return
		}
		reg := tool.NewRegistry()
		if _, err := reg.Register(tool.Definition{Name: "x", Parameters: s,
			Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.TextResult("ok"), nil }}); err != nil {
			t.Fatalf("accepted schema refused by the registry: %v", err)
		}
		if !json.Valid(args) {
			return
		}
		r := reg.NewScope().Execute(context.Background(), tool.Call{Name: "x", Arguments: args})
		if r.IsError && r.Code != tool.CodeInvalidArgs {
			t.Fatalf("result %+v", r)
		}
	})
}
