package promptcache

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRender: any body renders to at most its own length (the rendering is
// made of compacted parts of it), the same every time, or is refused with
// ErrNotChat; and Analyze takes whatever Render made.
func FuzzRender(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}],"tools":[{"type":"function"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":null}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"subagent","arguments":"{\"prompt\":\"x\"}"}}]}]}`))
	f.Add([]byte(`{"messages":[]}`))
	f.Add([]byte(`{"messages":[{"role":"system"}],"tools":{"a":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Render(body)
		if err != nil {
			if !errors.Is(err, ErrNotChat) {
				t.Fatalf("error %v is not ErrNotChat", err)
			}
			return
		}
		if len(r) > len(body) {
			t.Fatalf("rendering of %d bytes from a body of %d", len(r), len(body))
		}
		again, err := Render(body)
		if err != nil || !bytes.Equal(r, again) {
			t.Fatalf("Render is not deterministic")
		}
		x := Exchange{Seq: 0, Body: body, Rendered: r, Prefix: len(r)}
		rep := Analyze([]Exchange{x, {Seq: 1, Body: body, Rendered: r, Prefix: len(r),
			Calls: []Call{{Name: "subagent", Arguments: string(body)}}}})
		if rep.HitTokens > rep.InputTokens || rep.Cost > rep.CostNoCache {
			t.Fatalf("report %+v", rep)
		}
	})
}
