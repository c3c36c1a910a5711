package inproc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// rendered is a request as a chat template renders it: the system prompt,
// the tools, then the messages, as one byte string. A provider's prompt
// cache reuses a byte prefix of it.
func rendered(t *testing.T, req *llm.Request) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, v := range []any{req.System, req.Tools} {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range req.Messages {
		// The message as the model sees it: role and content.
		if err := enc.Encode(struct {
			Role    content.Role
			Content []content.Block
		}{m.Role, m.Content}); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// A child's first request starts with what it shares with its parent, so
// that the provider's prompt cache holds: a fork child's first request is
// its parent's last completed request plus the rest of that turn and the
// task; a spawn child shares its parent's system prompt and tools; a
// structured child's own tool and instructions come after the shared part.
// The children's usage events, appended to the parent's log after its last
// turn, change nothing in a later fork's request.
func TestChildrenKeepTheParentsPrefix(t *testing.T) {
	w := newWorld(t, nil,
		scripted.Text("noted: the code word is 'heron'"), // parent turn 1
		scripted.Text("noted again"),                     // parent turn 2
		scripted.Echo("fork saw: "),                      // fork child
		scripted.Text("spawned"),                         // spawn child
		scripted.ToolCalls("", scripted.Call{Name: "structured_output", Arguments: `{"n":1}`}), // structured spawn child
		scripted.Echo("fork saw: "), // a second fork child, after the others' usage events
	)
	for _, text := range []string{"remember heron", "and remember owl"} {
		if end, _ := w.Agent.Run(context.Background(), content.UserText(text)); end.Reason.Kind != session.EndCompleted {
			t.Fatalf("parent turn: %+v", end)
		}
	}
	parentReqs := w.requestsOf(w.Agent.ID())
	last := rendered(t, parentReqs[len(parentReqs)-1])

	w.delegate(t, "fork", subagent.StartRequest{Prompt: []content.Block{content.Text("what is the code word?")}})
	w.delegate(t, "spawn", subagent.StartRequest{Prompt: []content.Block{content.Text("count")}})
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"n": {Type: "integer"}}}
	w.delegate(t, "spawn", subagent.StartRequest{Prompt: []content.Block{content.Text("structured")}, OutputSchema: schema})
	w.delegate(t, "fork", subagent.StartRequest{Prompt: []content.Block{content.Text("what is the code word?")}})
	reqs := w.model.Requests()
	fork, spawn, structured := reqs[2], reqs[3], reqs[4]
	if n := len(w.Agent.Session().Events()) - len(session.CompletedPrefix(w.Agent.Session().Events())); n < 3 {
		t.Fatalf("%d events after the parent's last turn end, want its children's usage events", n)
	}
	if first, second := rendered(t, fork), rendered(t, reqs[5]); !bytes.Equal(first, second) {
		t.Errorf("a fork after three children's usage events sent %d bytes, the first fork %d: the same seed and task must render the same", len(second), len(first))
	}

	if got := rendered(t, fork); !bytes.HasPrefix(got, last) {
		t.Errorf("the parent's last request (%d bytes) is not a prefix of the fork child's first (%d bytes)", len(last), len(got))
	}
	parent := parentReqs[len(parentReqs)-1]
	for name, child := range map[string]*llm.Request{"spawn": spawn, "structured": structured} {
		if child.System != parent.System {
			t.Errorf("%s child's system prompt differs from its parent's", name)
		}
		if len(child.Tools) < len(parent.Tools) {
			t.Fatalf("%s child sees fewer tools", name)
		}
		for i, spec := range parent.Tools {
			if child.Tools[i].Name != spec.Name || string(child.Tools[i].Parameters) != string(spec.Parameters) {
				t.Errorf("%s child's tool %d is %s, its parent's %s: the shared tools must come first", name, i, child.Tools[i].Name, spec.Name)
			}
		}
	}
	if n := len(structured.Tools); structured.Tools[n-1].Name != "structured_output" || n != len(parent.Tools)+1 {
		t.Errorf("the structured child's tools end %v", structured.Tools[n-1].Name)
	}
}
