package session

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/google/go-cmp/cmp"
)

func TestEventJSONRoundTrip(t *testing.T) {
	failure := &content.Failure{Message: "slow down", Code: "RATE_LIMITED", Status: 429, RetryAfterMs: 1500, RequestID: "r1"}
	events := []Event{
		{Type: TypeTurnStart, Data: TurnStart{Turn: 3}},
		{Type: TypeTurnEnd, Data: TurnEnd{Turn: 3, Reason: EndReason{Kind: EndCompleted}}},
		{Type: TypeTurnEnd, Data: TurnEnd{Turn: 3, Reason: EndReason{Kind: EndAborted, Cause: &Cause{Kind: "hook", Reason: "policy"}}}},
		{Type: TypeTurnEnd, Data: TurnEnd{Turn: 3, Reason: EndReason{Kind: EndError, Error: failure}}},
		{Type: TypeStepStart, Data: Step{Turn: 3, Step: 2}},
		{Type: TypeStepEnd, Data: Step{Turn: 3, Step: 2}},
		{Type: TypeUserMessage, Data: content.UserMessage(content.Text("look"), content.Block{Type: content.TypeImage,
			Image: &content.ImageRef{ID: "sha256:ab", MediaType: "image/png", Bytes: 9, Width: 2, Height: 3}})},
		{Type: TypeAssistantChunk, Data: AssistantChunk{Turn: 1, Step: 1, Chunk: content.Chunk{Type: content.ChunkBlockEnd, Index: 1,
			Block: &content.Block{Type: content.TypeToolCall, ID: "c", Name: "n", Arguments: `{"a":1}`}}}},
		{Type: TypeAssistantChunk, Data: AssistantChunk{Turn: 1, Step: 1, Chunk: content.Chunk{Type: content.ChunkFinish,
			Finish: &content.Finish{Kind: content.FinishError, Failure: failure}}}},
		{Type: TypeAssistantMessage, Data: AssistantMessage{Turn: 1, Step: 1,
			Message: content.AssistantMessage("p", "m", []content.Block{content.Reasoning("hmm"), content.Text("hi"), content.ToolCall("c", "n", `{}`)}),
			Usage:   &content.Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4, Reasoning: 5}, Interrupted: true},
			SourceEventSeqs: []int64{4, 5}},
		{Type: TypeToolCall, Data: ToolCall{Turn: 1, Step: 1, CallID: "c", Name: "n", Arguments: `{"x": [1, 2]}`}},
		{Type: TypeToolResult, Data: ToolResult{Turn: 1, Step: 1,
			Message: content.ToolResultMessage("c", []content.Block{content.Text("no")}, true),
			Error:   &ErrorInfo{Name: "ToolError", Code: "E"}, Meta: json.RawMessage(`{"exit":1}`)},
			SourceEventSeqs: []int64{9}},
		{Type: TypeToolResult, Data: ToolResult{Turn: 1, Step: 2,
			Message: content.ToolResultMessage("d", []content.Block{content.Text("child said")}, false),
			Meta:    json.RawMessage(`{"subagentChild":"c1"}`), Usage: map[string]content.Usage{"p/m": {Input: 7, Output: 3, CacheRead: 2}}}},
		{Type: TypeRequestHeader, Data: RequestHeader{Config: RequestConfig{Provider: "p", Model: "m", MaxTokens: 100},
			System: "be brief", Tools: []content.ToolSpec{{Name: "n", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}},
			Reason: "initial"}},
		{Type: TypeLLMRetry, Data: LLMRetry{Turn: 1, Step: 1, Provider: "p", Retry: 2, DelayMs: 1500, Failure: failure}},
		{Type: TypeInboxSpliced, Data: InboxSpliced{Target: "next-turn", Inserted: []content.Message{content.UserText("later")},
			Removed: []string{"m1"}, Outcome: "canceled"}},
		{Type: TypeEndSeed, Data: EndSeed{}},
		{Type: "todo/write", Data: json.RawMessage(`{"todos":[]}`)},
		{Type: "plugin/unknown", Data: json.RawMessage(`{"n":1}`), Ignorable: true},
	}
	for i, e := range events {
		e.Seq, e.Time = int64(i), 1700000000000+int64(i)
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("marshal %s: %v", e.Type, err)
		}
		if strings.ContainsRune(string(b), '\n') {
			t.Errorf("%s: encoding spans lines: %s", e.Type, b)
		}
		var got Event
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("unmarshal %s: %v\n%s", e.Type, err, b)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("%s round trip mismatch (-want +got):\n%s\n%s", e.Type, diff, b)
		}
	}
}

func TestEventJSONEnvelope(t *testing.T) {
	e := Event{Seq: 4, Time: 5, Type: TypeToolResult, Data: ToolResult{Turn: 1, Step: 1}, SourceEventSeqs: []int64{3}}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"type": `"tool/result"`, "seq": "4", "time": "5", "surfaceOp": `"append"`, "sourceEventSeqs": "[3]"} {
		if string(env[k]) != want {
			t.Errorf("envelope %s = %s, want %s", k, env[k], want)
		}
	}
	b, _ = json.Marshal(Event{Type: TypeTurnStart, Data: TurnStart{Turn: 1}})
	if s := string(b); strings.Contains(s, "ignorable") || strings.Contains(s, "surfaceOp") || strings.Contains(s, "sourceEventSeqs") {
		t.Errorf("core event carries optional envelope fields: %s", s)
	}
	if _, err := json.Marshal(Event{Type: "x", Data: func() {}}); err == nil {
		t.Error("marshalled a non-JSON payload")
	}
}

// The explicit empty source list of an assistant message built from no
// chunks (spec 1.5) must survive a round trip.
func TestEventJSONKeepsEmptySourceEventSeqs(t *testing.T) {
	e := Event{Type: TypeAssistantMessage, Data: AssistantMessage{}, SourceEventSeqs: []int64{}}
	b, _ := json.Marshal(e)
	var got Event
	if err := json.Unmarshal(b, &got); err != nil || got.SourceEventSeqs == nil {
		t.Errorf("SourceEventSeqs = %#v (%v), want empty non-nil; wire %s", got.SourceEventSeqs, err, b)
	}
}

// surfaceOp is implied by the type: "append" on surface events, absent
// elsewhere. Anything else (a replace, or surface metadata on a core event)
// is refused by name rather than silently dropped.
func TestEventJSONSurfaceOp(t *testing.T) {
	var e Event
	ok := `{"type":"user/message","seq":0,"time":0,"data":{"id":"m","role":"user","content":[]},"surfaceOp":"append"}`
	if err := json.Unmarshal([]byte(ok), &e); err != nil || e.SurfaceOp() != SurfaceAppend {
		t.Fatalf("append: %v, %q", err, e.SurfaceOp())
	}
	for _, bad := range []string{
		`{"type":"turn/start","seq":0,"time":0,"data":{"turn":1},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":0,"time":0,"data":{"id":"m","role":"user","content":[]},"surfaceOp":"prepend"}`,
		`{"type":"user/message","seq":0,"time":0,"data":{"id":"m","role":"user","content":[]},"surfaceOp":{"op":"replace","start":0,"end":1}}`,
	} {
		err := json.Unmarshal([]byte(bad), &e)
		if err == nil || !strings.Contains(err.Error(), "surfaceOp") {
			t.Errorf("%s: error %v, want one naming surfaceOp", bad, err)
		}
	}
}

func TestEventJSONUnknownTypes(t *testing.T) {
	var e Event
	err := json.Unmarshal([]byte(`{"type":"future/thing","seq":0,"time":0,"data":{}}`), &e)
	wantCode(t, err, CodeUnknownEvent)
	if !strings.Contains(err.Error(), "future/thing") {
		t.Errorf("error %q does not name the type", err)
	}

	raw := `{"type":"future/note","seq":1,"time":2,"data":{"a":[1,2]},"ignorable":true}`
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatal(err)
	}
	want := Event{Seq: 1, Time: 2, Type: "future/note", Data: json.RawMessage(`{"a":[1,2]}`), Ignorable: true}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("ignorable unknown event mismatch (-want +got):\n%s", diff)
	}
	if b, _ := json.Marshal(e); string(b) != raw {
		t.Errorf("re-encoded as %s, want %s", b, raw)
	}

	for _, bad := range []string{`{"seq":0,"time":0,"data":{}}`, `{"type":"turn/start","data":{"turn":"one"}}`, `[1]`} {
		if err := json.Unmarshal([]byte(bad), &e); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
