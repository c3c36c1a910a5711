package agent_test

import (
	"context"
	"strings"
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

// A model that gives two calls of one message the same id gets both run,
// each under its own id; the log stays balanced, and the next request pairs
// every result with its own call.
func TestDuplicateToolCallIDsAreRenamed(t *testing.T) {
	bus := event.New(nil)
	model := scripted.New(
		scripted.ToolCalls("", scripted.Call{ID: "same", Name: "echo", Arguments: `{"n":1}`}, scripted.Call{ID: "same", Name: "echo", Arguments: `{"n":2}`}),
		scripted.Text("done"))
	models := llm.NewRegistry()
	models.Register("test", model)
	tools := tool.NewRegistry()
	tools.Register(tool.Definition{Name: "echo", Execute: func(_ context.Context, c tool.Call) (tool.Result, error) {
		return tool.TextResult(string(c.Arguments)), nil
	}})
	reg := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(session.NewMemoryBackend(), bus), LLM: models, Tools: tools,
		Prompt: prompt.NewRegistry(), Events: bus})
	a, err := reg.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.DisposeAll(context.Background())
	if end, _ := a.Run(context.Background(), content.UserText("go")); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn %+v", end)
	}
	events := a.Session().Events()
	if err := session.CheckBalanced(events); err != nil {
		t.Fatal(err)
	}
	var started []string
	for _, e := range events {
		if c, ok := e.Data.(session.ToolCall); ok {
			started = append(started, c.CallID+" "+c.Arguments)
		}
	}
	if got := strings.Join(started, ", "); got != `same {"n":1}, same-2 {"n":2}` {
		t.Fatalf("tool calls started: %s", got)
	}
	reqs := model.Requests()
	var calls, results []string
	for _, m := range reqs[len(reqs)-1].Messages {
		for _, b := range m.Content {
			switch b.Type {
			case content.TypeToolCall:
				calls = append(calls, b.ID)
			case content.TypeToolResult:
				results = append(results, b.ToolCallID+"="+content.JoinText(b.Content))
			}
		}
	}
	if strings.Join(calls, ",") != "same,same-2" || strings.Join(results, ",") != `same={"n":1},same-2={"n":2}` {
		t.Fatalf("next request: calls %v, results %v", calls, results)
	}
}
