package scripted_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func collect(ctx context.Context, m llm.Model, req *llm.Request) []content.Chunk {
	var out []content.Chunk
	for c := range m.Stream(ctx, req) {
		out = append(out, c)
	}
	return out
}

func assemble(chunks []content.Chunk) *content.Assembler {
	var a content.Assembler
	for _, c := range chunks {
		a.Add(c)
	}
	return &a
}

// wellFormed asserts exactly one finish, last, and returns it.
func wellFormed(t *testing.T, chunks []content.Chunk) content.Finish {
	t.Helper()
	if len(chunks) == 0 {
		t.Fatal("empty stream")
	}
	for i, c := range chunks[:len(chunks)-1] {
		if c.Type == content.ChunkFinish {
			t.Fatalf("finish at %d before the end: %+v", i, chunks)
		}
	}
	last := chunks[len(chunks)-1]
	if last.Type != content.ChunkFinish || last.Finish == nil {
		t.Fatalf("last chunk %+v is not a finish", last)
	}
	return *last.Finish
}

func req(text string) *llm.Request {
	return &llm.Request{Provider: "scripted", Model: "m", Messages: []content.Message{content.UserText(text)}}
}

func TestEntriesPlayedInOrderAndRequestsRecorded(t *testing.T) {
	m := scripted.New(scripted.Text("one"), scripted.Text("two"), scripted.MaxTokens("three"))
	if m.Remaining() != 3 {
		t.Fatalf("Remaining = %d, want 3", m.Remaining())
	}
	r1, r2, r3 := req("a"), req("b"), req("c")
	var texts []string
	for i, r := range []*llm.Request{r1, r2, r3} {
		chunks := collect(t.Context(), m, r)
		f := wellFormed(t, chunks)
		a := assemble(chunks)
		texts = append(texts, content.JoinText(a.Blocks()))
		wantKind := content.FinishStop
		if i == 2 {
			wantKind = content.FinishMaxTokens
		}
		if f.Kind != wantKind {
			t.Errorf("call %d finish = %s, want %s", i, f.Kind, wantKind)
		}
		if u := a.Usage(); u == nil || u.IsZero() {
			t.Errorf("call %d: no usage chunk", i)
		}
	}
	if want := []string{"one", "two", "three"}; !cmp.Equal(texts, want) {
		t.Errorf("texts = %v, want %v", texts, want)
	}
	got := m.Requests()
	if len(got) != 3 || got[0] != r1 || got[1] != r2 || got[2] != r3 {
		t.Errorf("Requests = %v, want the three requests in order", got)
	}
	if m.Remaining() != 0 {
		t.Errorf("Remaining = %d, want 0", m.Remaining())
	}
	// Requests returns a copy.
	got[0] = nil
	if m.Requests()[0] != r1 {
		t.Error("Requests exposes internal state")
	}
}

func TestTextChunkShape(t *testing.T) {
	chunks := collect(t.Context(), scripted.New(scripted.Text("hello")), req("x"))
	types := make([]content.ChunkType, len(chunks))
	for i, c := range chunks {
		types[i] = c.Type
	}
	want := []content.ChunkType{content.ChunkBlockStart, content.ChunkTextDelta, content.ChunkTextDelta,
		content.ChunkBlockEnd, content.ChunkUsage, content.ChunkFinish}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Fatalf("chunk types (-want +got):\n%s", diff)
	}
	if chunks[1].Text+chunks[2].Text != "hello" || chunks[1].Text == "" || chunks[2].Text == "" {
		t.Errorf("deltas %q + %q, want two non-empty halves of hello", chunks[1].Text, chunks[2].Text)
	}
	if chunks[3].Block == nil || !cmp.Equal(*chunks[3].Block, content.Text("hello")) {
		t.Errorf("block-end block = %+v", chunks[3].Block)
	}
}

func TestExhaustedScript(t *testing.T) {
	m := scripted.New(scripted.Text("only"))
	collect(t.Context(), m, req("a"))
	for i := range 2 {
		chunks := collect(t.Context(), m, req("b"))
		if len(chunks) != 1 {
			t.Fatalf("exhausted call %d: %d chunks, want one finish", i, len(chunks))
		}
		f := wellFormed(t, chunks)
		if f.Kind != content.FinishError || f.Failure == nil || f.Failure.Code != "SCRIPT_EXHAUSTED" {
			t.Errorf("exhausted finish = %+v, want error SCRIPT_EXHAUSTED", f)
		}
	}
	if n := len(m.Requests()); n != 3 {
		t.Errorf("Requests recorded %d, want 3 (exhausted calls included)", n)
	}
	// An empty script is exhausted from the start.
	chunks := collect(t.Context(), scripted.New(), req("x"))
	if f := wellFormed(t, chunks); f.Failure == nil || f.Failure.Code != "SCRIPT_EXHAUSTED" {
		t.Errorf("empty script finish = %+v", f)
	}
}

func TestHangBlocksUntilCancel(t *testing.T) {
	m := scripted.New(scripted.Hang("partial"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	got := make(chan content.Chunk)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range m.Stream(ctx, req("x")) {
			got <- c
		}
	}()

	var chunks []content.Chunk
	// The partial text arrives before any cancellation.
	for len(chunks) < 2 {
		chunks = append(chunks, <-got)
	}
	select {
	case c := <-got:
		t.Fatalf("hang entry yielded %+v before cancellation", c)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	chunks = append(chunks, <-got)
	<-done

	f := wellFormed(t, chunks)
	if f.Kind != content.FinishAborted || f.Failure == nil || f.Failure.Code != llm.CodeAborted {
		t.Errorf("finish = %+v, want aborted ABORTED", f)
	}
	if got := assemble(chunks).Interrupted(); len(got) != 1 || got[0].Text != "partial" {
		t.Errorf("interrupted blocks = %+v, want the partial text", got)
	}
}

func TestHangWithoutText(t *testing.T) {
	m := scripted.New(scripted.Hang(""))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	chunks := collect(ctx, m, req("x"))
	if len(chunks) != 1 {
		t.Fatalf("chunks = %+v, want one aborted finish", chunks)
	}
	f := wellFormed(t, chunks)
	if f.Kind != content.FinishAborted || !strings.Contains(f.Failure.Message, context.DeadlineExceeded.Error()) {
		t.Errorf("finish = %+v, want aborted naming the deadline", f)
	}
}

func TestCancelledBeforeStreaming(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errors.New("stop now"))
	chunks := collect(ctx, scripted.New(scripted.Text("never")), req("x"))
	if len(chunks) != 1 {
		t.Fatalf("chunks = %+v, want only an aborted finish", chunks)
	}
	f := wellFormed(t, chunks)
	if f.Kind != content.FinishAborted || !strings.Contains(f.Failure.Message, "stop now") {
		t.Errorf("finish = %+v, want aborted with the cause", f)
	}
}

func TestToolCalls(t *testing.T) {
	calls := []scripted.Call{
		{ID: "call_a", Name: "read_file", Arguments: `{"path":"main.go","limit":20}`},
		{Name: "bash", Arguments: `{"command":"ls -la"}`},
	}
	chunks := collect(t.Context(), scripted.New(scripted.ToolCalls("Let me look.", calls...)), req("x"))
	f := wellFormed(t, chunks)
	if f.Kind != content.FinishToolCalls {
		t.Errorf("finish = %s, want tool-calls", f.Kind)
	}

	// Each call's arguments arrive in exactly two non-empty deltas that
	// are not individually valid JSON.
	deltas := map[int][]string{}
	for _, c := range chunks {
		if c.Type == content.ChunkToolCallDelta {
			deltas[c.Index] = append(deltas[c.Index], c.ArgumentsDelta)
		}
	}
	for i, call := range calls {
		d := deltas[i+1]
		if len(d) != 2 || d[0] == "" || d[1] == "" || d[0]+d[1] != call.Arguments {
			t.Errorf("call %d deltas = %q, want two halves of %q", i, d, call.Arguments)
		}
		if json.Valid([]byte(d[0])) {
			t.Errorf("call %d first delta %q is already complete JSON", i, d[0])
		}
	}

	want := []content.Block{
		content.Text("Let me look."),
		content.ToolCall("call_a", "read_file", calls[0].Arguments),
		content.ToolCall("call_1_bash", "bash", calls[1].Arguments),
	}
	if diff := cmp.Diff(want, assemble(chunks).Blocks()); diff != "" {
		t.Errorf("assembled blocks (-want +got):\n%s", diff)
	}

	// The blocks also assemble from deltas alone (block-ends dropped).
	var deltaOnly []content.Chunk
	for _, c := range chunks {
		if c.Type != content.ChunkBlockEnd {
			deltaOnly = append(deltaOnly, c)
		}
	}
	if diff := cmp.Diff(want, assemble(deltaOnly).Blocks()); diff != "" {
		t.Errorf("delta-assembled blocks (-want +got):\n%s", diff)
	}
}

func TestToolCallsWithoutText(t *testing.T) {
	chunks := collect(t.Context(), scripted.New(scripted.ToolCalls("", scripted.Call{ID: "c", Name: "n", Arguments: "{}"})), req("x"))
	want := []content.Block{content.ToolCall("c", "n", "{}")}
	if diff := cmp.Diff(want, assemble(chunks).Blocks()); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	if chunks[0].Type != content.ChunkBlockStart || chunks[0].Index != 0 {
		t.Errorf("first chunk = %+v, want block-start at index 0", chunks[0])
	}
}

func TestToolCallsMultiByteArguments(t *testing.T) {
	args := `{"q":"ééé"}` // 13 bytes: the byte split at 6 falls inside an é
	chunks := collect(t.Context(), scripted.New(scripted.ToolCalls("", scripted.Call{ID: "c", Name: "n", Arguments: args})), req("x"))
	for _, c := range chunks {
		if c.Type == content.ChunkToolCallDelta && !utf8.ValidString(c.ArgumentsDelta) {
			t.Errorf("delta %q splits a rune", c.ArgumentsDelta)
		}
	}
}

func TestTextDoesNotSplitRunes(t *testing.T) {
	for _, s := range []string{"héllo wörld", "日本語のテキスト", "a日", "日a", "😀😀😀", "é", "x", "ab"} {
		chunks := collect(t.Context(), scripted.New(scripted.Text(s)), req("x"))
		var joined string
		for _, c := range chunks {
			if c.Type == content.ChunkTextDelta {
				if !utf8.ValidString(c.Text) {
					t.Errorf("Text(%q): delta %q splits a rune", s, c.Text)
				}
				joined += c.Text
			}
		}
		if joined != s {
			t.Errorf("Text(%q): deltas join to %q", s, joined)
		}
		if got := content.JoinText(assemble(chunks).Blocks()); got != s {
			t.Errorf("Text(%q) assembles to %q", s, got)
		}
	}
}

func TestEmptyText(t *testing.T) {
	chunks := collect(t.Context(), scripted.New(scripted.Text("")), req("x"))
	if f := wellFormed(t, chunks); f.Kind != content.FinishStop {
		t.Errorf("finish = %+v", f)
	}
	if content.HasVisibleText(assemble(chunks).Blocks()) {
		t.Error("empty Text has visible text")
	}
}

func TestRepeatCycles(t *testing.T) {
	m := scripted.Repeat(scripted.Text("a"), scripted.Text("b"))
	var got []string
	for range 5 {
		got = append(got, content.JoinText(assemble(collect(t.Context(), m, req("x"))).Blocks()))
	}
	if want := []string{"a", "b", "a", "b", "a"}; !cmp.Equal(got, want) {
		t.Errorf("Repeat played %v, want %v", got, want)
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("Requests = %d: Repeat must not keep requests", n)
	}
	// Repeat with nothing to repeat is exhausted.
	chunks := collect(t.Context(), scripted.Repeat(), req("x"))
	if f := wellFormed(t, chunks); f.Failure == nil || f.Failure.Code != "SCRIPT_EXHAUSTED" {
		t.Errorf("empty Repeat finish = %+v", f)
	}
}

func TestEcho(t *testing.T) {
	m := scripted.New(scripted.Echo("you said: "))
	r := &llm.Request{Messages: []content.Message{
		content.UserText("first"),
		content.AssistantMessage("p", "m", []content.Block{content.Text("reply")}),
		content.UserMessage(content.Text("  second "), content.Text("part  ")),
		content.ToolResultMessage("c1", []content.Block{content.Text("tool output")}, false),
		content.AssistantMessage("p", "m", []content.Block{content.Text("later reply")}),
	}}
	chunks := collect(t.Context(), m, r)
	if f := wellFormed(t, chunks); f.Kind != content.FinishStop {
		t.Errorf("finish = %+v", f)
	}
	if got, want := content.JoinText(assemble(chunks).Blocks()), "you said: part"; got != want { // the last text block
		t.Errorf("Echo = %q, want %q", got, want)
	}

	chunks = collect(t.Context(), scripted.New(scripted.Echo("empty: ")), &llm.Request{})
	if got := content.JoinText(assemble(chunks).Blocks()); got != "empty: " {
		t.Errorf("Echo without user message = %q", got)
	}
}

func TestReplyAndRawChunks(t *testing.T) {
	reply := scripted.Entry{Reply: func(r *llm.Request) []content.Chunk {
		return []content.Chunk{{Type: content.ChunkTextDelta, Text: "model=" + r.Model}}
	}}
	// Chunks that stop at an explicit finish: nothing after it is streamed.
	explicit := scripted.Entry{Chunks: []content.Chunk{
		{Type: content.ChunkTextDelta, Text: "x"},
		{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishToolCalls}},
		{Type: content.ChunkTextDelta, Text: "after"},
	}}
	m := scripted.New(reply, explicit)

	chunks := collect(t.Context(), m, &llm.Request{Model: "deepseek-flash"})
	if f := wellFormed(t, chunks); f.Kind != content.FinishStop {
		t.Errorf("reply without finish got %+v, want appended stop", f)
	}
	if got := content.JoinText(assemble(chunks).Blocks()); got != "model=deepseek-flash" {
		t.Errorf("reply text = %q", got)
	}

	chunks = collect(t.Context(), m, req("x"))
	if f := wellFormed(t, chunks); f.Kind != content.FinishToolCalls || len(chunks) != 2 {
		t.Errorf("explicit-finish entry streamed %+v", chunks)
	}
}

func TestFail(t *testing.T) {
	chunks := collect(t.Context(), scripted.New(scripted.Fail(llm.CodeRateLimit, "slow down")), req("x"))
	if len(chunks) != 1 {
		t.Fatalf("chunks = %+v", chunks)
	}
	f := wellFormed(t, chunks)
	want := content.Finish{Kind: content.FinishError, Failure: &content.Failure{Code: llm.CodeRateLimit, Message: "slow down"}}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("finish (-want +got):\n%s", diff)
	}
}

func TestConsumerBreaksEarly(t *testing.T) {
	m := scripted.New(scripted.Text("hello"), scripted.Text("next"))
	for range m.Stream(t.Context(), req("x")) {
		break // must not panic
	}
	// The broken-off entry is consumed; the next call plays the next one.
	if got := content.JoinText(assemble(collect(t.Context(), m, req("y"))).Blocks()); got != "next" {
		t.Errorf("second call = %q, want next", got)
	}
	// Breaking at a hang entry's partial text does not block.
	h := scripted.New(scripted.Hang("partial"))
	for range h.Stream(t.Context(), req("x")) {
		break
	}
}

func TestThroughRegistry(t *testing.T) {
	r := llm.NewRegistry()
	m := scripted.New(scripted.Text("hi"))
	dispose, err := r.Register("scripted", m)
	if err != nil {
		t.Fatal(err)
	}
	defer dispose()
	var chunks []content.Chunk
	for c := range r.Stream(t.Context(), req("x")) {
		chunks = append(chunks, c)
	}
	if f := wellFormed(t, chunks); f.Kind != content.FinishStop {
		t.Errorf("finish = %+v", f)
	}
	if got := content.JoinText(assemble(chunks).Blocks()); got != "hi" {
		t.Errorf("text = %q", got)
	}
	chunks = nil
	for c := range r.Stream(t.Context(), req("x")) {
		chunks = append(chunks, c)
	}
	if f := wellFormed(t, chunks); f.Failure == nil || f.Failure.Code != "SCRIPT_EXHAUSTED" {
		t.Errorf("exhausted via registry = %+v", f)
	}
}

func TestConcurrentCallersConsumeEachEntryOnce(t *testing.T) {
	const n = 20
	entries := make([]scripted.Entry, n)
	for i := range entries {
		entries[i] = scripted.Text(strings.Repeat("x", i+1))
	}
	m := scripted.New(entries...)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			text := content.JoinText(assemble(collect(context.Background(), m, req("x"))).Blocks())
			mu.Lock()
			seen[text]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d distinct entries played, want %d: %v", len(seen), n, seen)
	}
	for text, c := range seen {
		if c != 1 {
			t.Errorf("entry %q played %d times", text, c)
		}
	}
	if m.Remaining() != 0 || len(m.Requests()) != n {
		t.Errorf("Remaining = %d, Requests = %d", m.Remaining(), len(m.Requests()))
	}
}

func TestHangAfterChunks(t *testing.T) {
	// Entry{Chunks, Hang}: the given chunks, then block until cancelled.
	e := scripted.Text("said")
	e.Chunks = e.Chunks[:4] // block-start, deltas, block-end: no usage, no finish
	e.Hang = true
	m := scripted.New(e)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var chunks []content.Chunk
	for c := range m.Stream(ctx, req("x")) {
		chunks = append(chunks, c)
		if c.Type == content.ChunkBlockEnd {
			cancel()
		}
	}
	f := wellFormed(t, chunks)
	if f.Kind != content.FinishAborted {
		t.Errorf("finish = %+v, want aborted", f)
	}
	if got := content.JoinText(assemble(chunks).Interrupted()); got != "said" {
		t.Errorf("interrupted text = %q, want said", got)
	}
}
