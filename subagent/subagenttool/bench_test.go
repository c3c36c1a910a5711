package subagenttool_test

import (
	"context"
	"iter"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
)

var (
	benchChildAnswer = scripted.Text("child answer")
	benchParentDone  = scripted.Text("parent done")
	benchDelegate    = scripted.ToolCalls("", scripted.Call{ID: "call_1", Name: "subagent",
		Arguments: `{"description":"bench","prompt":"do X"}`})
)

// benchRouter answers from the request alone, so it retains nothing between
// calls: a child (recognised by the delegation prompt section) answers at
// once; the parent calls the subagent tool once, then answers when its
// request carries the tool result, which must be the child's answer.
type benchRouter struct{ bad atomic.Int64 }

func (m *benchRouter) stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	e := benchDelegate
	switch last := req.Messages[len(req.Messages)-1]; {
	case isChild(req):
		e = benchChildAnswer
	case last.Source.Kind == content.SourceTool:
		// A continuable child's answer (the jsonl default) follows its id line.
		if b := last.Content[0]; b.IsError || !strings.HasSuffix(content.JoinText(b.Content), "child answer") {
			m.bad.Add(1)
		}
		e = benchParentDone
	}
	return scripted.New(e).Stream(ctx, req)
}

// benchSubagentTool measures one parent turn on a long-lived parent: the
// model calls the subagent tool (spawn, foreground), the child answers at
// once, the tool result reaches the parent's next request, the parent
// answers.
func benchSubagentTool(b *testing.B, backend session.Backend) {
	ctx := context.Background()
	rt, err := dsh.New(dsh.Options{Backend: backend})
	if err != nil {
		b.Fatal(err)
	}
	m := &benchRouter{}
	if _, err := rt.LLM.Register("test", llm.ModelFunc(m.stream)); err != nil {
		b.Fatal(err)
	}
	for _, mk := range []func(*agent.Registry) (*inproc.Provider, error){inproc.NewSpawn, inproc.NewFork} {
		p, _ := mk(rt.Agents)
		if _, err := rt.Subagents.Register(p); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events},
		subagenttool.Config{Provider: inproc.SpawnName}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := rt.Close(ctx); err != nil {
			b.Error(err)
		}
	}()
	parent, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: b.TempDir(), Options: agent.Options{Provider: "test"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		end, err := parent.Run(ctx, content.UserText("delegate"))
		if err != nil {
			b.Fatal(err)
		}
		if end.Reason.Kind != session.EndCompleted {
			b.Fatalf("parent turn ended %+v", end.Reason)
		}
	}
	b.StopTimer()
	if n := m.bad.Load(); n > 0 {
		b.Fatalf("%d tool results were not the child's answer", n)
	}
	if n := len(rt.Agents.List()); n != 1 {
		b.Fatalf("%d live agents after the loop, want the parent alone", n)
	}
}

// BenchmarkSubagentToolTurn measures a whole parent turn with one
// foreground delegation through the subagent tool: tool call → child →
// tool result → the parent's answer.
func BenchmarkSubagentToolTurn(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchSubagentTool(b, nil) })
	b.Run("jsonl", func(b *testing.B) { benchSubagentTool(b, jsonl.New(b.TempDir())) })
}
