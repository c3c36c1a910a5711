// Package dshcase builds the delegation scenarios of the bench module on dsh:
// a runtime whose model is in-process and instant, with the reference's
// answer shape (a 5-chunk stream: block-start, one delta, block-end, usage,
// finish), the spawn and fork providers and the foreground subagent tool.
package dshcase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
)

// The scenario's fixed texts.
const (
	Provider       = "mock"
	Model          = "mock"
	ChildAnswer    = "child answer"
	ParentAnswer   = "parent done"
	PromptDelegate = "delegate" // the parent calls the subagent tool once
	PromptDirect   = "direct"   // the parent answers at once
	PromptTask     = "do X"     // a child's task: answer at once
	PromptPark     = "park"     // a child's task: wait at the gate, then answer
	ToolArgs       = `{"description":"bench","prompt":"do X"}`
)

// TextAnswer is an answer of text s as a 5-chunk stream.
func TextAnswer(s string) []content.Chunk {
	b := content.Text(s)
	return []content.Chunk{
		{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeText},
		{Type: content.ChunkTextDelta, Index: 0, Text: s},
		{Type: content.ChunkBlockEnd, Index: 0, Block: &b},
		{Type: content.ChunkUsage, Usage: &content.Usage{Input: 10, Output: 5}},
		{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishStop}},
	}
}

// ToolCallAnswer is one tool call as a 5-chunk stream.
func ToolCallAnswer(id, name, args string) []content.Chunk {
	b := content.ToolCall(id, name, args)
	return []content.Chunk{
		{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeToolCall},
		{Type: content.ChunkToolCallDelta, Index: 0, ID: id, Name: name, ArgumentsDelta: args},
		{Type: content.ChunkBlockEnd, Index: 0, Block: &b},
		{Type: content.ChunkUsage, Usage: &content.Usage{Input: 10, Output: 5}},
		{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishToolCalls}},
	}
}

var (
	childAnswer  = TextAnswer(ChildAnswer)
	parentAnswer = TextAnswer(ParentAnswer)
	toolCall     = ToolCallAnswer("call_1", "subagent", ToolArgs)
)

// Options configure New.
type Options struct {
	// Backend stores sessions (nil: in memory).
	Backend session.Backend
	// Tool mounts the subagent tool bound to spawn, foreground only (as the
	// reference's dsh-tool-subagent {provider: 'spawn',
	// enableRunInBackground: false}).
	Tool bool
}

// Env is one runtime with the routing model registered as provider "mock".
type Env struct {
	RT *dsh.Runtime

	gate     chan struct{}
	parked   atomic.Int64
	failures atomic.Int64
	lastFail atomic.Value // string

	toolCallEnd atomic.Int64 // unix ns: the end of the parent's tool-call stream
	toolPath    atomic.Int64 // ns: tool-call end → next parent request with the result
}

// Quiet is a logger that drops everything below error.
var Quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// Discard drops every log record.
var Discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// New builds a runtime with the spawn and fork providers and, with
// opts.Tool, the subagent tool.
func New(opts Options) (*Env, error) {
	rt, err := dsh.New(dsh.Options{Logger: Quiet, Backend: opts.Backend})
	if err != nil {
		return nil, err
	}
	e := &Env{RT: rt, gate: make(chan struct{})}
	if _, err := rt.LLM.Register(Provider, llm.ModelFunc(e.stream)); err != nil {
		return nil, err
	}
	for _, mk := range []func(*agent.Registry) (*inproc.Provider, error){inproc.NewSpawn, inproc.NewFork} {
		p, err := mk(rt.Agents)
		if err != nil {
			return nil, err
		}
		if _, err := rt.Subagents.Register(p); err != nil {
			return nil, err
		}
	}
	if opts.Tool {
		off := false
		if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Events: rt.Events, Log: Quiet},
			subagenttool.Config{Provider: inproc.SpawnName, EnableRunInBackground: &off}); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Close disposes every agent.
func (e *Env) Close() error { return e.RT.Close(context.Background()) }

// Release opens the gate: every parked child (and every later one) answers.
func (e *Env) Release() { close(e.gate) }

// Parked returns how many children wait at the gate now.
func (e *Env) Parked() int64 { return e.parked.Load() }

// Failures returns how many model requests did not look as the scenario
// expects, and the last such problem.
func (e *Env) Failures() (int64, string) {
	s, _ := e.lastFail.Load().(string)
	return e.failures.Load(), s
}

func (e *Env) fail(format string, args ...any) {
	e.failures.Add(1)
	e.lastFail.Store(fmt.Sprintf(format, args...))
}

// ToolPath returns the last tool-call → tool-result interval: from the end
// of the parent's tool-call stream to the arrival of its next model request,
// which carries the result.
func (e *Env) ToolPath() time.Duration { return time.Duration(e.toolPath.Load()) }

// IsChild reports whether req comes from an in-process child: its last
// user-authored message opens with a child's instructions.
func IsChild(req *llm.Request) bool {
	_, child := lastUser(req.Messages)
	return child
}

// lastUser returns the task of the last user-authored message (its text,
// a child's instructions left out) and whether it is a child's. It is
// prompt.SplitChildTask of the message's text joined, without the join
// when the first block holds the framed instructions (as an in-process
// child's first message does): the model's own reading costs no copy of
// the instructions, as eino's fake model, which knows a child by its
// construction, costs none.
func lastUser(msgs []content.Message) (task string, child bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Source.Kind != content.SourceUser {
			continue
		}
		if len(m.Content) > 1 && m.Content[0].Type == content.TypeText {
			if _, rest, ok := prompt.SplitChildTask(m.Content[0].Text); ok {
				if rest == "" {
					return content.JoinText(m.Content[1:]), true
				}
				return rest + content.JoinText(m.Content[1:]), true
			}
		}
		_, task, child = prompt.SplitChildTask(content.JoinText(m.Content))
		return task, child
	}
	return "", false
}

func (e *Env) stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	if task, child := lastUser(req.Messages); child {
		if task == PromptPark {
			return e.park(ctx)
		}
		return play(childAnswer, nil)
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Source.Kind == content.SourceTool {
		e.toolPath.Store(time.Now().UnixNano() - e.toolCallEnd.Load())
		if b := last.Content[0]; b.IsError || content.JoinText(b.Content) != ChildAnswer {
			e.fail("parent got tool result %+v", b)
		}
		return play(parentAnswer, nil)
	}
	switch t := content.JoinText(last.Content); t {
	case PromptDelegate:
		return play(toolCall, func() { e.toolCallEnd.Store(time.Now().UnixNano()) })
	case PromptDirect:
		return play(parentAnswer, nil)
	default:
		e.fail("parent got prompt %q", t)
		return play(parentAnswer, nil)
	}
}

// play yields chunks, then calls end (if set) once the consumer has taken
// the last one.
func play(chunks []content.Chunk, end func()) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) {
		for _, c := range chunks {
			if !yield(c) {
				break
			}
		}
		if end != nil {
			end()
		}
	}
}

// park holds the child inside its model call until the gate opens.
func (e *Env) park(ctx context.Context) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) {
		e.parked.Add(1)
		select {
		case <-e.gate:
			e.parked.Add(-1)
		case <-ctx.Done():
			e.parked.Add(-1)
			yield(llm.FinishAborted(context.Cause(ctx)))
			return
		}
		for _, c := range childAnswer {
			if !yield(c) {
				return
			}
		}
	}
}

// NewParent creates a parent agent on the mock model.
func (e *Env) NewParent(ctx context.Context, cwd string) (*agent.Agent, error) {
	return e.RT.Agents.Create(ctx, agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: Provider, Model: Model}})
}

// Turn runs one parent turn on prompt and checks that it completed.
func Turn(ctx context.Context, a *agent.Agent, prompt string) error {
	end, err := a.Run(ctx, content.UserText(prompt))
	if err != nil {
		return err
	}
	if end.Reason.Kind != session.EndCompleted {
		return fmt.Errorf("parent turn ended %s", end.Reason.Kind)
	}
	return nil
}

// Delegation is one parent turn with one delegation on a fresh parent:
// create → turn (tool call → child → tool result → answer) → dispose.
func (e *Env) Delegation(ctx context.Context, cwd string) error {
	p, err := e.NewParent(ctx, cwd)
	if err != nil {
		return err
	}
	terr := Turn(ctx, p, PromptDelegate)
	return errors.Join(terr, p.Dispose(ctx))
}

// Phases are the durations of one round trip through the subagent service.
type Phases struct{ Start, Result, Dispose time.Duration }

// Total is the whole round trip.
func (p Phases) Total() time.Duration { return p.Start + p.Result + p.Dispose }

// RoundTrip runs one delegation through the service: Start → Wait →
// Dispose, and checks the child's answer.
func (e *Env) RoundTrip(ctx context.Context, provider string, parent *agent.Agent, task string) (Phases, error) {
	var ph Phases
	t0 := time.Now()
	run, err := e.RT.Subagents.Start(ctx, provider, subagent.StartRequest{Prompt: []content.Block{content.Text(task)}, Parent: parent})
	if err != nil {
		return ph, err
	}
	t1 := time.Now()
	res, err := run.Wait(ctx)
	t2 := time.Now()
	derr := run.Dispose(ctx)
	t3 := time.Now()
	ph = Phases{Start: t1.Sub(t0), Result: t2.Sub(t1), Dispose: t3.Sub(t2)}
	if err := errors.Join(err, derr); err != nil {
		return ph, err
	}
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != ChildAnswer {
		return ph, fmt.Errorf("child stopped %s with %q (%s)", res.StopReason, content.JoinText(res.Output), res.Diagnostic)
	}
	return ph, nil
}

// Start starts one child without waiting for it.
func (e *Env) Start(ctx context.Context, provider string, parent *agent.Agent, task string) (subagent.Run, error) {
	return e.RT.Subagents.Start(ctx, provider, subagent.StartRequest{Prompt: []content.Block{content.Text(task)}, Parent: parent})
}

// NullBackend is a session backend that keeps nothing: writes are dropped
// and nothing can be loaded. It takes persistence out of the measurement
// (the eino side persists nothing either) without retaining every log in
// the heap, as session.MemoryBackend does.
type NullBackend struct{}

type nullPersister struct{}

// Create implements session.Backend.
func (NullBackend) Create(session.Header) (session.Persister, error) { return nullPersister{}, nil }

// Load implements session.Backend.
func (NullBackend) Load(id string) (session.Header, []session.Event, session.Persister, error) {
	return session.Header{}, nil, nil, &session.Error{Code: session.CodeNotFound, Msg: "null backend stores nothing: " + id}
}

// List implements session.Backend.
func (NullBackend) List() ([]session.Header, error) { return nil, nil }

func (nullPersister) Append([]session.Event) error { return nil }
func (nullPersister) Close() error                 { return nil }

// Backend returns the backend named by store: "null", "memory" or
// "jsonl" (under dir).
func Backend(store, dir string) (session.Backend, error) {
	switch store {
	case "null":
		return NullBackend{}, nil
	case "memory":
		return session.NewMemoryBackend(), nil
	case "jsonl":
		return jsonl.New(dir), nil
	}
	return nil, fmt.Errorf("unknown store %q (null, memory, jsonl)", store)
}
