package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// drive runs turns while the inbox has input, then goes idle. Once until
// (when set) reports true, it hands remaining input to a new driver
// goroutine and returns, so that a caller driving on its own goroutine is
// released after the turn it waits for.
//
// drive, steps, step and stream are the frames under a child parked in its
// model call: they keep their state in the turn's turnState and their work
// in functions that return before the model is called.
func (a *Agent) drive(until func() bool) {
	for {
		t := a.nextTurn(until)
		if t == nil {
			return
		}
		a.startTurn(t)
		a.steps(t)
		a.endTurn(t)
		t.cancel(nil)
	}
}

// turnState is the turn being run, shared by pointer by the functions that
// run it: one allocation per turn. With it, the frames under a child
// parked in its model call are small enough (under a quarter of 8 KiB) for
// the GC to shrink the parked goroutine's stack to 4 KiB.
type turnState struct {
	ctx    context.Context // the turn's, with its span when tracing
	cancel context.CancelCauseFunc
	n      int
	input  []item                  // the step's input, until it is logged: the turn's at step 1, then what arrived since
	onEnds []func(session.TurnEnd) // of the turn's input, called at its end
	usage  content.Usage
	reason session.EndReason // how the turn ended, unless err is set
	err    error

	step      int
	fromHooks []content.Message // Stop hooks' feedback for the next step
	continued int32             // times Stop hooks continued the turn
	maxTokens bool              // a step ended at the output token limit

	// The step's model call.
	retried bool // the call overflowed the context window, which was compacted
	req     *llm.Request
	est     int64
	endSpan func(*content.Assembler)
	ans     *answer // nil until the first chunk, and when the answer could not be logged (callErr)
	callErr error
}

// nextTurn claims the next turn's input. It returns nil when drive is
// done: the agent went idle, or until reported true and the remaining
// input went to a new driver goroutine.
func (a *Agent) nextTurn(until func() bool) *turnState {
	a.mu.Lock()
	if !a.inbox.pending() || a.disposed || a.parked {
		a.running = false
		a.cancelTurn = nil
		if a.idle != nil {
			close(a.idle)
			a.idle = nil
		}
		idlers := a.idlers
		a.mu.Unlock()
		a.reg.deps.Events.Emit(StatusChanged{Agent: a, Status: StatusIdle})
		a.wg.Done()
		for _, fn := range idlers {
			fn()
		}
		return nil
	}
	if until != nil && until() {
		a.mu.Unlock()
		go a.drive(nil)
		return nil
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	a.cancelTurn = cancel
	t := &turnState{ctx: ctx, cancel: cancel, input: a.inbox.claimTurn()}
	a.turnMsgID = ""
	if n := len(t.input); n > 0 && t.input[n-1].target == nextTurn {
		a.turnMsgID = t.input[n-1].msg.ID
	}
	a.mu.Unlock()
	return t
}

// stepOutcome is how a step ended.
type stepOutcome int

const (
	stepCompleted stepOutcome = iota
	stepMaxTokens
	stepContinue // tool calls ran; the model must see their results
	stepBudget   // no call was made: the tree's budget is spent or held by calls in flight
	stepRetry    // the call overflowed the context window, which was compacted: call again
)

// startTurn logs the start of the turn.
func (a *Agent) startTurn(t *turnState) {
	t.n = a.session.LastTurn() + 1
	if a.owner == nil && slices.ContainsFunc(t.input, func(it item) bool { return it.msg.Source.Kind == content.SourceUser }) {
		a.tree.newPrompt()
	}
	t.ctx = a.traceTurn(t.ctx, t.n, t.input)
	for _, it := range t.input {
		if it.onEnd != nil {
			t.onEnds = append(t.onEnds, it.onEnd)
		}
	}
	a.session.Append(session.TypeTurnStart, session.TurnStart{Turn: t.n})
}

// endTurn logs the end of the turn, flushes the log and reports the end.
func (a *Agent) endTurn(t *turnState) {
	s, ctx, n, reason, err := a.session, t.ctx, t.n, t.reason, t.err
	switch {
	case ctx.Err() != nil && (err != nil || reason.Kind != session.EndCompleted):
		reason = session.EndReason{Kind: session.EndAborted, Cause: causeOf(ctx)}
	case err != nil:
		reason = session.EndReason{Kind: session.EndError, Error: failureOf(err)}
		a.reg.deps.Log.Warn("turn failed", "agent", a.id, "turn", n, "err", err)
	}
	end := session.TurnEnd{Turn: n, Reason: reason}
	s.Append(session.TypeTurnEnd, end)
	if err := s.Flush(); err != nil {
		a.reg.deps.Log.Error("session write failed", "agent", a.id, "err", err)
		if end.Reason.Kind == session.EndCompleted {
			end.Reason = session.EndReason{Kind: session.EndError, Error: failureOf(err)}
		}
	}
	a.endHooks(end)
	for _, fn := range t.onEnds {
		fn(end)
	}
	a.reg.deps.Events.Emit(TurnEnded{Agent: a, End: end, Usage: t.usage})
	endTurnSpan(ctx, end, t.usage)
}

func causeOf(ctx context.Context) *session.Cause {
	var ce *CancelError
	if errors.As(context.Cause(ctx), &ce) {
		c := ce.Cause
		return &c
	}
	return &session.Cause{Kind: CauseUser}
}

func failureOf(err error) *content.Failure {
	var f *content.Failure
	if errors.As(err, &f) {
		return f
	}
	return &content.Failure{Code: llm.CodeUnknown, Message: err.Error()}
}

// steps runs the steps of the turn until it concludes.
func (a *Agent) steps(t *turnState) {
	a.takeHookStop()
	for t.step = 1; ; t.step++ {
		if a.startStep(t) {
			return
		}
		out, err := a.step(t)
		if a.endStep(t, out, err) {
			return
		}
	}
}

// startStep claims the step's input and logs it. It reports whether the
// turn concluded instead (t.reason or t.err say how).
func (a *Agent) startStep(t *turnState) bool {
	if t.step > 1 {
		a.mu.Lock()
		t.input = a.inbox.claimStep()
		a.mu.Unlock()
	}
	if t.step == 1 && len(t.input) == 0 {
		t.reason = session.EndReason{Kind: session.EndCompleted}
		return true
	}
	if err := t.ctx.Err(); err != nil {
		t.err = err
		return true
	}
	if t.step == 1 {
		if end, err := a.promptHooks(t.ctx, t.n, t.input); end != nil || err != nil {
			t.reason, t.err = derefEnd(end), err
			return true
		}
	}
	a.session.Append(session.TypeStepStart, session.Step{Turn: t.n, Step: t.step})
	for _, it := range t.input {
		a.session.Append(session.TypeUserMessage, *it.msg)
	}
	t.input = nil // logged: a child parked in its model call does not hold its prompt twice
	for _, m := range t.fromHooks {
		a.session.Append(session.TypeUserMessage, m)
	}
	t.fromHooks = nil
	if stop, ok := a.limited(t.step); ok {
		a.session.Append(session.TypeStepEnd, session.Step{Turn: t.n, Step: t.step})
		t.reason = stop
		return true
	}
	return false
}

// endStep logs the end of a step that ended with out or err, and reports
// whether the turn concluded (t.reason or t.err say how).
func (a *Agent) endStep(t *turnState, out stepOutcome, err error) bool {
	a.session.Append(session.TypeStepEnd, session.Step{Turn: t.n, Step: t.step})
	if err != nil {
		t.err = err
		return true
	}
	if out == stepBudget {
		t.reason = session.EndReason{Kind: session.EndBudget}
		return true
	}
	if c := a.takeHookStop(); c != nil {
		t.reason = session.EndReason{Kind: session.EndBlocked, Cause: c}
		return true
	}
	t.maxTokens = t.maxTokens || out == stepMaxTokens
	if out == stepContinue {
		return false
	}
	a.mu.Lock()
	more := a.inbox.stepWakes()
	a.mu.Unlock()
	if more {
		return false
	}
	if t.maxTokens {
		t.reason = session.EndReason{Kind: session.EndMaxTokens}
		return true
	}
	if msg, again := a.stopHooks(t.ctx, int(t.continued)); again {
		t.continued++
		t.fromHooks = append(t.fromHooks, msg)
		return false
	}
	t.reason = session.EndReason{Kind: session.EndCompleted}
	return true
}

func derefEnd(e *session.EndReason) session.EndReason {
	if e == nil {
		return session.EndReason{}
	}
	return *e
}

// limited reports whether step may not call the model: the turn reached
// its step cap, or the tree spent its token budget.
func (a *Agent) limited(step int) (session.EndReason, bool) {
	switch {
	case a.options().MaxSteps > 0 && step > a.options().MaxSteps:
		return session.EndReason{Kind: session.EndMaxSteps}, true
	case a.tree.exhausted():
		return session.EndReason{Kind: session.EndBudget}, true
	}
	return session.EndReason{}, false
}

// step makes one model call and runs the tool calls it asked for. The
// call's preparation, start, streaming and end are functions of their own,
// so that the frames under a child parked in its model call stay small.
func (a *Agent) step(t *turnState) (stepOutcome, error) {
	if err := a.prepareCall(t); err != nil {
		return 0, err
	}
	for {
		mctx := a.startCall(t)
		if mctx == nil {
			return stepBudget, nil
		}
		a.stream(mctx, t)
		if out, err := a.endCall(t); out != stepRetry {
			return out, err
		}
	}
}

// prepareCall builds the step's request and compacts the conversation
// when it nears the context window.
func (a *Agent) prepareCall(t *turnState) error {
	req, err := a.request(t)
	if err != nil {
		return err
	}
	t.req, t.retried = req, false // before anything could call req.OnRetry, which logs t.req's provider
	a.maybeCompact(t.ctx, req, t.n, &t.usage)
	return nil
}

// startCall holds the call's estimate against the tree's budget and starts
// its span; it returns the call's context, nil when the budget is spent or
// held by calls in flight.
func (a *Agent) startCall(t *turnState) context.Context {
	t.est = a.estimate()
	if !a.tree.reserve(t.est) {
		return nil
	}
	mctx, endSpan := a.traceModelCall(t.ctx, t.req, t.step)
	t.endSpan, t.ans, t.callErr = endSpan, nil, nil // the answer's, made at its first chunk
	return mctx
}

// endCall settles the call with the tree's budget and concludes the step;
// stepRetry when the call overflowed the context window and was compacted.
func (a *Agent) endCall(t *turnState) (stepOutcome, error) {
	var asm *content.Assembler
	var seqs []int64
	switch {
	case t.ans != nil:
		asm, seqs = &t.ans.asm, t.ans.seqs
	case t.callErr == nil: // no chunk came (the registry always sends a finish)
		asm = new(content.Assembler)
	}
	t.endSpan(asm)
	t.endSpan = nil
	var used *content.Usage // what the call reported, also when it failed part way
	if asm != nil {
		used = asm.Usage()
	}
	a.tree.settle(t.est, used, t.ctx.Err() != nil)
	if t.callErr != nil {
		return 0, t.callErr
	}
	if !t.retried && overflowed(asm) && t.ctx.Err() == nil {
		// One compaction and one retry; a second overflow ends the
		// turn with advice (see conclude).
		if _, err := a.compact(t.ctx, session.CompactOverflow, "", t.n, a.tokensOf(a.requestBytes(t.req)), &t.usage); err != nil {
			a.reg.deps.Log.Warn("compaction failed", "agent", a.id, "turn", t.n, "err", err)
			return 0, compactFailed(asm.Finish().Failure, err)
		}
		t.req.Messages = a.session.Messages()
		bytes := a.requestBytes(t.req)
		a.mu.Lock()
		a.reqBytes = bytes
		a.mu.Unlock()
		t.retried = true
		return stepRetry, nil
	}
	return a.conclude(t.ctx, t.req, asm, seqs, t.n, t.step, &t.usage)
}

// estimate is what the next model call is expected to use, held against
// the tree's budget while it runs: the agent's last call's tokens (its
// conversation only grows), else the tree's last call's.
func (a *Agent) estimate() int64 {
	a.mu.Lock()
	last := a.measured().lastCall
	a.mu.Unlock()
	if last > 0 {
		return last
	}
	return a.tree.lastCall.Load()
}

// request builds the step's model request and logs its header when it
// changed. Its retry callback holds a and t (24 B), not the turn, step,
// session and request (48 B): a parked child keeps it.
func (a *Agent) request(t *turnState) (*llm.Request, error) {
	s := a.session
	system, err := a.renderSystem()
	if err != nil {
		return nil, err
	}
	provider, model := a.routeOf()
	req := &llm.Request{Provider: provider, Model: model, System: system, Tools: a.tools.Specs(),
		MaxTokens: a.options().MaxTokens, SessionID: a.id, Messages: s.Messages()}
	req.OnRetry = func(r llm.Retry) { a.logRetry(t, r) }
	a.logRequestHeader(req)
	// Checkpoint: what the model is about to see (the user's message
	// included) is on disk before it is sent. A write failure fails the turn.
	if err := s.Flush(); err != nil {
		return nil, err
	}
	return req, nil
}

// logRetry logs a retry of the step's model call (t.req's).
func (a *Agent) logRetry(t *turnState, r llm.Retry) {
	a.session.Append(session.TypeLLMRetry, session.LLMRetry{Turn: t.n, Step: t.step, Provider: t.req.Provider,
		Retry: r.Attempt, MaxRetries: r.Max, DelayMs: r.Delay.Milliseconds(), Failure: r.Failure})
}

// stream logs each chunk of the model's answer and assembles it in t.ans.
// Before the retry a context overflow allows, the overflow's finish is not
// logged: the caller compacts and retries, and the log keeps one finish
// per step.
//
// The stream is called, not ranged over: a range-over-func loop's body
// keeps its state apart from its closure, one more allocation per call
// (the registry's relay already hears no chunk after a stop).
func (a *Agent) stream(ctx context.Context, t *turnState) {
	a.reg.deps.LLM.Stream(ctx, t.req)(func(c content.Chunk) bool { return a.chunk(t, c) })
}

// answer is a model call's assembler and the seqs of the chunk events it
// was made from, in one allocation: the assistant message's blocks and
// source seqs are both parts of it (seqs in buf, until it outgrows it).
type answer struct {
	asm  content.Assembler
	seqs []int64
	buf  [8]int64
}

// chunk logs and assembles one chunk of the answer, and reports whether
// the answer goes on.
func (a *Agent) chunk(t *turnState, c content.Chunk) bool {
	if t.ans == nil { // made here, not before the call: a child parked in its call holds none
		t.ans = new(answer)
		t.ans.seqs = t.ans.buf[:0]
	}
	ans := t.ans
	if !t.retried && c.Type == content.ChunkFinish && c.Finish.Kind == content.FinishError &&
		c.Finish.Failure != nil && c.Finish.Failure.Code == llm.CodeContextExceeded {
		ans.asm.Add(c)
		return false
	}
	e, err := a.session.Append(session.TypeAssistantChunk, session.AssistantChunk{Turn: int32(t.n), Step: int32(t.step), Chunk: c})
	if err != nil {
		t.ans, t.callErr = nil, err
		return false
	}
	if n := len(ans.seqs); n == 0 || ans.seqs[n-1] != e.Seq { // consecutive deltas share a stored event
		ans.seqs = append(ans.seqs, e.Seq)
	}
	ans.asm.Add(c)
	return true
}

// conclude logs the assembled answer and runs the tool calls it asks for.
func (a *Agent) conclude(ctx context.Context, req *llm.Request, asm *content.Assembler, seqs []int64, turn, step int, usage *content.Usage) (stepOutcome, error) {
	s := a.session
	fin := asm.Finish()
	if fin.Kind == content.FinishAborted || ctx.Err() != nil {
		if blocks := asm.Interrupted(); len(blocks) > 0 {
			s.Append(session.TypeAssistantMessage, session.AssistantMessage{Turn: turn, Step: step, Interrupted: true,
				Message: content.AssistantMessage(req.Provider, req.Model, blocks)}, seqs...)
		}
		return 0, context.Cause(ctx)
	}
	if fin.Kind == content.FinishError {
		return 0, withAdvice(fin.Failure)
	}
	blocks := asm.Blocks()
	if fin.Kind == content.FinishStop && len(blocks) == 0 {
		return 0, &content.Failure{Code: llm.CodeEmptyResponse, Message: "the model returned an empty response"}
	}
	am := session.AssistantMessage{Turn: turn, Step: step, Usage: asm.Usage(),
		Message: content.AssistantMessage(req.Provider, req.Model, blocks)}
	s.Append(session.TypeAssistantMessage, am, seqs...)
	if u := asm.Usage(); u != nil { // the tree was charged as the call settled (see step)
		*usage = usage.Add(*u)
		a.mu.Lock()
		m := a.metered()
		m.usage, m.lastCall = m.usage.Add(*u), tokens(*u)
		bytes := a.reqBytes
		a.mu.Unlock()
		a.learnRatio(bytes, *u)
	}
	if fin.Kind == content.FinishMaxTokens {
		return stepMaxTokens, nil
	}
	calls := content.ToolCalls(blocks)
	if len(calls) == 0 {
		return stepCompleted, nil
	}
	concluded := a.runTools(ctx, turn, step, calls)
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	if concluded {
		return stepCompleted, nil
	}
	return stepContinue, nil
}

// logRequestHeader logs request/header when this loop first sends a
// request or when the request shape changes.
func (a *Agent) logRequestHeader(req *llm.Request) {
	h := session.RequestHeader{Config: session.RequestConfig{Provider: req.Provider, Model: req.Model, MaxTokens: req.MaxTokens},
		System: req.System, Tools: req.Tools}
	a.mu.Lock()
	var last session.RequestHeader
	logged := false
	if p := a.lastHeader; p != nil {
		last, logged = (*p).(session.RequestHeader)
	}
	a.mu.Unlock()
	switch {
	case !logged:
		h.Reason = "initial"
		if a.session.LastTurn() > 1 || a.session.Header().SeedLength > 0 {
			h.Reason = "resume"
		}
	case sameHeader(last, h):
		return
	default:
		h.Reason = "change"
	}
	data := a.sharedHeader(h) // one copy, shared by the log and lastHeader (and siblings)
	a.mu.Lock()
	a.lastHeader = data
	a.mu.Unlock()
	a.session.Append(session.TypeRequestHeader, *data)
}

func sameHeader(a, b session.RequestHeader) bool {
	return a.Config == b.Config && a.System == b.System &&
		slices.EqualFunc(a.Tools, b.Tools, func(x, y content.ToolSpec) bool {
			return x.Name == y.Name && x.Description == y.Description && string(x.Parameters) == string(y.Parameters)
		})
}

// notRun is the result of a call whose checkpoint could not be written.
func notRun(err error) tool.Result {
	return tool.ErrorResult(CodeCheckpoint, "not run: the session could not be written: "+err.Error())
}

// runTools executes the calls of one assistant message and logs their
// results in the model's order. Consecutive concurrency-safe calls run in a
// bounded pool; any other call runs alone. Once ctx is cancelled no call
// starts; each unstarted call gets a synthetic "aborted before dispatch"
// result so the log stays replayable. It reports whether a successful result
// concluded the turn.
func (a *Agent) runTools(ctx context.Context, turn, step int, calls []content.Block) (concluded bool) {
	if len(calls) == 1 {
		return a.runTool(ctx, turn, step, calls[0])
	}
	type slot struct {
		call    content.Block
		callSeq int64
		started bool
		done    chan tool.Result
	}
	slots := make([]slot, len(calls))
	for i, c := range calls {
		slots[i].call = c
	}
	sem := make(chan struct{}, a.options().MaxParallelToolCalls)
	var wg sync.WaitGroup
	start := func(sl *slot) {
		sl.callSeq, sl.started = a.logCall(turn, step, sl.call), true
		sl.done = make(chan tool.Result, 1)
		// Checkpoint: the call is on disk before its body runs, so a crash
		// leaves it "outcome unknown", never unrecorded. A write failure
		// keeps the body from running.
		if err := a.session.Flush(); err != nil {
			sl.done <- notRun(err)
			<-sem
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sl.done <- a.execute(ctx, sl.call)
		}()
	}
	commit := func(sl *slot) {
		var res tool.Result
		if sl.started {
			res = <-sl.done
		} else {
			sl.callSeq = a.logCall(turn, step, sl.call)
			res = abortedBeforeDispatch()
		}
		if a.logResult(turn, step, sl.call.ID, sl.callSeq, res) {
			concluded = true
		}
	}
	committed := 0
	for i := range slots {
		sl := &slots[i]
		exclusive := !a.tools.ConcurrencySafe(sl.call.Name)
		if exclusive {
			// An exclusive call is a barrier: what ran before it finishes first.
			for ; committed < i; committed++ {
				commit(&slots[committed])
			}
		}
		acquired := false
		select {
		case sem <- struct{}{}:
			acquired = true
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			if acquired {
				<-sem
			}
			break
		}
		start(sl)
		if exclusive {
			commit(sl)
			committed = i + 1
		}
	}
	for ; committed < len(slots); committed++ {
		commit(&slots[committed])
	}
	wg.Wait()
	return concluded
}

// runTool is runTools for a message's only call: it runs on this
// goroutine, with no slot, semaphore or channel.
func (a *Agent) runTool(ctx context.Context, turn, step int, call content.Block) (concluded bool) {
	seq := a.logCall(turn, step, call)
	var res tool.Result
	switch {
	case ctx.Err() != nil:
		res = abortedBeforeDispatch()
	default:
		// Checkpoint: as in runTools.
		if err := a.session.Flush(); err != nil {
			res = notRun(err)
		} else {
			res = a.execute(ctx, call)
		}
	}
	return a.logResult(turn, step, call.ID, seq, res)
}

// logCall logs the start of a tool call and returns its event's seq.
func (a *Agent) logCall(turn, step int, call content.Block) int64 {
	e, _ := a.session.Append(session.TypeToolCall, session.ToolCall{Turn: turn, Step: step, CallID: call.ID,
		Name: call.Name, Arguments: call.Arguments})
	return e.Seq
}

// logResult logs the result of the call id whose start is the event
// callSeq, and reports whether it concludes the turn.
func (a *Agent) logResult(turn, step int, id string, callSeq int64, res tool.Result) (concluded bool) {
	tr := session.ToolResult{Turn: turn, Step: step, Meta: res.Meta, Usage: res.Usage,
		Message: content.ToolResultMessage(id, res.Content, res.IsError)}
	if res.IsError {
		tr.Error = &session.ErrorInfo{Name: "ToolError", Code: res.Code}
	} else if res.ConcludesTurn {
		concluded = true
	}
	a.session.Append(session.TypeToolResult, tr, callSeq)
	return concluded
}

// abortedBeforeDispatch is the result of a call that did not start: the
// turn was cancelled first.
func abortedBeforeDispatch() tool.Result {
	return tool.ErrorResult(tool.CodeAbortedBeforeDispatch, "tool call aborted before dispatch")
}

// execute runs one tool call in the agent's tools.
func (a *Agent) execute(ctx context.Context, call content.Block) tool.Result {
	tctx, endSpan := a.traceToolCall(ctx, call)
	res := a.tools.Execute(tctx, tool.Call{ID: call.ID, Name: call.Name,
		Arguments: json.RawMessage(call.Arguments), Cwd: a.Cwd(), Caller: a})
	endSpan(res)
	return res
}
