//go:build !race

// The race detector doubles the runtime's nosplit reserve that the GC counts
// as in use when it decides to shrink a stack (1,600 bytes instead of 800),
// so that under -race no parked stack of this depth shrinks; bench/cmd/guard
// checks the same figure on CI's plain build.

package agent_test

import (
	"context"
	"iter"
	"runtime"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// A child parked in its model call holds a 4 KiB goroutine stack, not 8.
// The GC shrinks a parked stack when its frames and the runtime's nosplit
// reserve (800 bytes) use less than a quarter of it, so the frames under
// the park (the driver's loop, the registry's stream, the model's) must
// stay under 1,248 bytes. Thousands of children park like this at once.
func TestParkedTurnStackShrinks(t *testing.T) {
	const n = 200
	parked := make(chan struct{}, n)
	release := make(chan struct{})
	model := llm.ModelFunc(func(ctx context.Context, _ *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			parked <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
			yield(content.Chunk{Type: content.ChunkTextDelta, Text: "done"})
		}
	})
	bus := event.New(nil)
	models := llm.NewRegistry()
	if _, err := models.Register("parked", model); err != nil {
		t.Fatal(err)
	}
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, bus), LLM: models, Tools: tool.NewRegistry(),
		Prompt: prompt.NewRegistry(), Events: bus})
	t.Cleanup(func() {
		if err := agents.DisposeAll(context.Background()); err != nil {
			t.Errorf("dispose: %v", err)
		}
	})
	cwd := t.TempDir()
	parent, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "parked"}})
	if err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var ended sync.WaitGroup
	ended.Add(n)
	for range n {
		a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: cwd, Owner: parent, ParentSession: parent.ID(),
			DelegationDepth: 1, Options: agent.Options{Provider: "parked"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Submit(content.UserText("hi"), func(session.TurnEnd) { ended.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-parked
	}
	runtime.GC() // shrinks the parked stacks
	runtime.GC()
	runtime.ReadMemStats(&after)
	close(release)
	ended.Wait()

	per := (int64(after.StackInuse) - int64(before.StackInuse)) / n
	t.Logf("goroutine stacks per parked child: %d B", per)
	if per > 6<<10 {
		t.Fatalf("a parked child holds %d B of goroutine stack, want 4 KiB: the frames under its model call grew past 1,248 bytes", per)
	}
}
