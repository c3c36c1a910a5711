package agent_test

import (
	"context"
	"iter"
	"slices"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// storedTypes returns the types of a session's stored events.
func storedTypes(t *testing.T, b *session.MemoryBackend, id string) []string {
	t.Helper()
	_, events, _, err := b.Read(id)
	if err != nil {
		t.Errorf("nothing stored: %v", err)
	}
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

// The checkpoints: the user's message is stored before the model sees it,
// and each tool call before its body runs.
func TestCheckpoints(t *testing.T) {
	backend := session.NewMemoryBackend()
	bus := event.New(nil)
	var id string
	var atRequest [][]string
	script := scripted.New(scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "probe", Arguments: `{}`},
		scripted.Call{ID: "c2", Name: "probe", Arguments: `{}`}), scripted.Text("done"))
	models := llm.NewRegistry()
	models.Register("test", llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		atRequest = append(atRequest, storedTypes(t, backend, id))
		return script.Stream(ctx, req)
	}))
	tools := tool.NewRegistry()
	var atBody [][]string
	tools.Register(tool.Definition{Name: "probe", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		atBody = append(atBody, storedTypes(t, backend, id))
		return tool.TextResult("ok"), nil
	}})
	reg := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(backend, bus), LLM: models, Tools: tools, Prompt: prompt.NewRegistry(), Events: bus})
	defer reg.DisposeAll(context.Background())
	a, err := reg.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test", MaxParallelToolCalls: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id = a.ID()
	if end := run(t, a, "go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn %+v", end)
	}
	if len(atRequest) != 2 || !slices.Contains(atRequest[0], session.TypeUserMessage) || !slices.Contains(atRequest[1], session.TypeToolResult) {
		t.Errorf("stored at each model request: %v", atRequest)
	}
	if len(atBody) != 2 {
		t.Fatalf("%d tool bodies ran, want 2", len(atBody))
	}
	for i, types := range atBody {
		calls := 0
		for _, typ := range types {
			if typ == session.TypeToolCall {
				calls++
			}
		}
		if calls != i+1 || !slices.Contains(types, session.TypeAssistantMessage) {
			t.Errorf("stored when body %d ran: %v", i+1, types)
		}
	}
}
