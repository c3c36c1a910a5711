package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/session"
)

// DefaultCompactAt is Options.CompactAt when unset.
const DefaultCompactAt = 0.8

// CodeCompact is the code of a compaction that could not be made.
const CodeCompact = "COMPACTION_FAILED"

// CodeBusy is the code of a request that needs the agent idle.
const CodeBusy = "AGENT_BUSY"

// PreCompact is the hook event run before a compaction.
const PreCompact = hook.PreCompact

// CheckCompactAt checks a value of Options.CompactAt: more than 0, at most 1.
func CheckCompactAt(c float64) error {
	if !(c > 0 && c <= 1) {
		return fmt.Errorf("must be more than 0 and at most 1 (a share of the context window), got %v", c)
	}
	return nil
}

// Compacted is emitted after a compaction was logged.
type Compacted struct {
	Agent      *Agent
	Compaction session.Compaction
}

// EventType implements event.Event.
func (Compacted) EventType() string { return "agent/compacted" }

// compactInstruction asks the model for the summary that replaces the
// messages before it.
const compactInstruction = "The conversation above is about to be replaced by a summary that you write now: you will " +
	"continue the work from that summary and the most recent messages, which are kept as they are. Write the summary " +
	"for yourself. Keep: what the user asked for and why, in their words where the wording matters; the decisions " +
	"made and their reasons; the state of the work (files read and changed, with their paths; commands run and what " +
	"they showed; what is done, what is left, the next step); errors met and how they were solved; the id of every " +
	"subagent you started and what it does, so that send_message still reaches it. Leave out what no longer matters. " +
	"Answer with the summary only, as plain text, and do not call any tool."

// defaultBytesPerToken converts history bytes to tokens until a model
// call has reported its prompt's size.
const defaultBytesPerToken = 4

// window returns the context window of the agent's model in tokens (0:
// unknown).
func (a *Agent) window() int64 {
	o := a.options()
	return int64(a.reg.deps.LLM.ContextWindow(o.Provider, o.Model))
}

// requestBytes is the size of req's system prompt, tool specs and history
// (the latter kept by the session as it grows): what its prompt tokens
// scale with. It allocates nothing.
func (a *Agent) requestBytes(req *llm.Request) int64 {
	n := int64(len(req.System)) + a.session.MessageBytes()
	for _, t := range req.Tools {
		n += int64(len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	return n
}

// tokensOf converts a size in bytes to tokens at the ratio the agent's
// last model call reported.
func (a *Agent) tokensOf(bytes int64) int64 {
	a.mu.Lock()
	r := a.measured().tokensPerByte
	a.mu.Unlock()
	if r <= 0 {
		return bytes / defaultBytesPerToken
	}
	return int64(math.Ceil(float64(bytes) * r))
}

// summarise makes the summarising model call req, held against the
// tree's budget and counted in usage.
func (a *Agent) summarise(ctx context.Context, req *llm.Request, usage *content.Usage) (*content.Assembler, error) {
	n := int64(len(req.System))
	for _, t := range req.Tools {
		n += int64(len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	for _, m := range req.Messages {
		n += session.MessageSize(m)
	}
	reserve := a.tokensOf(n)
	if !a.tree.reserve(reserve) {
		return nil, &Error{Code: CodeCompact, Msg: "the token budget is spent"}
	}
	asm := new(content.Assembler)
	for c := range a.reg.deps.LLM.Stream(ctx, req) {
		asm.Add(c)
	}
	a.tree.settle(reserve, asm.Usage(), ctx.Err() != nil)
	if u := asm.Usage(); u != nil {
		*usage = usage.Add(*u)
		a.mu.Lock()
		m := a.metered()
		m.usage = m.usage.Add(*u)
		a.mu.Unlock()
	}
	return asm, nil
}

// clipBytes bounds each text of the messages a second summarising call
// reads.
const clipBytes = 2048

// clipped returns msgs with every text longer than n bytes cut to n (tool
// results' texts included); tool calls' arguments are kept whole, as the
// endpoint may check that they are JSON.
func clipped(msgs []content.Message, n int) []content.Message {
	var clip func([]content.Block) []content.Block
	clip = func(bs []content.Block) []content.Block {
		out := make([]content.Block, len(bs))
		for i, b := range bs {
			if len(b.Text) > n {
				j := n
				for j > 0 && !utf8.RuneStart(b.Text[j]) {
					j--
				}
				b.Text = b.Text[:j] + fmt.Sprintf("\n[… %d bytes cut for the summary]", len(b.Text)-j)
			}
			if len(b.Content) > 0 {
				b.Content = clip(b.Content)
			}
			out[i] = b
		}
		return out
	}
	out := make([]content.Message, len(msgs))
	for i, m := range msgs {
		m.Content = clip(m.Content)
		out[i] = m
	}
	return out
}

// bytesFor is the inverse of tokensOf.
func (a *Agent) bytesFor(tokens int64) int64 {
	a.mu.Lock()
	r := a.measured().tokensPerByte
	a.mu.Unlock()
	if r <= 0 {
		return tokens * defaultBytesPerToken
	}
	return int64(float64(tokens) / r)
}

// learnRatio records the prompt tokens a call of size bytes reported, for
// tokensOf. The ratio is bounded to what tokenizers do (1 to 8 bytes a
// token), so that an endpoint reporting nonsense cannot stop compaction.
func (a *Agent) learnRatio(bytes int64, u content.Usage) {
	prompt := u.Input + u.CacheRead + u.CacheWrite
	if bytes <= 0 || prompt <= 0 {
		return
	}
	r := min(max(float64(prompt)/float64(bytes), 1.0/8), 1)
	a.mu.Lock()
	a.metered().tokensPerByte = r
	a.mu.Unlock()
}

// maybeCompact compacts the conversation before req is sent when req
// would pass the agent's share of the context window: once per crossing,
// so that a conversation whose kept part is still over the line is not
// compacted at every step. It refreshes req's history when it compacted.
// A compaction that fails is logged and req goes as it is (an endpoint
// that refuses it gives the overflow retry its chance).
func (a *Agent) maybeCompact(ctx context.Context, req *llm.Request, turn int, usage *content.Usage) {
	bytes := a.requestBytes(req)
	a.mu.Lock()
	a.reqBytes = bytes
	floor := a.measured().compactFloor
	a.mu.Unlock()
	w := a.window()
	if w <= 0 {
		return
	}
	est, limit := a.tokensOf(bytes), int64(float64(w)*a.options().CompactAt)
	if est < limit || (floor >= limit && est < floor+w/10) {
		return
	}
	if _, err := a.compact(ctx, session.CompactAuto, "", turn, est, usage); err != nil {
		a.reg.deps.Log.Warn("compaction failed", "agent", a.id, "turn", turn, "err", err)
		a.mu.Lock()
		a.metered().compactFloor = est // do not try again at every step
		a.mu.Unlock()
		return
	}
	req.Messages = a.session.Messages()
	bytes = a.requestBytes(req)
	a.mu.Lock()
	a.reqBytes = bytes
	a.mu.Unlock()
}

// overflowed reports whether a model call ended with the endpoint's
// CONTEXT_WINDOW_EXCEEDED.
func overflowed(asm *content.Assembler) bool {
	f := asm.Finish()
	return f.Kind == content.FinishError && f.Failure != nil && f.Failure.Code == llm.CodeContextExceeded
}

// overflowAdvice is added to the failure of a request that still exceeds
// the context window after a compaction.
const overflowAdvice = " (the conversation still exceeds the model's context window after compaction: " +
	"start a new session, or ask for less at once, e.g. smaller files or shorter command output; " +
	"set the route's contextWindow if dsh's value for this model is wrong)"

// withAdvice returns f with advice added when it is a context overflow.
func withAdvice(f *content.Failure) *content.Failure {
	if f == nil || f.Code != llm.CodeContextExceeded || strings.HasSuffix(f.Message, overflowAdvice) {
		return f
	}
	g := *f
	g.Message += overflowAdvice
	return &g
}

// compactFailed is the failure of a request that exceeded the context
// window and could not be compacted.
func compactFailed(f *content.Failure, err error) *content.Failure {
	g := *f
	g.Message += " (the conversation exceeds the model's context window, and compacting it failed: " + err.Error() +
		"; start a new session, or set the route's contextWindow if dsh's value for this model is wrong)"
	return &g
}

// Compact replaces the older part of the agent's conversation by a summary
// the model writes (one model call), keeping the last messages as they
// are; focus, when set, tells the model what the summary must keep. It
// runs only while the agent is idle: input that arrives meanwhile waits
// for it. Cancel stops it.
func (a *Agent) Compact(ctx context.Context, focus string) (session.Compaction, error) {
	a.mu.Lock()
	switch {
	case a.disposed:
		a.mu.Unlock()
		return session.Compaction{}, &Error{Code: CodeDisposed, Msg: fmt.Sprintf("agent %s is disposed", a.id)}
	case a.running:
		a.mu.Unlock()
		return session.Compaction{}, &Error{Code: CodeBusy, Msg: "the agent is running a turn: compact once it is idle"}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	a.startDriver()
	a.cancelTurn = cancel
	a.mu.Unlock()
	a.reg.deps.Events.Emit(StatusChanged{Agent: a, Status: StatusRunning})
	defer func() {
		cancel(nil)
		go a.drive(nil) // goes idle, or runs what arrived meanwhile
	}()
	system, err := a.prompt.Render()
	if err != nil {
		return session.Compaction{}, err
	}
	req := &llm.Request{System: system, Tools: a.tools.Specs()}
	var usage content.Usage
	return a.compact(cctx, session.CompactManual, focus, 0, a.tokensOf(a.requestBytes(req)), &usage)
}

// compact summarises the conversation's older messages with one model
// call (two when they do not fit in the window) and logs the compaction.
// est is the prompt size that led to it.
func (a *Agent) compact(ctx context.Context, trigger, focus string, turn int, est int64, usage *content.Usage) (session.Compaction, error) {
	msgs := a.session.Messages()
	// The kept part is at most a quarter of the history, and of the share
	// of the window the history may fill.
	keep := a.tokensOf(a.session.MessageBytes()) / 4
	if w := a.window(); w > 0 {
		keep = min(keep, int64(float64(w)*a.options().CompactAt/4))
	}
	k := cut(msgs, a.bytesFor(keep), session.MessageSize)
	if k <= 0 {
		return session.Compaction{}, &Error{Code: CodeCompact, Msg: "nothing to compact: the conversation is only its last messages"}
	}
	a.preCompactHooks(ctx, trigger, focus)
	system, err := a.prompt.Render()
	if err != nil {
		return session.Compaction{}, err
	}
	ask := compactInstruction + fmt.Sprintf(" Keep it under %d words.", summaryWords(a.window()))
	if focus = strings.TrimSpace(focus); focus != "" {
		ask += "\n\nFocus the summary on: " + focus
	}
	// The summarised messages are a prefix of what the endpoint saw last,
	// under the same system prompt and tools: a prompt cache still serves
	// them.
	o := a.options()
	req := &llm.Request{Provider: o.Provider, Model: o.Model, System: system, Tools: a.tools.Specs(),
		MaxTokens: o.MaxTokens, SessionID: a.id, Messages: append(msgs[:k:k], content.UserText(ask))}
	asm, err := a.summarise(ctx, req, usage)
	if err == nil && overflowed(asm) && ctx.Err() == nil {
		// What is to be summarised does not fit either (a session resumed
		// on a model with a smaller window): summarise it with its long
		// texts cut.
		req.Messages = append(clipped(msgs[:k], clipBytes), content.UserText(ask))
		asm, err = a.summarise(ctx, req, usage)
	}
	if err != nil {
		return session.Compaction{}, err
	}
	if fin := asm.Finish(); fin.Kind == content.FinishError || fin.Kind == content.FinishAborted {
		if ctx.Err() != nil {
			return session.Compaction{}, context.Cause(ctx)
		}
		return session.Compaction{}, &Error{Code: CodeCompact, Msg: "the model did not summarise", Err: fin.Failure}
	}
	text := strings.TrimSpace(content.JoinText(asm.Blocks()))
	if text == "" {
		return session.Compaction{}, &Error{Code: CodeCompact, Msg: "the model returned an empty summary"}
	}
	if limit := int(summaryWords(a.window()) * 8); len(text) > limit { // a model that ignores the bound cannot refill the window
		i := limit
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		text = text[:i] + fmt.Sprintf("\n[… the summary was cut at %d bytes]", limit)
	}
	children := a.childIDs()
	c := session.Compaction{Turn: turn, Trigger: trigger, Focus: focus, Kept: len(msgs) - k, Compacted: k,
		TokensBefore: est, Children: children, Usage: asm.Usage(), Provider: req.Provider, Model: req.Model,
		Summary: summaryMessage(text, children)}
	if _, err := a.session.Append(session.TypeCompaction, c); err != nil {
		return session.Compaction{}, err
	}
	if err := a.session.Flush(); err != nil {
		return session.Compaction{}, err
	}
	floor := a.tokensOf(a.requestBytes(&llm.Request{System: system, Tools: req.Tools}))
	a.mu.Lock()
	a.metered().compactFloor = floor
	a.mu.Unlock()
	a.reg.deps.Events.Emit(Compacted{Agent: a, Compaction: c})
	return c, nil
}

// cut returns where the kept part of msgs begins: the earliest message
// from which the rest fits in keep bytes, else the latest place a cut can
// be made; 0 when none can. A cut never falls on a tool result, so that a
// tool call and its result stay on one side.
func cut(msgs []content.Message, keep int64, size func(content.Message) int64) int {
	best, tail := 0, int64(0)
	for k := len(msgs) - 1; k >= 1; k-- {
		tail += size(msgs[k])
		if isToolResult(msgs[k]) {
			continue
		}
		if best == 0 || tail <= keep {
			best = k
		}
		if tail > keep {
			break
		}
	}
	return best
}

func isToolResult(m content.Message) bool {
	return m.Source.Kind == content.SourceTool ||
		slices.ContainsFunc(m.Content, func(b content.Block) bool { return b.Type == content.TypeToolResult })
}

// summaryWords bounds the summary's length: a twentieth of the window
// (about 3 words in 4 tokens), between 200 and 2000 words.
func summaryWords(window int64) int64 {
	if window <= 0 {
		return 2000
	}
	return min(max(window/20*3/4, 200), 2000)
}

// summaryMessage is the message that stands for the compacted history.
func summaryMessage(text string, children []string) content.Message {
	var b strings.Builder
	b.WriteString("[The earlier part of this conversation was compacted. Your summary of it:]\n\n")
	b.WriteString(text)
	if len(children) > 0 {
		b.WriteString("\n\n[Subagents started earlier in this conversation (send_message reaches them by id): ")
		b.WriteString(strings.Join(children, ", "))
		b.WriteString("]")
	}
	return content.Message{ID: content.NewID(), Role: content.RoleUser, Content: []content.Block{content.Text(b.String())},
		Source: content.Source{Kind: content.SourcePlugin, Plugin: "compaction", Form: "summary"}}
}

// childIDs returns the ids of the subagents the agent started: those its
// log names (tool results' subagentChild, earlier compactions) and those
// alive now, in order of first mention.
func (a *Agent) childIDs() []string {
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, e := range a.session.Events() {
		switch d := e.Data.(type) {
		case session.ToolResult:
			var m struct {
				Child string `json:"subagentChild"`
			}
			if len(d.Meta) > 0 && json.Unmarshal(d.Meta, &m) == nil {
				add(m.Child)
			}
		case session.Compaction:
			for _, id := range d.Children {
				add(id)
			}
		}
	}
	a.mu.Lock()
	owned := make([]*Agent, 0, len(a.ownedAgents()))
	for c := range a.ownedAgents() {
		owned = append(owned, c)
	}
	a.mu.Unlock()
	bySeq(owned)
	for _, c := range owned {
		add(c.id)
	}
	return ids
}

// preCompactHooks runs the PreCompact hooks (observe only).
func (a *Agent) preCompactHooks(ctx context.Context, trigger, focus string) {
	if !a.hooks.Has(PreCompact) {
		return
	}
	in := a.HookInput(PreCompact)
	in.Trigger, in.CustomInstructions = session.CompactAuto, focus
	if trigger == session.CompactManual {
		in.Trigger = session.CompactManual
	}
	a.hooks.Run(context.WithoutCancel(ctx), in)
}
