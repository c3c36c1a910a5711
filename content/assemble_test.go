package content_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dsh-go/dsh/content"
)

// Chunk helpers.

func start(i int, t content.BlockType) content.Chunk {
	return content.Chunk{Type: content.ChunkBlockStart, Index: i, BlockType: t}
}

func textDelta(i int, s string) content.Chunk {
	return content.Chunk{Type: content.ChunkTextDelta, Index: i, Text: s}
}

func reasoningDelta(i int, s string) content.Chunk {
	return content.Chunk{Type: content.ChunkReasoningDelta, Index: i, Text: s}
}

func callDelta(i int, id, name, args string) content.Chunk {
	return content.Chunk{Type: content.ChunkToolCallDelta, Index: i, ID: id, Name: name, ArgumentsDelta: args}
}

func end(i int, b *content.Block) content.Chunk {
	return content.Chunk{Type: content.ChunkBlockEnd, Index: i, Block: b}
}

func finish(k content.FinishKind) content.Chunk {
	return content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: k}}
}

func ptr(b content.Block) *content.Block { return &b }

func assemble(chunks ...content.Chunk) *content.Assembler {
	var a content.Assembler
	for _, c := range chunks {
		a.Add(c)
	}
	return &a
}

func TestAssemblerBlocks(t *testing.T) {
	tests := []struct {
		name   string
		chunks []content.Chunk
		want   []content.Block
	}{
		{
			name: "empty stream",
			want: []content.Block{},
		},
		{
			name: "full text block",
			chunks: []content.Chunk{
				start(0, content.TypeText), textDelta(0, "Hel"), textDelta(0, "lo"),
				end(0, ptr(content.Text("Hello"))), finish(content.FinishStop),
			},
			want: []content.Block{content.Text("Hello")},
		},
		{
			name: "first-seen index order, interleaved",
			chunks: []content.Chunk{
				start(5, content.TypeReasoning),
				start(2, content.TypeText),
				reasoningDelta(5, "think "),
				textDelta(2, "an"),
				callDelta(9, "c9", "grep", `{"p":`),
				reasoningDelta(5, "hard"),
				textDelta(2, "swer"),
				callDelta(9, "", "", `"x"}`),
				finish(content.FinishToolCalls),
			},
			want: []content.Block{
				content.Reasoning("think hard"),
				content.Text("answer"),
				content.ToolCall("c9", "grep", `{"p":"x"}`),
			},
		},
		{
			name: "delta-only stream without start or end",
			chunks: []content.Chunk{
				reasoningDelta(0, "r"), textDelta(1, "a"), textDelta(1, "b"),
				callDelta(2, "id", "t", "{"), callDelta(2, "", "", "}"),
			},
			want: []content.Block{content.Reasoning("r"), content.Text("ab"), content.ToolCall("id", "t", "{}")},
		},
		{
			name: "deltas after block-end are ignored",
			chunks: []content.Chunk{
				start(0, content.TypeText), textDelta(0, "a"), end(0, nil),
				textDelta(0, "LATE"), start(0, content.TypeReasoning),
				callDelta(1, "c", "n", "{}"), end(1, nil), callDelta(1, "other", "other", "junk"),
			},
			want: []content.Block{content.Text("a"), content.ToolCall("c", "n", "{}")},
		},
		{
			name: "block-end block is authoritative",
			chunks: []content.Chunk{
				start(0, content.TypeText), textDelta(0, "garbled"),
				end(0, ptr(content.Text("clean"))),
				start(1, content.TypeToolCall), callDelta(1, "tmp", "wrong", `{"bad`),
				end(1, ptr(content.ToolCall("real", "right", `{"ok":true}`))),
			},
			want: []content.Block{content.Text("clean"), content.ToolCall("real", "right", `{"ok":true}`)},
		},
		{
			name: "block-end alone creates the block",
			chunks: []content.Chunk{
				end(3, ptr(content.Text("whole"))),
			},
			want: []content.Block{content.Text("whole")},
		},
		{
			name: "block-end without block on unseen index is ignored",
			chunks: []content.Chunk{
				end(3, nil), textDelta(4, "x"),
			},
			want: []content.Block{content.Text("x")},
		},
		{
			name: "tool call without id becomes call-<index>",
			chunks: []content.Chunk{
				start(0, content.TypeText), textDelta(0, "t"),
				start(4, content.TypeToolCall), callDelta(4, "", "run", "{}"),
				end(7, ptr(content.ToolCall("", "end", "{}"))),
			},
			want: []content.Block{
				content.Text("t"),
				content.ToolCall("call-4", "run", "{}"),
				content.ToolCall("call-7", "end", "{}"),
			},
		},
		{
			name: "block-start alone yields an empty block",
			chunks: []content.Chunk{
				start(0, content.TypeText),
			},
			want: []content.Block{content.Text("")},
		},
		{
			name: "usage and finish chunks create no block",
			chunks: []content.Chunk{
				{Type: content.ChunkUsage, Index: 0, Usage: &content.Usage{Input: 1}},
				textDelta(1, "x"),
				{Type: content.ChunkFinish, Index: 2, Finish: &content.Finish{Kind: content.FinishStop}},
			},
			want: []content.Block{content.Text("x")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := assemble(tt.chunks...)
			if diff := cmp.Diff(tt.want, a.Blocks()); diff != "" {
				t.Errorf("Blocks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAssemblerFinish(t *testing.T) {
	t.Run("missing finish counts as stop", func(t *testing.T) {
		a := assemble(textDelta(0, "x"))
		if got := a.Finish(); got.Kind != content.FinishStop || got.Failure != nil {
			t.Errorf("Finish = %+v, want stop", got)
		}
	})
	t.Run("finish kept with failure", func(t *testing.T) {
		f := &content.Finish{Kind: content.FinishError, Failure: &content.Failure{Code: "SERVER", Message: "500"}}
		a := assemble(textDelta(0, "x"), content.Chunk{Type: content.ChunkFinish, Finish: f})
		if diff := cmp.Diff(*f, a.Finish()); diff != "" {
			t.Errorf("Finish mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestAssemblerUsage(t *testing.T) {
	a := assemble(textDelta(0, "x"))
	if a.Usage() != nil {
		t.Errorf("Usage without usage chunk = %+v, want nil", a.Usage())
	}
	a = assemble(
		content.Chunk{Type: content.ChunkUsage, Usage: &content.Usage{Input: 1, Output: 1}},
		content.Chunk{Type: content.ChunkUsage, Usage: &content.Usage{Input: 7, Output: 3, CacheRead: 2}},
		finish(content.FinishStop),
	)
	want := content.Usage{Input: 7, Output: 3, CacheRead: 2}
	if got := a.Usage(); got == nil || *got != want {
		t.Errorf("Usage = %+v, want last usage %+v", got, want)
	}
}

func TestAssemblerMaxTokensDropsToolCalls(t *testing.T) {
	chunks := []content.Chunk{
		reasoningDelta(0, "r"),
		textDelta(1, "partial"),
		callDelta(2, "c2", "write", `{"path":"a`),
	}
	a := assemble(append(chunks, finish(content.FinishMaxTokens))...)
	want := []content.Block{content.Reasoning("r"), content.Text("partial")}
	if diff := cmp.Diff(want, a.Blocks()); diff != "" {
		t.Errorf("max-tokens Blocks mismatch (-want +got):\n%s", diff)
	}
	if got := a.Finish().Kind; got != content.FinishMaxTokens {
		t.Errorf("Finish kind = %s, want max-tokens", got)
	}

	// Other finishes keep the calls.
	for _, k := range []content.FinishKind{content.FinishStop, content.FinishToolCalls, content.FinishError, content.FinishAborted} {
		a := assemble(append(chunks, finish(k))...)
		if got := len(content.ToolCalls(a.Blocks())); got != 1 {
			t.Errorf("finish %s: %d tool calls, want 1", k, got)
		}
	}
}

func TestAssemblerInterrupted(t *testing.T) {
	a := assemble(
		reasoningDelta(0, "thinking"),
		textDelta(1, "   \n"),
		callDelta(2, "c", "run", `{"cmd":`),
		textDelta(3, "visible"),
		reasoningDelta(4, "\t"),
		end(5, ptr(content.Block{Type: content.TypeImage})),
		start(6, content.TypeText),
	)
	want := []content.Block{content.Reasoning("thinking"), content.Text("visible")}
	if diff := cmp.Diff(want, a.Interrupted()); diff != "" {
		t.Errorf("Interrupted mismatch (-want +got):\n%s", diff)
	}
	if got := assemble().Interrupted(); len(got) != 0 {
		t.Errorf("Interrupted of empty stream = %v, want empty", got)
	}
	if got := assemble(callDelta(0, "c", "n", "{}")).Interrupted(); len(got) != 0 {
		t.Errorf("Interrupted of tool-call-only stream = %v, want empty", got)
	}
}

func TestAssemblerBlocksIsRepeatable(t *testing.T) {
	a := assemble(textDelta(0, "a"), callDelta(1, "", "n", "{}"))
	first := a.Blocks()
	second := a.Blocks()
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("Blocks changed between calls (-first +second):\n%s", diff)
	}
	// Adding after reading continues the stream.
	a.Add(textDelta(0, "b"))
	if got := content.JoinText(a.Blocks()); got != "ab" {
		t.Errorf("text after further delta = %q, want ab", got)
	}
}

func TestAssemblerRenamesDuplicateCallIDs(t *testing.T) {
	a := assemble(
		callDelta(0, "x", "bash", "{}"), callDelta(1, "x", "bash", "{}"), callDelta(2, "x-2", "bash", "{}"),
		callDelta(3, "", "bash", "{}"), callDelta(4, "call-3", "bash", "{}"), finish(content.FinishToolCalls))
	var ids []string
	for _, c := range content.ToolCalls(a.Blocks()) {
		ids = append(ids, c.ID)
	}
	if diff := cmp.Diff([]string{"x", "x-2", "x-2-2", "call-3", "call-3-2"}, ids); diff != "" {
		t.Fatalf("ids (-want +got):\n%s", diff)
	}
}

// A one-block answer (block start, one delta, block end, usage, finish)
// costs one allocation, the Assembler: the block, its state and the text of
// its delta live in it, Blocks hands out its own storage and ToolCalls a
// part of it.
func TestAssemblerOneBlockAnswerAllocatesOnce(t *testing.T) {
	call := content.ToolCall("c1", "bash", `{"cmd":"ls"}`)
	for _, chunks := range [][]content.Chunk{
		{start(0, content.TypeText), textDelta(0, "hello"), end(0, ptr(content.Text("hello"))), finish(content.FinishStop)},
		{start(0, content.TypeToolCall), callDelta(0, "c1", "bash", `{"cmd":"ls"}`), end(0, &call), finish(content.FinishToolCalls)},
		{textDelta(0, "no block-end")},
	} {
		var blocks []content.Block
		allocs := testing.AllocsPerRun(100, func() {
			a := new(content.Assembler)
			for _, c := range chunks {
				a.Add(c)
			}
			blocks = a.Blocks()
			_ = content.ToolCalls(blocks)
		})
		if allocs > 1 {
			t.Errorf("%d chunks: %v allocations, want 1", len(chunks), allocs)
		}
		if len(blocks) != 1 {
			t.Errorf("%d chunks: blocks %+v", len(chunks), blocks)
		}
	}
}

// The blocks Blocks returned stay as they were when the stream goes on.
func TestAssemblerBlocksKeepTheirValue(t *testing.T) {
	a := assemble(textDelta(0, "a"), callDelta(1, "", "n", "{"))
	first := a.Blocks()
	want := []content.Block{content.Text("a"), content.ToolCall("call-1", "n", "{")}
	a.Add(textDelta(0, "b"))
	a.Add(callDelta(1, "", "", "}"))
	a.Add(textDelta(2, "c"))
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first Blocks changed (-want +got):\n%s", diff)
	}
	want = []content.Block{content.Text("ab"), content.ToolCall("call-1", "n", "{}"), content.Text("c")}
	if diff := cmp.Diff(want, a.Blocks()); diff != "" {
		t.Errorf("second Blocks (-want +got):\n%s", diff)
	}
}

// Many calls with one id get the ids a scan would give (the map past
// manyCalls finds the same).
func TestAssemblerRenamesManyDuplicateCallIDs(t *testing.T) {
	var a content.Assembler
	for i := range 20 {
		a.Add(callDelta(i, "x", "bash", "{}"))
	}
	a.Add(callDelta(20, "x-5", "bash", "{}"))
	var ids []string
	for _, c := range content.ToolCalls(a.Blocks()) {
		ids = append(ids, c.ID)
	}
	want := []string{"x"}
	for n := 2; n <= 20; n++ {
		want = append(want, fmt.Sprintf("x-%d", n))
	}
	want = append(want, "x-5-2")
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Fatalf("ids (-want +got):\n%s", diff)
	}
}
