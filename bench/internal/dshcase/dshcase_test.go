package dshcase

import (
	"context"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/prompt"
)

// BenchmarkDelegation is compare's dsh case as a Go benchmark, for
// profiling: a fresh parent whose turn delegates once through the subagent
// tool, on a store that keeps nothing.
func BenchmarkDelegation(b *testing.B) {
	e, err := New(Options{Backend: NullBackend{}, Tool: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	cwd := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Delegation(context.Background(), cwd); err != nil {
			b.Fatal(err)
		}
	}
}

// lastUser reads a message as prompt.SplitChildTask reads its text joined.
func TestLastUserIsSplitChildTaskOfTheJoin(t *testing.T) {
	framed := prompt.FrameChildInstructions("be brief")
	for _, blocks := range [][]content.Block{
		{content.Text(framed), content.Text("do X")},
		{content.Text(framed + "do"), content.Text(" X")},
		{content.Text(framed), content.Text("do"), content.Text(" X")},
		{content.Text(framed + "do X")},
		{content.Text(prompt.ChildInstructionsOpen + "no close"), content.Text(prompt.ChildInstructionsClose + "do X")},
		{content.Text("plain"), content.Text(" task")},
		{content.Text(framed), content.ToolCall("c", "n", "{}")},
		{},
	} {
		msgs := []content.Message{content.UserMessage(blocks...), content.AssistantMessage("p", "m", []content.Block{content.Text("x")})}
		_, wantTask, wantChild := prompt.SplitChildTask(content.JoinText(blocks))
		if task, child := lastUser(msgs); task != wantTask || child != wantChild {
			t.Errorf("%+v: lastUser = %q, %v; want %q, %v", blocks, task, child, wantTask, wantChild)
		}
	}
}
