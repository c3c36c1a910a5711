package agent_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// A retry the adapter reports is logged with the turn and step of the
// call it retries and the provider of that call, in every step.
func TestRetriesAreLoggedWithTheirStep(t *testing.T) {
	inner := scripted.New(
		scripted.ToolCalls("checking", scripted.Call{ID: "c1", Name: "echo", Arguments: `{"text":"a"}`}),
		scripted.Text("done"))
	retrying := llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		req.OnRetry(llm.Retry{Attempt: 1, Max: 3, Delay: 2 * time.Millisecond, Failure: &content.Failure{Code: "RATE_LIMITED", Message: "slow down"}})
		return inner.Stream(ctx, req)
	})
	bus := event.New(nil)
	reg := llm.NewRegistry()
	if _, err := reg.Register("test", retrying); err != nil {
		t.Fatal(err)
	}
	tools := tool.NewRegistry()
	if _, err := tools.Register(echoTool("echo", false)); err != nil {
		t.Fatal(err)
	}
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, bus), LLM: reg, Tools: tools, Prompt: prompt.NewRegistry(), Events: bus})
	t.Cleanup(func() {
		if err := agents.DisposeAll(context.Background()); err != nil {
			t.Errorf("dispose: %v", err)
		}
	})
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if end := run(t, a, "go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	var got []session.LLMRetry
	for _, e := range a.Session().Events() {
		if r, ok := e.Data.(session.LLMRetry); ok {
			got = append(got, r)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d retries logged, want 2: %+v", len(got), got)
	}
	for i, r := range got {
		if r.Turn != 1 || r.Step != i+1 || r.Provider != "test" || r.Retry != 1 || r.MaxRetries != 3 || r.DelayMs != 2 ||
			r.Failure == nil || r.Failure.Code != "RATE_LIMITED" {
			t.Errorf("retry %d logged as %+v", i, r)
		}
	}
}
