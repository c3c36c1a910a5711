package inproc_test

import (
	"context"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/tool"
)

// benchDelegation measures one delegation round trip (Start → Wait →
// Dispose) on a scripted model that answers at once.
func benchDelegation(b *testing.B, backend session.Backend, mk func(*agent.Registry) (*inproc.Provider, error)) {
	bus := event.New(nil)
	store := session.NewStore(backend, bus)
	models := llm.NewRegistry()
	models.Register("test", scripted.Repeat(scripted.Text("one"), scripted.Text("done")))
	agents := agent.NewRegistry(agent.Deps{Sessions: store, LLM: models, Tools: tool.NewRegistry(), Prompt: prompt.NewRegistry(), Events: bus})
	parent, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: b.TempDir(), Options: agent.Options{Provider: "test"}})
	if err != nil {
		b.Fatal(err)
	}
	defer agents.DisposeAll(context.Background())
	parent.Run(context.Background(), content.UserText("a completed turn for fork to inherit"))
	p, _ := mk(agents)
	svc := subagent.NewService(bus, nil)
	svc.Register(p)
	req := subagent.StartRequest{Prompt: []content.Block{content.Text("do it")}, Parent: parent}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		run, err := svc.Start(ctx, p.Name(), req)
		if err != nil {
			b.Fatal(err)
		}
		if res, _ := run.Wait(ctx); res.StopReason != subagent.Completed {
			b.Fatalf("stop %s: %s", res.StopReason, res.Diagnostic)
		}
		if err := run.Dispose(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSpawnDelegation(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchDelegation(b, nil, inproc.NewSpawn) })
	b.Run("jsonl", func(b *testing.B) { benchDelegation(b, jsonl.New(b.TempDir()), inproc.NewSpawn) })
}

func BenchmarkForkDelegation(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchDelegation(b, nil, inproc.NewFork) })
	b.Run("jsonl", func(b *testing.B) { benchDelegation(b, jsonl.New(b.TempDir()), inproc.NewFork) })
}
