package promptcache

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestRenderOrdersSystemToolsMessages(t *testing.T) {
	body := `{"model":"m","messages":[
		{"role":"system","content":"S1"},
		{"role":"user","content":"U"},
		{"role":"system", "content":"S2"}],
	  "stream":true,
	  "tools":[ {"type":"function","function":{"name":"t"}} ]}`
	got, err := Render([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"system","content":"S1"}{"role":"system","content":"S2"}` +
		`[{"type":"function","function":{"name":"t"}}]` + `{"role":"user","content":"U"}`
	if string(got) != want {
		t.Fatalf("Render =\n%s\nwant\n%s", got, want)
	}
}

func TestRenderWithoutTools(t *testing.T) {
	for _, body := range []string{`{"messages":[{"role":"user","content":"U"}]}`, `{"messages":[{"role":"user","content":"U"}],"tools":null}`} {
		got, err := Render([]byte(body))
		if err != nil || string(got) != `{"role":"user","content":"U"}` {
			t.Errorf("Render(%s) = %s, %v", body, got, err)
		}
	}
}

func TestRenderRefusesWhatIsNotAChatRequest(t *testing.T) {
	for _, body := range []string{``, `null`, `[]`, `{}`, `{"messages":{}}`, `{"messages":[1]}`, `{"messages":[{"role":1}]}`,
		`{"messages":[],"tools":{"a":}}`, `{"messages":[{"role":"user"}]`} {
		if _, err := Render([]byte(body)); !errors.Is(err, ErrNotChat) {
			t.Errorf("Render(%q) error = %v, want ErrNotChat", body, err)
		}
	}
}

func TestCommonPrefix(t *testing.T) {
	long := bytes.Repeat([]byte("abcdefgh"), 300) // 2,400 bytes: several 512-byte blocks
	for _, at := range []int{0, 1, 511, 512, 513, 1024, 2000, 2399} {
		other := bytes.Clone(long)
		other[at] = 'X'
		if got := CommonPrefix(long, other); got != at {
			t.Errorf("mismatch at %d: CommonPrefix = %d", at, got)
		}
	}
	if got := CommonPrefix(long, long[:700]); got != 700 {
		t.Errorf("prefix of 700: %d", got)
	}
	if got := CommonPrefix(long[:513], long); got != 513 {
		t.Errorf("prefix of 513: %d", got)
	}
	if got := CommonPrefix(nil, long); got != 0 {
		t.Errorf("empty: %d", got)
	}
}

func TestFloorAndTokens(t *testing.T) {
	for in, want := range map[int]int{0: 0, 255: 0, 256: 256, 511: 256, 1000: 768} {
		if got := Floor(in); got != want {
			t.Errorf("Floor(%d) = %d, want %d", in, got, want)
		}
	}
	if Tokens(10) != 2.5 {
		t.Errorf("Tokens(10) = %v", Tokens(10))
	}
}

func TestCacheLookupIsTheLongestPrefixOfAnyAdded(t *testing.T) {
	var c Cache
	if got := c.Lookup([]byte("abc")); got != 0 {
		t.Fatalf("empty cache: %d", got)
	}
	c.Add([]byte("abXXXXXX"))
	c.Add([]byte("abcdZ"))
	c.Add([]byte("a"))
	if got := c.Lookup([]byte("abcdef")); got != 4 {
		t.Fatalf("Lookup = %d, want 4", got)
	}
}

// chat renders a request body of a system prompt, tools and messages.
func chat(system, tools string, msgs ...string) []byte {
	return []byte(`{"messages":[{"role":"system","content":"` + system + `"}` + strings.Join(append([]string{""}, msgs...), ",") +
		`],"tools":` + tools + `}`)
}

func exchange(seq int, body []byte, prefix int, calls ...Call) Exchange {
	r, err := Render(body)
	if err != nil {
		panic(err)
	}
	return Exchange{Seq: seq, Body: body, Rendered: r, Prefix: prefix, Calls: calls}
}

func TestAnalyze(t *testing.T) {
	system := strings.Repeat("s", 1000)
	user := `{"role":"user","content":"go"}`
	call := `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"subagent","arguments":"{\"prompt\":\"TASK-1\"}"}}]}`
	result := `{"role":"tool","tool_call_id":"c1","content":"done"}`
	p0 := chat(system, `[]`, user)
	p1 := chat(system, `[]`, user, call, result)
	child := chat(system+" child", `[]`, `{"role":"user","content":"do TASK-1 now"}`)
	x0 := exchange(0, p0, 0, Call{Name: "subagent", Arguments: `{"description":"d","prompt":"TASK-1"}`},
		Call{Name: "read_file", Arguments: `{"path":"TASK-1"}`}) // not a delegation
	x0r := x0.Rendered
	// The parent's next request arrives before the child's first: it
	// carries the prompt only in a tool call, which does not make it the
	// child's.
	x1 := exchange(1, p1, len(x0r))
	x2 := exchange(2, child, CommonPrefix(child, x0r))
	// A delegation whose prompt no request carries.
	x3 := exchange(3, chat(system, `[]`, user, call, result, `{"role":"assistant","content":"ok"}`), len(x1.Rendered),
		Call{Name: "subagent_fork", Arguments: `{"description":"lost","prompt":"NOWHERE"}`})
	r := Analyze([]Exchange{x0, x1, x2, x3})

	if r.Requests != 4 || len(r.Children) != 2 {
		t.Fatalf("report = %+v", r)
	}
	c := r.Children[0]
	cr := x2.Rendered
	wantShare := float64(CommonPrefix(cr, x0r)) / float64(len(cr))
	if c.Tool != "subagent" || c.Description != "d" || c.Parent != 0 || c.First != 2 || c.ParentShare != wantShare ||
		c.FirstTokens != Tokens(len(cr)) || c.FirstHitShare != float64(Floor(x2.Prefix))/float64(len(cr)) {
		t.Errorf("child = %+v, want first 2, parent share %v", c, wantShare)
	}
	if c.ParentShare <= 0 || c.ParentShare >= 1 {
		t.Errorf("parent share %v should be strictly between 0 and 1", c.ParentShare)
	}
	if lost := r.Children[1]; lost.First != -1 || lost.Tool != "subagent_fork" || lost.Parent != 3 {
		t.Errorf("lost child = %+v", lost)
	}
	// x1 and x3 extend earlier requests; x2 is a child's first.
	if r.Continuations != 2 || r.AppendOnly != 2 {
		t.Errorf("append-only %d/%d, want 2/2", r.AppendOnly, r.Continuations)
	}
	var input, hits, cost float64
	for _, x := range []Exchange{x0, x1, x2, x3} {
		h := Floor(x.Prefix)
		input += Tokens(len(x.Rendered))
		hits += Tokens(h)
		cost += 0.1*Tokens(h) + Tokens(len(x.Rendered)-h)
	}
	if !near(r.InputTokens, input) || !near(r.HitTokens, hits) || !near(r.Cost, cost) || r.CostNoCache != r.InputTokens ||
		!near(r.HitShare, hits/input) || hits == 0 || r.Cost >= r.CostNoCache {
		t.Errorf("totals = %+v, want input %v hits %v cost %v", r, input, hits, cost)
	}

	sum := r.Add(r)
	if sum.Requests != 8 || !near(sum.Cost, 2*r.Cost) || !near(sum.HitShare, r.HitShare) || len(sum.Children) != 4 ||
		sum.AppendOnly != 4 || sum.Continuations != 4 {
		t.Errorf("sum = %+v", sum)
	}
}

func TestAnalyzeFindsAPromptInTextParts(t *testing.T) {
	parent := exchange(0, chat("s", `[]`, `{"role":"user","content":"go"}`), 0, Call{Name: "subagent", Arguments: `{"prompt":"TASK-2"}`})
	child := exchange(1, chat("s", `[]`, `{"role":"user","content":[{"type":"text","text":"do "},{"type":"text","text":"TASK-2"}]}`), 0)
	if r := Analyze([]Exchange{parent, child}); len(r.Children) != 1 || r.Children[0].First != 1 {
		t.Fatalf("children = %+v", r.Children)
	}
}

func TestAnalyzeEmpty(t *testing.T) {
	if r := Analyze(nil); r.Requests != 0 || r.HitShare != 0 || r.Cost != 0 {
		t.Fatalf("Analyze(nil) = %+v", r)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
