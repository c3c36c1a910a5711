package agent_test

import (
	"context"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/tool"
)

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A million one-byte deltas: the session file and the live heap stay
// bounded by the text's size (stored deltas are coalesced), every delta
// still reaches observers, and the stored chunks replay to the answer.
func TestMillionDeltasStayBounded(t *testing.T) {
	const n = 1_000_000
	var want strings.Builder
	for i := range n {
		want.WriteByte(byte('a' + i%26))
	}
	base := liveHeap()
	var peak uint64
	model := llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			for i := range n {
				if i%250_000 == 0 {
					peak = max(peak, liveHeap())
				}
				if !yield(content.Chunk{Type: content.ChunkTextDelta, Text: want.String()[i : i+1]}) {
					return
				}
			}
			yield(content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishStop}})
		}
	})
	root := t.TempDir()
	bus := event.New(nil)
	models := llm.NewRegistry()
	models.Register("test", model)
	reg := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(jsonl.New(root), bus), LLM: models,
		Tools: tool.NewRegistry(), Prompt: prompt.NewRegistry(), Events: bus})
	defer reg.DisposeAll(context.Background())
	a, err := reg.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	defer a.Session().Observe(func(e session.Event) {
		if c, ok := e.Data.(session.AssistantChunk); ok && c.Chunk.Type == content.ChunkTextDelta {
			seen++
		}
	})()
	if end := run(t, a, "stream"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("turn ended %+v", end)
	}
	peak = max(peak, liveHeap())
	if seen != n {
		t.Errorf("observers saw %d deltas, want %d", seen, n)
	}
	if grown := int64(peak) - int64(base); grown > 16*n {
		t.Errorf("the live heap grew by %d KB for %d KB of text", grown>>10, n>>10)
	}
	events := a.Session().Events()
	var replay content.Assembler
	chunks := 0
	for _, e := range events {
		if c, ok := e.Data.(session.AssistantChunk); ok {
			replay.Add(c.Chunk)
			chunks++
		}
	}
	if got := content.JoinText(replay.Blocks()); got != want.String() {
		t.Errorf("stored chunks replay to %d bytes, want the %d streamed", len(got), n)
	}
	if max := n/session.MaxCoalesced + 2; chunks > max {
		t.Errorf("%d chunk events stored, want at most %d", chunks, max)
	}
	if err := a.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "*", "*"+jsonl.Ext))
	if len(files) != 1 {
		t.Fatalf("session files %v", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 3*n { // the chunks and the assembled answer, each about the text's size
		t.Errorf("the session file is %d KB for %d KB of text", fi.Size()>>10, n>>10)
	}
	t.Logf("%d deltas: %d stored chunk events, file %d KB, live heap grew by %d KB", n, chunks, fi.Size()>>10, (int64(peak)-int64(base))>>10)
}
