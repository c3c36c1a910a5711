package agent_test

import (
	"context"
	"iter"
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

// benchModel answers from the request alone (so that it retains nothing
// between calls, unlike a long scripted.Repeat, which records every
// request): a tool result gets a text answer, the prompt "tool" gets one
// call of the echo tool, anything else a text answer.
func benchModel(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	last := req.Messages[len(req.Messages)-1]
	e := benchText
	if last.Source.Kind == content.SourceUser && content.JoinText(last.Content) == "tool" {
		e = benchCall
	}
	return scripted.New(e).Stream(ctx, req)
}

var (
	benchText = scripted.Text("done")
	benchCall = scripted.ToolCalls("", scripted.Call{ID: "call_1", Name: "echo", Arguments: `{"text":"hi"}`})
)

type echoArgs struct {
	Text string `json:"text"`
}

// benchAgents is a registry on the memory store whose model is benchModel
// and whose global tools hold echo.
func benchAgents(b *testing.B) *agent.Registry {
	bus := event.New(nil)
	models := llm.NewRegistry()
	if _, err := models.Register("test", llm.ModelFunc(benchModel)); err != nil {
		b.Fatal(err)
	}
	tools := tool.NewRegistry()
	if _, err := tools.Register(tool.Func("echo", "Echo the text.", true,
		func(_ context.Context, _ tool.Call, a echoArgs) (tool.Result, error) {
			return tool.TextResult(a.Text), nil
		})); err != nil {
		b.Fatal(err)
	}
	reg := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, bus), LLM: models, Tools: tools, Prompt: prompt.NewRegistry(), Events: bus})
	b.Cleanup(func() {
		if err := reg.DisposeAll(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return reg
}

func benchRun(b *testing.B, a *agent.Agent, text string) {
	end, err := a.Run(context.Background(), content.UserText(text))
	if err != nil {
		b.Fatal(err)
	}
	if end.Reason.Kind != session.EndCompleted {
		b.Fatalf("turn ended %+v", end.Reason)
	}
}

// benchTurns measures one turn on prompt text: "same" runs every turn on
// one agent (its log grows with b.N), "fresh" creates an agent, runs the
// turn and disposes it.
func benchTurns(b *testing.B, text string) {
	ctx := context.Background()
	b.Run("same", func(b *testing.B) {
		reg := benchAgents(b)
		a, err := reg.Create(ctx, agent.CreateOptions{Cwd: b.TempDir(), Options: agent.Options{Provider: "test"}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			benchRun(b, a, text)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		reg := benchAgents(b)
		cwd := b.TempDir()
		b.ReportAllocs()
		for b.Loop() {
			a, err := reg.Create(ctx, agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test"}})
			if err != nil {
				b.Fatal(err)
			}
			benchRun(b, a, text)
			if err := a.Dispose(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTurn measures a turn whose single model call answers text at
// once (memory store).
func BenchmarkTurn(b *testing.B) { benchTurns(b, "hello") }

// BenchmarkToolTurn measures a turn of two model calls: one call of a
// trivial tool, then a text answer (memory store).
func BenchmarkToolTurn(b *testing.B) { benchTurns(b, "tool") }
