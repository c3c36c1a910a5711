package llm_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func text(i int, s string) content.Chunk {
	return content.Chunk{Type: content.ChunkTextDelta, Index: i, Text: s}
}

func finish(k content.FinishKind) content.Chunk {
	return content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: k}}
}

// funcModel adapts a function to llm.Model through a pointer, so that the
// registry's disposer can compare it (see TestDisposeModelFunc).
type funcModel struct {
	fn func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk]
}

func (m *funcModel) Stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	return m.fn(ctx, req)
}

func model(fn func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk]) llm.Model {
	return &funcModel{fn: fn}
}

// fixed is a well-behaved model yielding chunks in order.
func fixed(chunks ...content.Chunk) llm.Model {
	return model(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			for _, c := range chunks {
				if !yield(c) {
					return
				}
			}
		}
	})
}

func collect(seq iter.Seq[content.Chunk]) []content.Chunk {
	var out []content.Chunk
	for c := range seq {
		out = append(out, c)
	}
	return out
}

func registry(t *testing.T, provider string, m llm.Model) *llm.Registry {
	t.Helper()
	r := llm.NewRegistry()
	dispose, err := r.Register(provider, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dispose)
	return r
}

// checkWellFormed asserts exactly one finish chunk, last.
func checkWellFormed(t *testing.T, chunks []content.Chunk) content.Finish {
	t.Helper()
	if len(chunks) == 0 {
		t.Fatal("empty stream")
	}
	for i, c := range chunks {
		if c.Type == content.ChunkFinish && i != len(chunks)-1 {
			t.Fatalf("finish at %d of %d chunks: %+v", i, len(chunks), chunks)
		}
	}
	last := chunks[len(chunks)-1]
	if last.Type != content.ChunkFinish || last.Finish == nil {
		t.Fatalf("last chunk %+v is not a finish", last)
	}
	return *last.Finish
}

func TestRegisterAndGet(t *testing.T) {
	r := llm.NewRegistry()
	a, b := fixed(finish(content.FinishStop)), fixed(finish(content.FinishStop))
	da, err := r.Register("alpha", a)
	if err != nil {
		t.Fatal(err)
	}
	defer da()
	db, err := r.Register("beta", b)
	if err != nil {
		t.Fatal(err)
	}
	defer db()
	if got := r.Providers(); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("Providers = %v", got)
	}
	m, err := r.Get("beta")
	if err != nil {
		t.Fatal(err)
	}
	if m != b {
		t.Error("Get returned another model")
	}
	// Providers returns a copy.
	p := r.Providers()
	p[0] = "mutated"
	if r.Providers()[0] != "alpha" {
		t.Error("Providers exposes internal state")
	}
}

func TestRegisterDuplicateRefused(t *testing.T) {
	first := fixed(text(0, "first"), finish(content.FinishStop))
	r := registry(t, "deepseek", first)
	_, err := r.Register("deepseek", fixed(text(0, "second"), finish(content.FinishStop)))
	if !errors.Is(err, &llm.Error{Code: llm.CodeDuplicate}) {
		t.Fatalf("duplicate Register error = %v, want %s", err, llm.CodeDuplicate)
	}
	if !strings.Contains(err.Error(), "deepseek") {
		t.Errorf("error %q does not name the provider", err)
	}
	chunks := collect(r.Stream(t.Context(), &llm.Request{Provider: "deepseek"}))
	if len(chunks) != 2 || chunks[0].Text != "first" {
		t.Errorf("after refused duplicate, stream = %+v", chunks)
	}
	if got := r.Providers(); !slices.Equal(got, []string{"deepseek"}) {
		t.Errorf("Providers = %v", got)
	}
}

func TestRegisterInvalid(t *testing.T) {
	r := llm.NewRegistry()
	m := fixed(finish(content.FinishStop))
	for _, tc := range []struct {
		provider string
		model    llm.Model
	}{{"", m}, {"p", nil}} {
		_, err := r.Register(tc.provider, tc.model)
		if !errors.Is(err, &llm.Error{Code: llm.CodeInvalidAdapter}) {
			t.Errorf("Register(%q, %v) error = %v, want %s", tc.provider, tc.model, err, llm.CodeInvalidAdapter)
		}
	}
	if len(r.Providers()) != 0 {
		t.Errorf("invalid registration recorded: %v", r.Providers())
	}
}

func TestDispose(t *testing.T) {
	r := llm.NewRegistry()
	d, err := r.Register("p", fixed(finish(content.FinishStop)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register("q", fixed(finish(content.FinishStop))); err != nil {
		t.Fatal(err)
	}
	d()
	if _, err := r.Get("p"); !errors.Is(err, &llm.Error{Code: llm.CodeNoAdapter}) {
		t.Errorf("Get after dispose error = %v, want %s", err, llm.CodeNoAdapter)
	}
	if got := r.Providers(); !slices.Equal(got, []string{"q"}) {
		t.Errorf("Providers after dispose = %v", got)
	}
	// Re-register, then the stale disposer must not remove the new one.
	d2, err := r.Register("p", fixed(finish(content.FinishStop)))
	if err != nil {
		t.Fatalf("re-register after dispose: %v", err)
	}
	defer d2()
	d()
	if _, err := r.Get("p"); err != nil {
		t.Errorf("stale disposer removed the new registration: %v", err)
	}
	if got := r.Providers(); !slices.Equal(got, []string{"q", "p"}) {
		t.Errorf("Providers = %v, want [q p]", got)
	}
}

func TestModelFunc(t *testing.T) {
	// Registered without ever disposing: see TestDisposeModelFunc.
	r := llm.NewRegistry()
	var got *llm.Request
	_, err := r.Register("p", llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		got = req
		return fixed(text(0, "hi")).Stream(ctx, req)
	}))
	if err != nil {
		t.Fatal(err)
	}
	req := &llm.Request{Provider: "p"}
	chunks := collect(r.Stream(t.Context(), req))
	if got != req || len(chunks) != 2 || chunks[0].Text != "hi" || checkWellFormed(t, chunks).Kind != content.FinishStop {
		t.Errorf("ModelFunc stream = %+v", chunks)
	}
}

func TestDisposeModelFunc(t *testing.T) {
	r := llm.NewRegistry()
	d, err := r.Register("p", llm.ModelFunc(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
		return func(func(content.Chunk) bool) {}
	}))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("dispose panicked: %v", p)
			}
		}()
		d()
	}()
	if len(r.Providers()) != 0 {
		t.Errorf("Providers after dispose = %v", r.Providers())
	}
}

func TestGetUnknown(t *testing.T) {
	r := registry(t, "known", fixed(finish(content.FinishStop)))
	_, err := r.Get("ghost")
	if !errors.Is(err, &llm.Error{Code: llm.CodeNoAdapter}) {
		t.Fatalf("error = %v, want %s", err, llm.CodeNoAdapter)
	}
	if !strings.Contains(err.Error(), `"ghost"`) || !strings.Contains(err.Error(), "known") {
		t.Errorf("error %q should name the provider and the registered ones", err)
	}
}

func TestStreamUnknownProvider(t *testing.T) {
	r := llm.NewRegistry()
	chunks := collect(r.Stream(t.Context(), &llm.Request{Provider: "nowhere", Model: "m"}))
	if len(chunks) != 1 {
		t.Fatalf("got %d chunks, want exactly one finish: %+v", len(chunks), chunks)
	}
	f := checkWellFormed(t, chunks)
	if f.Kind != content.FinishError || f.Failure == nil || f.Failure.Code != llm.CodeNoAdapter {
		t.Fatalf("finish = %+v, want error %s", f, llm.CodeNoAdapter)
	}
	if !strings.Contains(f.Failure.Message, "nowhere") {
		t.Errorf("failure message %q does not name the provider", f.Failure.Message)
	}
}

func TestStreamPassesThrough(t *testing.T) {
	usage := content.Chunk{Type: content.ChunkUsage, Usage: &content.Usage{Input: 3, Output: 2}}
	want := []content.Chunk{text(0, "a"), text(0, "b"), usage, finish(content.FinishToolCalls)}
	var gotReq *llm.Request
	m := model(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		gotReq = req
		return fixed(want...).Stream(ctx, req)
	})
	r := registry(t, "p", m)
	req := &llm.Request{Provider: "p", Model: "x", System: "sys"}
	got := collect(r.Stream(t.Context(), req))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream mismatch (-want +got):\n%s", diff)
	}
	if gotReq != req {
		t.Error("model did not receive the request")
	}
}

func TestStreamAppendsStopFinish(t *testing.T) {
	r := registry(t, "p", fixed(text(0, "hi")))
	chunks := collect(r.Stream(t.Context(), &llm.Request{Provider: "p"}))
	f := checkWellFormed(t, chunks)
	if f.Kind != content.FinishStop || f.Failure != nil {
		t.Errorf("appended finish = %+v, want stop", f)
	}
	if len(chunks) != 2 || chunks[0].Text != "hi" {
		t.Errorf("chunks = %+v", chunks)
	}

	// An empty stream still ends with a finish.
	r2 := registry(t, "empty", fixed())
	chunks = collect(r2.Stream(t.Context(), &llm.Request{Provider: "empty"}))
	if len(chunks) != 1 || checkWellFormed(t, chunks).Kind != content.FinishStop {
		t.Errorf("empty model stream = %+v", chunks)
	}
}

func TestStreamNothingAfterFinish(t *testing.T) {
	// A model that keeps yielding after its finish (while yield says yes).
	var afterFinish atomic.Bool
	m := model(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			for _, c := range []content.Chunk{text(0, "a"), finish(content.FinishStop), text(0, "late"), finish(content.FinishError)} {
				if !yield(c) {
					return
				}
				if c.Type == content.ChunkFinish {
					afterFinish.Store(true)
				}
			}
		}
	})
	r := registry(t, "p", m)
	chunks := collect(r.Stream(t.Context(), &llm.Request{Provider: "p"}))
	f := checkWellFormed(t, chunks)
	if len(chunks) != 2 || f.Kind != content.FinishStop {
		t.Errorf("chunks = %+v, want text then the first (stop) finish", chunks)
	}
	if afterFinish.Load() {
		t.Error("the model was told to continue after its finish")
	}
}

func TestStreamConsumerBreaksEarly(t *testing.T) {
	var stopped atomic.Bool
	var produced atomic.Int32
	m := model(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			for i := range 100 {
				produced.Add(1)
				if !yield(text(0, fmt.Sprint(i))) {
					stopped.Store(true)
					return
				}
			}
			yield(finish(content.FinishStop))
		}
	})
	r := registry(t, "p", m)
	n := 0
	for c := range r.Stream(t.Context(), &llm.Request{Provider: "p"}) { // must not panic
		_ = c
		n++
		if n == 3 {
			break
		}
	}
	if !stopped.Load() {
		t.Error("model was not told to stop")
	}
	if got := produced.Load(); got != 3 {
		t.Errorf("model produced %d chunks, want 3", got)
	}
}

// A model that yields again after being told to stop is not heard, and
// does not crash the process (a range-over-func loop body would panic).
func TestStreamModelIgnoringStopIsNotHeard(t *testing.T) {
	m := model(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			for i := range 5 {
				yield(text(0, fmt.Sprint(i))) // ignores false
			}
			yield(finish(content.FinishStop))
		}
	})
	r := registry(t, "p", m)
	var got []content.Chunk
	for c := range r.Stream(t.Context(), &llm.Request{Provider: "p"}) {
		got = append(got, c)
		break
	}
	if len(got) != 1 || got[0].Text != "0" {
		t.Fatalf("chunks = %+v, want the first", got)
	}
}

func TestStreamConsumerBreaksAtFinish(t *testing.T) {
	r := registry(t, "p", fixed(text(0, "a"), finish(content.FinishStop)))
	for c := range r.Stream(t.Context(), &llm.Request{Provider: "p"}) {
		if c.Type == content.ChunkFinish {
			break
		}
	}
	// Unknown provider, consumer breaks at the only chunk.
	for range llm.NewRegistry().Stream(t.Context(), &llm.Request{Provider: "x"}) {
		break
	}
	// A model without finish: the consumer breaks at the appended one.
	r2 := registry(t, "q", fixed(text(0, "a")))
	for c := range r2.Stream(t.Context(), &llm.Request{Provider: "q"}) {
		if c.Type == content.ChunkFinish {
			break
		}
	}
}

func TestStreamCancelledBecomesAborted(t *testing.T) {
	cause := errors.New("user pressed escape")
	tests := []struct {
		name   string
		chunks []content.Chunk
	}{
		{"stop finish", []content.Chunk{text(0, "a"), finish(content.FinishStop)}},
		{"error finish", []content.Chunk{text(0, "a"), llm.FinishError(llm.CodeTransport, "reset")}},
		{"no finish", []content.Chunk{text(0, "a")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			m := model(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
				return func(yield func(content.Chunk) bool) {
					for _, c := range tt.chunks {
						if c.Type == content.ChunkFinish {
							cancel(cause) // cancelled just before the model finishes
						}
						if !yield(c) {
							return
						}
					}
					cancel(cause)
				}
			})
			r := registry(t, "p", m)
			chunks := collect(r.Stream(ctx, &llm.Request{Provider: "p"}))
			f := checkWellFormed(t, chunks)
			if f.Kind != content.FinishAborted || f.Failure == nil || f.Failure.Code != llm.CodeAborted {
				t.Fatalf("finish = %+v, want aborted %s", f, llm.CodeAborted)
			}
			if !strings.Contains(f.Failure.Message, cause.Error()) {
				t.Errorf("failure message %q does not carry the cause", f.Failure.Message)
			}
			if len(chunks) != 2 || chunks[0].Text != "a" {
				t.Errorf("chunks = %+v", chunks)
			}
		})
	}
}

func TestStreamKeepsModelAbortedFinish(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	own := content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishAborted,
		Failure: &content.Failure{Code: llm.CodeAborted, Message: "adapter's own", RequestID: "req-1"}}}
	r := registry(t, "p", fixed(own))
	chunks := collect(r.Stream(ctx, &llm.Request{Provider: "p"}))
	if diff := cmp.Diff([]content.Chunk{own}, chunks); diff != "" {
		t.Errorf("aborted finish rewritten (-want +got):\n%s", diff)
	}
}

func TestStreamUnknownProviderCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	chunks := collect(llm.NewRegistry().Stream(ctx, &llm.Request{Provider: "nowhere"}))
	if f := checkWellFormed(t, chunks); f.Kind != content.FinishAborted {
		t.Errorf("finish = %+v, want aborted", f)
	}
}

func TestStreamFinishWithoutPayloadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := registry(t, "p", fixed(content.Chunk{Type: content.ChunkFinish}))
	var chunks []content.Chunk
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Stream panicked: %v", p)
			}
		}()
		chunks = collect(r.Stream(ctx, &llm.Request{Provider: "p"}))
	}()
	if f := checkWellFormed(t, chunks); f.Kind != content.FinishAborted {
		t.Errorf("finish = %+v, want aborted", f)
	}
}

func TestFinishHelpers(t *testing.T) {
	c := llm.FinishError(llm.CodeServer, "status %d", 503)
	want := content.Chunk{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishError,
		Failure: &content.Failure{Code: llm.CodeServer, Message: "status 503"}}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("FinishError (-want +got):\n%s", diff)
	}
	a := llm.FinishAborted(nil)
	if a.Finish.Kind != content.FinishAborted || a.Finish.Failure.Code != llm.CodeAborted || a.Finish.Failure.Message != "request aborted" {
		t.Errorf("FinishAborted(nil) = %+v", a.Finish)
	}
	a = llm.FinishAborted(context.Canceled)
	if a.Finish.Failure.Message != "request aborted: context canceled" {
		t.Errorf("FinishAborted(Canceled) message = %q", a.Finish.Failure.Message)
	}
}

func TestErrorIs(t *testing.T) {
	err := error(&llm.Error{Code: llm.CodeDuplicate, Msg: "dup"})
	if err.Error() != "llm: dup" {
		t.Errorf("Error() = %q", err.Error())
	}
	if !errors.Is(fmt.Errorf("w: %w", err), &llm.Error{Code: llm.CodeDuplicate}) {
		t.Error("errors.Is same code through wrapping = false")
	}
	if errors.Is(err, &llm.Error{Code: llm.CodeNoAdapter}) {
		t.Error("errors.Is other code = true")
	}
}

func TestConcurrentRegistry(t *testing.T) {
	r := llm.NewRegistry()
	base := fixed(text(0, "x"), finish(content.FinishStop))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				p := fmt.Sprintf("p%d-%d", i, j)
				d, err := r.Register(p, base)
				if err != nil {
					t.Error(err)
					return
				}
				chunks := collect(r.Stream(context.Background(), &llm.Request{Provider: p}))
				if len(chunks) != 2 {
					t.Errorf("stream of %s = %+v", p, chunks)
				}
				_ = r.Providers()
				d()
			}
		})
	}
	wg.Wait()
	if got := r.Providers(); len(got) != 0 {
		t.Errorf("Providers after churn = %v", got)
	}
}

func TestStreamModelPanicBecomesErrorFinish(t *testing.T) {
	r := llm.NewRegistry()
	r.Register("p", llm.ModelFunc(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			yield(content.Chunk{Type: content.ChunkTextDelta, Text: "a"})
			panic("adapter bug")
		}
	}))
	var got []content.Chunk
	for c := range r.Stream(t.Context(), &llm.Request{Provider: "p"}) {
		got = append(got, c)
	}
	last := got[len(got)-1]
	if len(got) != 2 || last.Finish == nil || last.Finish.Kind != content.FinishError || last.Finish.Failure.Code != llm.CodeUnknown {
		t.Fatalf("chunks = %+v", got)
	}
	if msg := last.Finish.Failure.Message; msg != "model p panicked: adapter bug" {
		t.Errorf("failure message %q", msg)
	}
}

func TestStreamConsumerPanicPropagates(t *testing.T) {
	r := llm.NewRegistry()
	r.Register("p", llm.ModelFunc(func(context.Context, *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) { yield(content.Chunk{Type: content.ChunkTextDelta, Text: "a"}) }
	}))
	defer func() {
		if recover() != "consumer bug" {
			t.Fatal("the consumer's panic was swallowed")
		}
	}()
	for range r.Stream(t.Context(), &llm.Request{Provider: "p"}) {
		panic("consumer bug")
	}
}
