package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/tool"
)

// windowModel is a model with a small context window: it refuses a
// request larger than limit tokens (4 bytes a token) as an endpoint does,
// answers a summarisation request with a summary, and any other with a
// numbered answer, reporting the request's size as its prompt tokens.
type windowModel struct {
	limit int // tokens; 0: no limit
	// overflowAlways refuses every request that is not a summarisation.
	overflowAlways bool
	// summary, when set, is the summary's text.
	summary string
	// strict refuses summarisations past the limit too.
	strict bool

	mu        sync.Mutex
	requests  []*llm.Request
	summaries int
	overflows int
}

func (m *windowModel) size(req *llm.Request) int {
	n := len(req.System)
	for _, msg := range req.Messages {
		n += int(session.MessageSize(msg))
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n / 4
}

func isSummarise(req *llm.Request) bool {
	n := len(req.Messages)
	return n > 0 && strings.Contains(content.JoinText(req.Messages[n-1].Content), "replaced by a summary")
}

func (m *windowModel) Stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) {
		m.mu.Lock()
		m.requests = append(m.requests, req)
		tokens := m.size(req)
		summarise := isSummarise(req)
		if (!summarise || m.strict) && (m.overflowAlways || (m.limit > 0 && tokens > m.limit)) {
			m.overflows++
			m.mu.Unlock()
			yield(llm.FinishError(llm.CodeContextExceeded, "This model's maximum context length is %d tokens. However, you requested %d tokens.", m.limit, tokens))
			return
		}
		text := fmt.Sprintf("answer %d", len(m.requests))
		if summarise {
			m.summaries++
			text = fmt.Sprintf("SUMMARY %d of %d messages", m.summaries, len(req.Messages)-1)
			if m.summary != "" {
				text = m.summary
			}
		}
		m.mu.Unlock()
		b := content.Text(text)
		for _, c := range []content.Chunk{
			{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeText},
			{Type: content.ChunkTextDelta, Index: 0, Text: text},
			{Type: content.ChunkBlockEnd, Index: 0, Block: &b},
			{Type: content.ChunkUsage, Usage: &content.Usage{Input: int64(tokens), Output: 3}},
			{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishStop}},
		} {
			if !yield(c) {
				return
			}
		}
	}
}

func (m *windowModel) Requests() []*llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// windowEnv is a runtime around m whose route "test" has the given
// context window (0: unknown).
func windowEnv(t *testing.T, m llm.Model, window int, backend session.Backend) (*agent.Registry, *tool.Registry) {
	t.Helper()
	bus := event.New(nil)
	reg := llm.NewRegistry()
	if _, err := reg.Register("test", m); err != nil {
		t.Fatal(err)
	}
	reg.SetContextWindow("test", window)
	tools := tool.NewRegistry()
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(backend, bus), LLM: reg, Tools: tools, Prompt: prompt.NewRegistry(), Events: bus})
	t.Cleanup(func() {
		if err := agents.DisposeAll(context.Background()); err != nil {
			t.Errorf("dispose: %v", err)
		}
	})
	return agents, tools
}

func compactions(events []session.Event) []session.Compaction {
	var out []session.Compaction
	for _, e := range events {
		if c, ok := e.Data.(session.Compaction); ok {
			out = append(out, c)
		}
	}
	return out
}

// prompt100 is a prompt of about 100 tokens.
func prompt100(i int) string {
	return fmt.Sprintf("question %d: %s", i, strings.Repeat("lorem ipsum ", 33))
}

// A conversation that grows past the agent's share of the context window
// is compacted before the request that would pass it, once per crossing:
// the endpoint never refuses a request, every turn is answered, and from a
// compaction on, each request starts with the same prefix (summary, kept
// messages) until the next one.
func TestCompactsBeforePassingTheWindowShare(t *testing.T) {
	m := &windowModel{limit: 1000}
	agents, _ := windowEnv(t, m, 1000, nil)
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if end := run(t, a, prompt100(i)); end.Reason.Kind != session.EndCompleted {
			t.Fatalf("turn %d: %+v", i+1, end.Reason)
		}
	}
	if m.overflows != 0 {
		t.Errorf("the endpoint refused %d requests", m.overflows)
	}
	cs := compactions(a.Session().Events())
	if len(cs) < 2 || len(cs) > 10 {
		t.Fatalf("%d compactions in 30 turns of 100 tokens in a window of 1000", len(cs))
	}
	for _, c := range cs {
		if c.Trigger != session.CompactAuto || c.Kept < 1 || c.Compacted < 1 || c.TokensBefore < 800 || c.Usage == nil {
			t.Errorf("compaction %+v", c)
		}
	}
	// Between two summarisations, each request extends the one before;
	// a summarisation shares the prefix of the request before it (system
	// prompt, tools, history), so a prompt cache serves it.
	var prev []content.Message
	var prevReq *llm.Request
	for _, req := range m.Requests() {
		if isSummarise(req) {
			summarised := req.Messages[:len(req.Messages)-1]
			n := min(len(summarised), len(prevReq.Messages))
			if req.System != prevReq.System || len(req.Tools) != len(prevReq.Tools) ||
				!slices.EqualFunc(summarised[:n], prevReq.Messages[:n], sameMessage) {
				t.Fatal("a summarisation does not share the prefix of the request before it")
			}
			prev = nil
			continue
		}
		prevReq = req
		if prev != nil && (len(req.Messages) < len(prev) || !slices.EqualFunc(prev, req.Messages[:len(prev)], sameMessage)) {
			t.Fatalf("a request does not extend the one before it: the prompt cache prefix broke without a compaction")
		}
		prev = req.Messages
	}
	msgs := a.Session().Messages()
	if got := content.JoinText(msgs[0].Content); !strings.Contains(got, "SUMMARY") || msgs[0].Source.Plugin != "compaction" {
		t.Errorf("history starts with %q", got)
	}
}

func sameMessage(x, y content.Message) bool { return x.ID == y.ID }

// A request the endpoint refuses as too long (the window is not known)
// is compacted and retried once; the turn completes.
func TestContextOverflowCompactsAndRetriesOnce(t *testing.T) {
	m := &windowModel{limit: 1000}
	agents, _ := windowEnv(t, m, 0, nil)
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test", Model: "unknown-model"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if end := run(t, a, prompt100(i)); end.Reason.Kind != session.EndCompleted {
			t.Fatalf("turn %d: %+v", i+1, end.Reason)
		}
	}
	cs := compactions(a.Session().Events())
	if m.overflows != 1 || len(cs) != 1 || cs[0].Trigger != session.CompactOverflow {
		t.Fatalf("%d overflows, compactions %+v", m.overflows, cs)
	}
	for _, e := range a.Session().Events() { // the refused answer left no trace but the compaction
		if c, ok := e.Data.(session.AssistantChunk); ok && c.Chunk.Finish != nil && c.Chunk.Finish.Kind == content.FinishError {
			t.Errorf("logged refusal %+v", c.Chunk.Finish)
		}
	}
	if err := session.CheckBalanced(a.Session().Events()); err != nil {
		t.Error(err)
	}
}

// A request still refused after the compaction ends the turn with the
// endpoint's code and advice; it is not compacted again.
func TestSecondOverflowEndsTheTurnWithAdvice(t *testing.T) {
	m := &windowModel{}
	agents, _ := windowEnv(t, m, 0, nil)
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.overflowAlways = true
	m.mu.Unlock()
	// Nothing to compact yet: one message. The turn ends, saying why.
	end := run(t, a, "first")
	if f := end.Reason.Error; f == nil || f.Code != llm.CodeContextExceeded || !strings.Contains(f.Message, "compacting it failed") {
		t.Fatalf("end = %+v", end.Reason)
	}
	m.mu.Lock()
	m.overflowAlways = false
	m.mu.Unlock()
	run(t, a, "second")
	m.mu.Lock()
	m.overflowAlways = true
	m.mu.Unlock()
	end = run(t, a, "third")
	if f := end.Reason.Error; f == nil || f.Code != llm.CodeContextExceeded || !strings.Contains(f.Message, "start a new session") {
		t.Fatalf("end = %+v", end.Reason)
	}
	if cs := compactions(a.Session().Events()); len(cs) != 1 || m.summaries != 1 {
		t.Errorf("compactions %+v, %d summaries", cs, m.summaries)
	}
}

// Compact summarises by hand with a focus; the cut keeps a tool call with
// its result, and the summary names the children the agent started.
func TestCompactByHandKeepsToolCallsWhole(t *testing.T) {
	m := &windowModel{}
	var mu sync.Mutex
	calls := 0
	tm := llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n%2 == 1 && !isSummarise(req) { // every other call asks for a tool
			return func(yield func(content.Chunk) bool) {
				b := content.Block{Type: content.TypeToolCall, ID: fmt.Sprintf("call-%d", n), Name: "child", Arguments: "{}"}
				for _, c := range []content.Chunk{
					{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeToolCall},
					{Type: content.ChunkBlockEnd, Index: 0, Block: &b},
					{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishToolCalls}},
				} {
					if !yield(c) {
						return
					}
				}
			}
		}
		return m.Stream(ctx, req)
	})
	agents, tools := windowEnv(t, tm, 0, nil)
	if _, err := tools.Register(tool.Definition{Name: "child", Description: "starts a child",
		Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
			return tool.Result{Content: []content.Block{content.Text(strings.Repeat("output ", 40))},
				Meta: []byte(`{"subagentChild":"child-` + c.ID + `","subagentProvider":"spawn"}`)}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		run(t, a, prompt100(i))
	}
	before := a.Session().Messages()
	idle(t, a) // a turn that ended may still be going idle
	c, err := a.Compact(context.Background(), "the list of files")
	if err != nil {
		t.Fatal(err)
	}
	if c.Trigger != session.CompactManual || c.Focus != "the list of files" || c.Turn != 0 || c.Kept+c.Compacted != len(before) {
		t.Errorf("compaction %+v of %d messages", c, len(before))
	}
	reqs := m.Requests()
	ask := content.JoinText(reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1].Content)
	if !strings.Contains(ask, "Focus the summary on: the list of files") || !strings.Contains(ask, "Keep it under 2000 words.") {
		t.Errorf("the instruction is %q", ask)
	}
	after := a.Session().Messages()
	if len(after) != c.Kept+1 || !slices.EqualFunc(after[1:], before[len(before)-c.Kept:], sameMessage) {
		t.Fatalf("history after: %d messages, kept %d", len(after), c.Kept)
	}
	open := map[string]bool{}
	for _, msg := range after[1:] {
		for _, b := range msg.Content {
			switch b.Type {
			case content.TypeToolCall:
				open[b.ID] = true
			case content.TypeToolResult:
				if !open[b.ToolCallID] {
					t.Errorf("result of %s kept without its call", b.ToolCallID)
				}
			}
		}
	}
	summary := content.JoinText(after[0].Content)
	if !strings.Contains(summary, "child-call-1") || !slices.Contains(c.Children, "child-call-1") {
		t.Errorf("the summary does not name the children: %q", summary)
	}
	// The next turn goes on from the summary.
	if end := run(t, a, "go on"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end.Reason)
	}
	idle(t, a) // Run returns at the turn's end, a moment before a driver the compaction started is idle
}

// A compacted session read back from its file derives the compacted
// history: a resumed agent continues from the summary.
func TestResumeContinuesFromTheSummary(t *testing.T) {
	root := t.TempDir()
	m := &windowModel{limit: 1000}
	agents, _ := windowEnv(t, m, 1000, jsonl.New(root))
	a, err := agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		run(t, a, prompt100(i))
	}
	if len(compactions(a.Session().Events())) == 0 {
		t.Fatal("no compaction")
	}
	want := a.Session().Messages()
	id := a.ID()
	if err := a.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	m2 := &windowModel{limit: 1000}
	agents2, _ := windowEnv(t, m2, 1000, jsonl.New(root))
	b, err := agents2.Create(context.Background(), agent.CreateOptions{SessionID: id, Resume: true, Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Session().Messages(); !slices.EqualFunc(got, want, sameMessage) {
		t.Fatalf("resumed history: %d messages, want %d", len(got), len(want))
	}
	run(t, b, "after resume")
	first := m2.Requests()[0]
	if !strings.Contains(content.JoinText(first.Messages[0].Content), "SUMMARY") {
		t.Errorf("the resumed request starts with %q", content.JoinText(first.Messages[0].Content))
	}
}

// Compact refuses while a turn runs, and bad compactAt values are refused.
func TestCompactRefusals(t *testing.T) {
	m := &windowModel{}
	agents, _ := windowEnv(t, m, 0, nil)
	if _, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test", CompactAt: 1.5}}); !errors.Is(err, &agent.Error{Code: agent.CodeInvalidOptions}) {
		t.Errorf("compactAt 1.5: %v", err)
	}
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	idle(t, a) // a turn that ended may still be going idle
	if _, err := a.Compact(context.Background(), ""); !errors.Is(err, &agent.Error{Code: agent.CodeCompact}) {
		t.Errorf("empty conversation: %v", err)
	}
	if a.Status() != agent.StatusIdle {
		// the driver goroutine goes idle right after
		a.WaitIdle(context.Background())
	}
}

// PreCompact hooks run before a compaction, with its trigger and focus.
func TestPreCompactHookRuns(t *testing.T) {
	if !agent.PreCompact.Known() {
		t.Skip("package hook does not accept PreCompact hooks yet")
	}
	out := filepath.Join(t.TempDir(), "in.json")
	set, err := hook.New(hook.Config{agent.PreCompact: command("cat > " + out)}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	bus := event.New(nil)
	reg := llm.NewRegistry()
	reg.Register("test", &windowModel{})
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, bus), LLM: reg, Tools: tool.NewRegistry(),
		Prompt: prompt.NewRegistry(), Events: bus, Hooks: set})
	t.Cleanup(func() { agents.DisposeAll(context.Background()) })
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "one")
	run(t, a, "two")
	idle(t, a) // a turn that ended may still be going idle
	if _, err := a.Compact(context.Background(), "keep the plan"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	var in hook.Input
	if err != nil || json.Unmarshal(b, &in) != nil || in.Event != agent.PreCompact || in.Trigger != "manual" ||
		in.CustomInstructions != "keep the plan" || in.SessionID != a.ID() {
		t.Errorf("hook input %s (%v)", b, err)
	}
}

// A summary longer than its bound (a model that ignores the instruction)
// is cut, so that it cannot fill the window it was made to free.
func TestLongSummaryIsCut(t *testing.T) {
	m := &windowModel{summary: strings.Repeat("é", 50_000)}
	agents, _ := windowEnv(t, m, 4000, nil)
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a, "one")
	run(t, a, "two")
	idle(t, a) // a turn that ended may still be going idle
	c, err := a.Compact(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	text := content.JoinText(c.Summary.Content)
	if len(text) > 2000 || !strings.Contains(text, "the summary was cut at 1600 bytes") || !utf8.ValidString(text) {
		t.Errorf("summary of %d bytes: %.200q", len(text), text)
	}
}

// A session whose older part does not fit in the window either (resumed on
// a model with a smaller one) is summarised from its messages with their
// long texts cut.
func TestSummaryOfTooMuchReadsClippedMessages(t *testing.T) {
	m := &windowModel{strict: true}
	tm := llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		last := req.Messages[len(req.Messages)-1]
		if !isSummarise(req) && last.Source.Kind == content.SourceUser && strings.HasPrefix(content.JoinText(last.Content), "read") {
			return func(yield func(content.Chunk) bool) {
				b := content.Block{Type: content.TypeToolCall, ID: content.NewID(), Name: "big", Arguments: "{}"}
				for _, c := range []content.Chunk{{Type: content.ChunkBlockEnd, Index: 0, Block: &b},
					{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishToolCalls}}} {
					if !yield(c) {
						return
					}
				}
			}
		}
		return m.Stream(ctx, req)
	})
	agents, tools := windowEnv(t, tm, 0, nil)
	tools.Register(tool.Definition{Name: "big", Description: "reads a big file", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		return tool.TextResult(strings.Repeat("line of a big file\n", 500)), nil // 9.5 KB
	}})
	a, err := agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if end := run(t, a, fmt.Sprintf("read file %d", i)); end.Reason.Kind != session.EndCompleted {
			t.Fatalf("turn %d: %+v", i, end.Reason)
		}
	}
	m.mu.Lock()
	m.limit = 4000 // tokens: the history is about 12,000
	m.mu.Unlock()
	if end := run(t, a, "what did you read?"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end.Reason)
	}
	cs := compactions(a.Session().Events())
	if len(cs) != 1 || cs[0].Trigger != session.CompactOverflow {
		t.Fatalf("compactions %+v", cs)
	}
	var clippedAsked bool
	for _, req := range m.Requests() {
		if isSummarise(req) {
			for _, msg := range req.Messages {
				clippedAsked = clippedAsked || strings.Contains(content.JoinText(msg.Content[0].Content), "bytes cut for the summary")
			}
		}
	}
	if !clippedAsked || m.summaries != 1 {
		t.Errorf("clipped summarisation asked: %v; %d summaries", clippedAsked, m.summaries)
	}
}

// idle waits for a's driver to stop: Compact refuses a running agent, and
// Run returns at the turn's end, a moment before its driver is idle.
func idle(t *testing.T, a *agent.Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}
