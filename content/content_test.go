package content_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/content"
)

func TestBlockConstructors(t *testing.T) {
	tests := []struct {
		name string
		got  content.Block
		want content.Block
	}{
		{"text", content.Text("hi"), content.Block{Type: content.TypeText, Text: "hi"}},
		{"reasoning", content.Reasoning("hm"), content.Block{Type: content.TypeReasoning, Text: "hm"}},
		{"tool call", content.ToolCall("c1", "read", `{"a":1}`),
			content.Block{Type: content.TypeToolCall, ID: "c1", Name: "read", Arguments: `{"a":1}`}},
		{"tool result", content.ToolResult("c1", []content.Block{content.Text("ok")}, true),
			content.Block{Type: content.TypeToolResult, ToolCallID: "c1", Content: []content.Block{content.Text("ok")}, IsError: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("block mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolCallArgumentsKeptRaw(t *testing.T) {
	// Arguments are raw JSON exactly as produced: never re-serialized.
	raw := `{ "b" : 2,"a":1 }`
	b := content.ToolCall("c1", "x", raw)
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back content.Block
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Arguments != raw {
		t.Errorf("arguments after round trip = %q, want %q", back.Arguments, raw)
	}
}

func TestJoinText(t *testing.T) {
	tests := []struct {
		name   string
		blocks []content.Block
		text   string
		reason string
	}{
		{"none", nil, "", ""},
		{"single", []content.Block{content.Text("a")}, "a", ""},
		{"several in order", []content.Block{
			content.Text("a"), content.Reasoning("r1"), content.ToolCall("c", "n", "{}"),
			content.Text("b"), content.Reasoning("r2"), content.Text("c"),
		}, "abc", "r1r2"},
		{"only reasoning", []content.Block{content.Reasoning("x")}, "", "x"},
		{"nested result text ignored", []content.Block{
			content.ToolResult("c", []content.Block{content.Text("inner")}, false),
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := content.JoinText(tt.blocks); got != tt.text {
				t.Errorf("JoinText = %q, want %q", got, tt.text)
			}
			if got := content.JoinReasoning(tt.blocks); got != tt.reason {
				t.Errorf("JoinReasoning = %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestToolCalls(t *testing.T) {
	blocks := []content.Block{
		content.Text("a"),
		content.ToolCall("c1", "one", "{}"),
		content.Reasoning("r"),
		content.ToolCall("c2", "two", `{"x":1}`),
	}
	want := []content.Block{content.ToolCall("c1", "one", "{}"), content.ToolCall("c2", "two", `{"x":1}`)}
	if diff := cmp.Diff(want, content.ToolCalls(blocks)); diff != "" {
		t.Errorf("ToolCalls mismatch (-want +got):\n%s", diff)
	}
	if got := content.ToolCalls([]content.Block{content.Text("x")}); len(got) != 0 {
		t.Errorf("ToolCalls without calls = %v, want empty", got)
	}
}

func TestHasVisibleText(t *testing.T) {
	tests := []struct {
		name   string
		blocks []content.Block
		want   bool
	}{
		{"nil", nil, false},
		{"empty text", []content.Block{content.Text("")}, false},
		{"whitespace only", []content.Block{content.Text(" \n\t ")}, false},
		{"reasoning does not count", []content.Block{content.Reasoning("thinking")}, false},
		{"tool call does not count", []content.Block{content.ToolCall("c", "n", "{}")}, false},
		{"visible", []content.Block{content.Text(" "), content.Text(" x ")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := content.HasVisibleText(tt.blocks); got != tt.want {
				t.Errorf("HasVisibleText = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUsageAdd(t *testing.T) {
	u := content.Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4, Reasoning: 5}
	v := content.Usage{Input: 10, Output: 20, CacheRead: 30, CacheWrite: 40, Reasoning: 50}
	want := content.Usage{Input: 11, Output: 22, CacheRead: 33, CacheWrite: 44, Reasoning: 55}
	if got := u.Add(v); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
	if u.Input != 1 || v.Input != 10 {
		t.Error("Add modified its operands")
	}
	if got := u.Add(content.Usage{}); got != u {
		t.Errorf("Add(zero) = %+v, want %+v", got, u)
	}
	if !(content.Usage{}).IsZero() {
		t.Error("zero usage: IsZero = false")
	}
	if (content.Usage{Reasoning: 1}).IsZero() {
		t.Error("non-zero usage: IsZero = true")
	}
}

func TestMessageConstructors(t *testing.T) {
	user := content.UserMessage(content.Text("a"), content.Text("b"))
	if user.Role != content.RoleUser || user.Source.Kind != content.SourceUser {
		t.Errorf("UserMessage role/source = %s/%s", user.Role, user.Source.Kind)
	}
	if diff := cmp.Diff([]content.Block{content.Text("a"), content.Text("b")}, user.Content); diff != "" {
		t.Errorf("UserMessage content (-want +got):\n%s", diff)
	}

	ut := content.UserText("hello")
	if ut.Role != content.RoleUser || content.JoinText(ut.Content) != "hello" || len(ut.Content) != 1 {
		t.Errorf("UserText = %+v", ut)
	}

	asst := content.AssistantMessage("prov", "mod", []content.Block{content.Text("x")})
	wantSrc := content.Source{Kind: content.SourceModel, Provider: "prov", Model: "mod"}
	if asst.Role != content.RoleAssistant || asst.Source != wantSrc {
		t.Errorf("AssistantMessage role/source = %s/%+v", asst.Role, asst.Source)
	}

	res := content.ToolResultMessage("call-7", []content.Block{content.Text("Error: boom")}, true)
	want := content.Message{
		ID:   res.ID,
		Role: content.RoleUser,
		Content: []content.Block{{
			Type: content.TypeToolResult, ToolCallID: "call-7",
			Content: []content.Block{content.Text("Error: boom")}, IsError: true,
		}},
		Source: content.Source{Kind: content.SourceTool, CallID: "call-7"},
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("ToolResultMessage mismatch (-want +got):\n%s", diff)
	}

	ids := map[string]bool{}
	for _, m := range []content.Message{user, ut, asst, res} {
		if m.ID == "" {
			t.Errorf("message %+v has no id", m)
		}
		ids[m.ID] = true
	}
	for range 100 {
		ids[content.NewID()] = true
	}
	if len(ids) != 104 {
		t.Errorf("got %d distinct ids, want 104", len(ids))
	}
}

func TestMessageJSONShape(t *testing.T) {
	m := content.ToolResultMessage("c1", []content.Block{content.Text("ok")}, false)
	m.ID = "fixed"
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"fixed","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"}]}],"source":{"kind":"tool","callId":"c1"}}`
	if string(data) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", data, want)
	}
}

func TestFailureError(t *testing.T) {
	f := &content.Failure{Code: "RATE_LIMIT", Message: "slow down"}
	var err error = f
	if got := err.Error(); got != "RATE_LIMIT: slow down" {
		t.Errorf("Error() = %q", got)
	}
}

func TestToolCallsOfAdjacentCallsIsAPart(t *testing.T) {
	blocks := []content.Block{content.Text("a"), content.ToolCall("c1", "one", "{}"), content.ToolCall("c2", "two", "{}")}
	got := content.ToolCalls(blocks)
	if len(got) != 2 || &got[0] != &blocks[1] || cap(got) != 2 {
		t.Errorf("ToolCalls = %v (cap %d), want blocks[1:3]", got, cap(got))
	}
	if content.ToolCalls(blocks[:1]) != nil {
		t.Error("ToolCalls without calls is not nil")
	}
}

func TestJoinTextAllocatesOnce(t *testing.T) {
	blocks := []content.Block{content.Text("abcdefgh"), content.Text("ijklmnopq"), content.Text("rstuvwxyz0123")}
	if n := testing.AllocsPerRun(100, func() { _ = content.JoinText(blocks) }); n != 1 {
		t.Errorf("JoinText of 3 blocks: %v allocations, want 1", n)
	}
}

// NewID's ids are version 4 UUIDs in canonical form.
func TestNewIDIsAUUIDv4(t *testing.T) {
	for range 100 {
		id := content.NewID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("NewID = %q: %v, version %v, variant %v", id, err, u.Version(), u.Variant())
		}
	}
}
