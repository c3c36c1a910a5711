// Package agent runs agents: each owns a session, an inbox of pending user
// messages, its own tool and prompt scopes, and a driver goroutine that runs
// the turn/step loop against a model while there is input.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/google/uuid"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool"
)

// Options configure an agent's model calls.
type Options struct {
	Provider  string `json:"provider,omitempty" yaml:"provider,omitempty"`
	Model     string `json:"model,omitempty" yaml:"model,omitempty"`
	MaxTokens int    `json:"maxTokens,omitempty" yaml:"maxTokens,omitempty"` // 0: the adapter's default
	// SubagentDepth is the runtime delegation depth; the session header's
	// depth is its floor.
	SubagentDepth int `json:"subagentDepth,omitempty" yaml:"subagentDepth,omitempty"`
	// MaxParallelToolCalls caps concurrency-safe calls run at once
	// (default 10; 1 runs every call in order).
	MaxParallelToolCalls int `json:"maxParallelToolCalls,omitempty" yaml:"maxParallelToolCalls,omitempty"`
	// MaxSteps caps the model calls of one turn (default DefaultMaxSteps;
	// negative is invalid). A turn that reaches it ends with EndMaxSteps.
	MaxSteps int `json:"maxSteps,omitempty" yaml:"maxSteps,omitempty"`
	// CompactAt is the share of the model's context window a request may
	// fill: past it, the agent first compacts the conversation (default
	// DefaultCompactAt; more than 0, at most 1).
	CompactAt float64 `json:"compactAt,omitempty" yaml:"compactAt,omitempty"`
	// MaxDelegationDepth caps the delegation depth of every child below
	// the agent (0: no cap beyond its tools'): a dsh parent's cap carried
	// across ACP. In-process children inherit it.
	MaxDelegationDepth int `json:"maxDelegationDepth,omitempty" yaml:"-"`
}

// DefaultMaxSteps is Options.MaxSteps when unset.
const DefaultMaxSteps = 100

// Status is whether an agent's driver is running.
type Status string

// The agent statuses.
const (
	StatusIdle    Status = "idle"
	StatusRunning Status = "running"
)

// Cancel cause kinds.
const (
	CauseUser     = "user"
	CauseParent   = "parent"
	CauseHook     = "hook"
	CauseDisposed = "disposed"
)

// CancelError is the context cause of a cancelled turn.
type CancelError struct{ Cause session.Cause }

func (e *CancelError) Error() string { return "agent cancelled: " + e.Cause.Kind }

// Error codes of this package.
const (
	CodeInvalidOptions = "INVALID_OPTIONS"
	CodeDisposed       = "AGENT_DISPOSED"
	CodeExists         = "AGENT_EXISTS"
	CodeSetup          = "SETUP_FAILED"
	// CodeCheckpoint is the result of a tool call that did not run because
	// the session could not be written before it.
	CodeCheckpoint = "CHECKPOINT_FAILED"
)

// Error is an agent failure with a stable code.
type Error struct {
	Code string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "agent: " + e.Msg + ": " + e.Err.Error()
	}
	return "agent: " + e.Msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// Is matches another *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Deps are the runtime services agents use.
type Deps struct {
	Sessions *session.Store
	LLM      *llm.Registry
	Tools    *tool.Registry
	Prompt   *prompt.Registry
	Events   *event.Bus
	Log      *slog.Logger
	// Hooks are the hooks of every top-level agent (and, through them, of
	// every descendant); nil: none.
	Hooks *hook.Set
	// Tracer makes spans of turns, model calls and tool calls (nil: none).
	Tracer *telemetry.Tracer
}

// Registry creates agents and holds the live ones.
type Registry struct {
	deps    Deps
	mu      sync.Mutex
	agents  map[string]*Agent
	created uint64 // agents created so far: each agent's seq
}

// renderSystem renders the agent's system text. A child compares it with
// the text a sibling last rendered (see sharedSystem) before it builds a
// copy: a fan-out's children build none.
func (a *Agent) renderSystem() (string, error) {
	kids := a.siblings()
	if kids == nil {
		return a.prompt.Render()
	}
	var text string
	var err error
	if p := kids.system.Load(); p != nil {
		text, err = a.prompt.RenderLike(*p)
	} else {
		text, err = a.prompt.Render()
	}
	if err != nil {
		return "", err
	}
	return kids.sharedSystem(text), nil
}

// children is what an agent keeps of the children it creates: made by the
// first (see kids), so that an agent without any, most often a child,
// holds a pointer, and an Agent fits the 416-byte size class.
type children struct {
	owned map[*Agent]struct{} // the live ones; guarded by the agent's mu
	turn  int32               // the turn count counts for; guarded by the agent's mu
	count int32               // children the turn started (see StartChild); guarded by the agent's mu
	// system is the system text a child last rendered (see sharedSystem);
	// header the request header a child last logged, boxed (see
	// sharedHeader).
	system atomic.Pointer[string]
	header atomic.Pointer[any]
}

// kids returns the agent's children record, made if need be. a.mu must be
// held.
func (a *Agent) kids() *children {
	k := a.children.Load()
	if k == nil {
		k = &children{}
		a.children.Store(k)
	}
	return k
}

// siblings returns the children record of the agent's owner, which shares
// what its children render and log alike; nil for a root.
func (a *Agent) siblings() *children {
	if a.owner == nil {
		return nil
	}
	return a.owner.children.Load() // made when the owner took a as its own
}

// ownedAgents returns the agent's live children. a.mu must be held.
func (a *Agent) ownedAgents() map[*Agent]struct{} {
	if k := a.children.Load(); k != nil {
		return k.owned
	}
	return nil
}

// sharedSystem returns text, or an equal string a sibling already holds:
// the children of one agent that render the same system text keep one
// copy of it instead of one each.
func (k *children) sharedSystem(text string) string {
	if p := k.system.Load(); p != nil && *p == text {
		return *p
	}
	k.system.Store(&text)
	return text
}

// sharedHeader returns h boxed for the log, or the box of an equal header
// a sibling already logged: the children of one agent that send the same
// request shape (most of a fan-out's) hold one copy of its header.
func (a *Agent) sharedHeader(h session.RequestHeader) *any {
	kids := a.siblings()
	if kids != nil {
		if p := kids.header.Load(); p != nil {
			if last := (*p).(session.RequestHeader); last.Reason == h.Reason && sameHeader(last, h) {
				return p
			}
		}
	}
	var data any = h
	if kids != nil {
		kids.header.Store(&data)
	}
	return &data
}

// NewRegistry returns an empty registry over deps.
func NewRegistry(deps Deps) *Registry {
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Events == nil {
		deps.Events = event.New(deps.Log)
	}
	return &Registry{deps: deps, agents: map[string]*Agent{}}
}

// CreateOptions describe a new agent.
type CreateOptions struct {
	SessionID       string // default: a random UUID
	Cwd             string // absolute; default: none
	ParentSession   string
	Origin          string
	DelegationDepth int
	Seed            []session.Event // completed turns to start from
	Options         Options
	Owner           *Agent // disposed agents dispose what they own
	// Policy narrows what the agent's tool calls may do, on top of its
	// owner's policy (a root agent starts from one that allows everything).
	// Nil keeps the owner's.
	Policy *permission.Policy
	// Label names the agent in permission asks, e.g. "spawn · fix tests".
	Label string
	// Asker answers the asks of the tree a root agent starts (nil: every
	// ask is refused). Agents with an owner share their root's, so it must
	// be nil for them.
	Asker permission.Asker
	// TokenBudget bounds the tokens (input, cached input and output) that
	// the tree a root agent starts may use for each prompt a person gives
	// it (a user-sourced message), every descendant included; 0 is
	// unbounded. Agents with an owner share their root's budget.
	TokenBudget int64
	// Hooks are added after the hooks the agent inherits: its owner's, or
	// for a top-level agent the registry's (Deps.Hooks).
	Hooks *hook.Set
	// Subagent describes an agent with an owner to its hooks as its
	// delegation started it (nil: nothing beyond its id); see Subagent.
	// Ignored for a top-level agent.
	Subagent *Subagent
	// Setup runs before the agent and its session are published; it may
	// register scoped tools, prompt sections and restrictions. An error
	// rolls everything back.
	Setup func(a *Agent) error
	// ToolHost marks an agent that has no conversation of its own: it
	// only runs tool calls for a client (each `dsh mcp` session's agent).
	// The notices of its background work are not delivered to it (the
	// client collects the work with task_output), so nothing opens a turn
	// of its own.
	ToolHost bool
	// Resume continues the stored session SessionID (see
	// session.Store.PrepareLoad: an interrupted last turn is closed) instead
	// of creating one; Cwd, ParentSession, Origin, DelegationDepth and Seed
	// come from the stored header and log, and must be unset.
	Resume bool
}

// Create builds an agent and publishes it. ctx governs creation only: if it
// is cancelled before publication nothing is left behind.
func (r *Registry) Create(ctx context.Context, opts CreateOptions) (*Agent, error) {
	if o := opts.Options; o.MaxTokens < 0 || o.SubagentDepth < 0 || o.MaxParallelToolCalls < 0 || o.MaxSteps < 0 || opts.TokenBudget < 0 {
		return nil, &Error{Code: CodeInvalidOptions, Msg: "maxTokens, subagentDepth, maxParallelToolCalls, maxSteps and tokenBudget must not be negative"}
	}
	if c := opts.Options.CompactAt; c != 0 {
		if err := CheckCompactAt(c); err != nil {
			return nil, &Error{Code: CodeInvalidOptions, Msg: "compactAt " + err.Error()}
		}
	}
	if opts.Owner != nil && (opts.Asker != nil || opts.TokenBudget != 0) {
		return nil, &Error{Code: CodeInvalidOptions, Msg: "an agent with an owner shares its root's asker and token budget"}
	}
	if opts.Options.Provider == "" {
		return nil, &Error{Code: CodeInvalidOptions, Msg: "options need a model provider"}
	}
	if opts.Owner != nil && opts.Owner.isDisposed() {
		return nil, &Error{Code: CodeDisposed, Msg: "owner agent " + opts.Owner.ID() + " is disposed"}
	}
	s, err := r.prepare(ctx, opts)
	if err != nil {
		return nil, err
	}
	a := newAgent(r, s, opts)
	a.traceCreated(ctx)
	fail := func() {
		a.unwind()
		r.deps.Sessions.Abandon(s)
	}
	if opts.Setup != nil {
		if err := opts.Setup(a); err != nil {
			fail()
			return nil, &Error{Code: CodeSetup, Msg: "setup of agent " + a.id, Err: err}
		}
	}
	if err := ctx.Err(); err != nil {
		fail()
		return nil, context.Cause(ctx)
	}
	detach, err := r.deps.Sessions.Enter(s)
	if err != nil {
		a.unwind()
		return nil, err
	}
	a.detach = detach
	r.mu.Lock()
	if _, dup := r.agents[a.id]; dup {
		r.mu.Unlock()
		detach()
		a.unwind()
		return nil, &Error{Code: CodeExists, Msg: "agent " + a.id + " exists"}
	}
	r.created++
	a.seq = r.created
	r.agents[a.id] = a
	r.mu.Unlock()
	if opts.Owner != nil && !opts.Owner.own(a) {
		a.Dispose(context.Background())
		return nil, &Error{Code: CodeDisposed, Msg: "owner agent " + opts.Owner.ID() + " was disposed during creation"}
	}
	r.deps.Events.Emit(Created{Agent: a})
	return a, nil
}

// prepare makes the unpublished session of a new agent: a fresh one, or the
// stored one it resumes.
func (r *Registry) prepare(ctx context.Context, opts CreateOptions) (*session.Session, error) {
	if !opts.Resume {
		return r.deps.Sessions.Prepare(session.CreateOptions{ID: cmp.Or(opts.SessionID, uuid.NewString()), Cwd: opts.Cwd,
			ParentSession: opts.ParentSession, Origin: opts.Origin, DelegationDepth: opts.DelegationDepth, Seed: opts.Seed})
	}
	if opts.SessionID == "" || opts.Cwd != "" || opts.ParentSession != "" || opts.Origin != "" || opts.DelegationDepth != 0 || opts.Seed != nil {
		return nil, &Error{Code: CodeInvalidOptions, Msg: "resume takes a session id, and its header from the stored session"}
	}
	return r.deps.Sessions.PrepareLoad(ctx, opts.SessionID)
}

// Get returns a live agent.
func (r *Registry) Get(id string) (*Agent, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.agents[id]
	return a, ok
}

// List returns the live agents in creation order.
func (r *Registry) List() []*Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Agent, 0, len(r.agents))
	for _, a := range r.agents {
		out = append(out, a)
	}
	bySeq(out)
	return out
}

// DisposeAll disposes every live agent.
func (r *Registry) DisposeAll(ctx context.Context) error {
	var errs []error
	for _, a := range slices.Backward(r.List()) {
		errs = append(errs, a.Dispose(ctx))
	}
	return errors.Join(errs...)
}

func (r *Registry) remove(a *Agent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.agents, a.id)
}

// bySeq sorts agents by creation order.
func bySeq(agents []*Agent) {
	slices.SortFunc(agents, func(x, y *Agent) int { return cmp.Compare(x.seq, y.seq) })
}

// Created is emitted when an agent is published.
type Created struct{ Agent *Agent }

// Disposed is emitted when an agent is gone, before its session detaches.
type Disposed struct{ Agent *Agent }

// StatusChanged is emitted when an agent starts or stops running.
type StatusChanged struct {
	Agent  *Agent
	Status Status
}

// TurnEnded is emitted after a turn's turn/end is logged.
type TurnEnded struct {
	Agent *Agent
	End   session.TurnEnd
	Usage content.Usage
}

// EventType implements event.Event.
func (Created) EventType() string { return "agent/created" }

// EventType implements event.Event.
func (Disposed) EventType() string { return "agent/disposed" }

// EventType implements event.Event.
func (StatusChanged) EventType() string { return "agent/status" }

// EventType implements event.Event.
func (TurnEnded) EventType() string { return "agent/turn-end" }

// Agent is a live agent. Its methods are safe for concurrent use.
type Agent struct {
	reg     *Registry
	id      string
	session *session.Session
	opts    unique.Handle[Options] // interned: the children of one parent share one copy (see options)
	route   atomic.Pointer[route]  // SetRoute's, over opts' Provider and Model
	tools   *tool.Scope
	prompt  *prompt.Scope
	owner   *Agent
	policy  permission.Policy // captured at creation; never widened
	hooks   *hook.Set         // inherited, plus CreateOptions.Hooks
	path    []string          // labels from the root's child down to this agent
	tree    *tree             // shared by every agent of the delegation tree
	// children is what the agent keeps of its children, made by the
	// first (see kids); set once, under mu, read by the children.
	children atomic.Pointer[children]

	mu    sync.Mutex
	inbox inbox
	// disposeOnce (12 bytes) and the flags share two words: an Agent is
	// 568 B, in the 576-byte size class with its allocation header.
	disposeOnce sync.Once
	running     bool
	parked      bool // a Cancel kept the inbox: no turn starts until a waking send
	disposed    bool
	host        bool          // CreateOptions.ToolHost, set at creation
	idle        chan struct{} // made by a WaitIdle waiter, closed when the driver goes idle
	cancelTurn  context.CancelCauseFunc
	turnMsgID   string // the next-turn message the running turn claimed
	seq         uint64 // creation order in the registry
	disposers   []func()
	idlers      []func() // see OnIdle
	lastHeader  *any     // the session.RequestHeader last logged, as boxed in its event
	meter       *meter   // nil until a model call reports usage (or a compaction); guarded by mu
	reqBytes    int64    // the bytes of the request being sent (see compact.go)
	detach      func() error

	wg          sync.WaitGroup
	disposeErr  error
	disposeDone chan struct{} // made by the first Dispose

	trace *traceState // nil when tracing is off

	// hookState is a root's (see hookState); a child's holds only its own
	// transcript (agent_transcript_path of its SubagentStop), nil for a
	// child without SubagentStop hooks.
	hookState *hookState
	toolHooks *toolHookState // nil without PreToolUse and PostToolUse hooks
	hookStop  *session.Cause // a hook asked the turn to end (under mu)
	subagent  *Subagent      // CreateOptions.Subagent of a child; nil for a root
}

// options returns the options the agent was created with. They are
// interned (unique.Make), not a field of their own: an Agent is 416 B, in
// the 416-byte size class, and a parent's children, whose options are
// alike, hold one copy.
func (a *Agent) options() Options { return a.opts.Value() }

// meter is what an agent's model calls reported: made by the first call
// that reports usage (or a compaction), so that a child parked in its
// first model call holds none, and an Agent is 512 B, in the 512-byte size
// class (objects up to 512 B carry no allocation header).
type meter struct {
	usage    content.Usage
	lastCall int64 // tokens of the agent's last model call that reported usage
	// Compaction (see compact.go): the prompt tokens per byte of history
	// the last call reported, and the estimated prompt just after the last
	// compaction.
	tokensPerByte float64
	compactFloor  int64
}

// metered returns a's meter, made on first use. a.mu must be held.
func (a *Agent) metered() *meter {
	if a.meter == nil {
		a.meter = new(meter)
	}
	return a.meter
}

// measured returns a copy of a's meter (zero before any call reported).
// a.mu must be held.
func (a *Agent) measured() meter {
	if a.meter == nil {
		return meter{}
	}
	return *a.meter
}

func newAgent(r *Registry, s *session.Session, opts CreateOptions) *Agent {
	o := opts.Options
	if o.MaxParallelToolCalls == 0 {
		o.MaxParallelToolCalls = 10
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.CompactAt == 0 {
		o.CompactAt = DefaultCompactAt
	}
	a := &Agent{reg: r, id: s.ID(), session: s, opts: unique.Make(o), owner: opts.Owner, host: opts.ToolHost,
		tools: r.deps.Tools.NewScope()}
	if p := opts.Owner; p != nil {
		a.tree, a.policy, a.hooks = p.tree, p.policy, p.hooks
		a.path = append(slices.Clip(p.path), cmp.Or(opts.Label, "child "+a.id))
		a.tools.AddLayers(p.tools.Layers()...) // a tree's shared tools, e.g. its ACP client's MCP servers
		a.tools.Inherit(p.tools)               // what the owner may not see, no descendant sees
		a.subagent = opts.Subagent
	} else {
		a.tree, a.hooks = newTree(opts.Asker, opts.TokenBudget), r.deps.Hooks
		a.hookState = new(hookState)
	}
	if opts.Policy != nil {
		a.policy = a.policy.NarrowBy(*opts.Policy)
	}
	a.hooks = a.hooks.With(opts.Hooks)
	if a.owner != nil && a.hooks.Has(hook.SubagentStop) {
		a.hookState = new(hookState)
	}
	a.tools.GuardCall(a.guardCall)
	if a.hooks.Has(hook.PostToolUse) || a.hooks.Has(hook.PreToolUse) {
		a.toolHooks = new(toolHookState)
		a.tools.After(a.afterTool)
	}
	a.prompt = r.deps.Prompt.NewScopeWith(a.builtin)
	if s.Header().Cwd != "" {
		a.prompt.Section(prompt.Section{Name: "harness:environment", Order: prompt.IdentityOrder + 1, Text: "Working directory: {{cwd}}"})
	}
	return a
}

// builtin resolves the prompt variables every agent has: provider, model
// and cwd.
func (a *Agent) builtin(name string) (value string, defined, ok bool) {
	switch name {
	case "provider":
		provider, _ := a.routeOf()
		return provider, true, true
	case "model":
		_, model := a.routeOf()
		return model, true, model != ""
	case "cwd":
		cwd := a.session.Header().Cwd
		return cwd, true, cwd != ""
	}
	return "", false, false
}

// ID returns the agent id, which is also its session id.
func (a *Agent) ID() string { return a.id }

// Session returns the agent's session.
func (a *Agent) Session() *session.Session { return a.session }

// Options returns the agent's options.
func (a *Agent) Options() Options {
	o := a.options()
	o.Provider, o.Model = a.routeOf()
	return o
}

// Tools returns the agent's tool scope.
func (a *Agent) Tools() *tool.Scope { return a.tools }

// Prompt returns the agent's prompt scope.
func (a *Agent) Prompt() *prompt.Scope { return a.prompt }

// Owner returns the agent that created this one, or nil.
func (a *Agent) Owner() *Agent { return a.owner }

// Cwd returns the session's working directory.
func (a *Agent) Cwd() string { return a.session.Header().Cwd }

// Depth returns the effective delegation depth: the larger of the session
// header's durable depth and the runtime depth of the options.
func (a *Agent) Depth() int {
	return max(a.session.Header().DelegationDepth, a.options().SubagentDepth)
}

// Usage returns the tokens the agent's model calls have used so far.
func (a *Agent) Usage() content.Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.measured().usage
}

// Status reports whether the agent is running.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running {
		return StatusRunning
	}
	return StatusIdle
}

// Queued returns how many messages wait in the inbox: claimed by no turn
// yet.
func (a *Agent) Queued() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.inbox.turn) + len(a.inbox.step)
}

// OnDispose registers fn to run when the agent is disposed, after its driver
// stopped and before its session detaches. It reports false, and does not
// register fn, when disposal has already begun.
func (a *Agent) OnDispose(fn func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disposed {
		return false
	}
	a.disposers = append(a.disposers, fn)
	return true
}

// OnIdle registers fn to run each time the agent goes idle (nothing left
// to run, or its queue parked), on the goroutine that drove it, after the
// driver stopped: fn may dispose the agent. Register it before the agent
// gets work. It reports false, and does not register fn, when disposal has
// already begun.
func (a *Agent) OnIdle(fn func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disposed {
		return false
	}
	a.idlers = append(a.idlers, fn)
	return true
}

// StartChild counts a child started on behalf of the agent's running turn
// against limit (0: no limit) and reports false, counting nothing, when
// that turn has started limit children already. A start while no turn
// runs (a tool host's, an embedder's) is not counted.
func (a *Agent) StartChild(limit int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.running || a.host {
		return true
	}
	k := a.kids()
	if n := int32(a.session.LastTurn()); n != k.turn {
		k.turn, k.count = n, 0
	}
	if limit > 0 && int(k.count) >= limit {
		return false
	}
	k.count++
	return true
}

// Disposed reports whether disposal of the agent has begun.
func (a *Agent) Disposed() bool { return a.isDisposed() }

// ToolHost reports whether the agent only runs tool calls for a client
// (see CreateOptions.ToolHost): notices are not for it.
func (a *Agent) ToolHost() bool { return a.host }

func (a *Agent) isDisposed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.disposed
}

func (a *Agent) own(child *Agent) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.disposed {
		return false
	}
	k := a.kids()
	if k.owned == nil {
		k.owned = map[*Agent]struct{}{}
	}
	k.owned[child] = struct{}{}
	return true
}

func (a *Agent) disown(child *Agent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.ownedAgents(), child)
}

// unwind runs the scoped disposers registered so far.
func (a *Agent) unwind() {
	a.mu.Lock()
	ds := a.disposers
	a.disposers = nil
	a.mu.Unlock()
	for _, d := range slices.Backward(ds) {
		d()
	}
}

// Followup queues msg as the prompt of a future turn and wakes the agent.
func (a *Agent) Followup(msg content.Message) error { return a.send(msg, nextTurn, true, nil) }

// Steer queues msg for the next step of the running turn (or a new turn
// when idle) and wakes the agent.
func (a *Agent) Steer(msg content.Message) error { return a.send(msg, nextStep, true, nil) }

// Inject queues msg for the next step without waking an idle agent: it
// rides along with the next step that runs for another reason (a tool
// result, a steered message, a new turn), and never makes one itself.
func (a *Agent) Inject(msg content.Message) error { return a.send(msg, nextStep, false, nil) }

// Run queues msg as a new turn's prompt and waits for that turn to end.
// When the agent is idle, the turn runs on the calling goroutine, and any
// input queued meanwhile is handed to a driver goroutine once it ends.
// Cancelling ctx cancels the turn (with the *CancelError cause of ctx, if
// any, else cause user); Run then returns its aborted end. The error is only
// for a message that could not be queued.
func (a *Agent) Run(ctx context.Context, msg content.Message) (session.TurnEnd, error) {
	done := make(chan session.TurnEnd, 1)
	a.traceRun(ctx, msg.ID)
	if err := a.send(msg, nextTurn, false, func(end session.TurnEnd) { done <- end }); err != nil {
		return session.TurnEnd{}, err
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			cause := session.Cause{Kind: CauseUser}
			if ce := (*CancelError)(nil); errors.As(context.Cause(ctx), &ce) {
				cause = ce.Cause
			}
			a.CancelMessage(msg.ID, cause)
		})
		defer stop()
	}
	a.driveHere(func() bool { return len(done) > 0 })
	return <-done, nil
}

// Submit queues msg as a new turn's prompt, like Followup, and calls onEnd
// exactly once with the end of that turn — or an aborted end if the message
// is dropped before a turn takes it. onEnd runs on the agent's goroutine and
// must not block.
func (a *Agent) Submit(msg content.Message, onEnd func(session.TurnEnd)) error {
	return a.send(msg, nextTurn, true, onEnd)
}

// Held is a turn queued by Hold that has not been started.
type Held struct{ a *Agent }

// Hold queues msg as a new turn's prompt, like Submit, but does not wake
// an idle agent: the turn starts when the caller calls RunHere or Release,
// or when something else wakes the agent first. onEnd is as for Submit.
func (a *Agent) Hold(msg content.Message, onEnd func(session.TurnEnd)) (*Held, error) {
	if err := a.send(msg, nextTurn, false, onEnd); err != nil {
		return nil, err
	}
	return &Held{a: a}, nil
}

// RunHere runs the agent's queued input, the held turn included, on the
// calling goroutine, as its driver goroutine would, and returns once the
// inbox is empty. It returns at once when a driver is already running or
// the agent is disposed.
func (h *Held) RunHere() { h.a.driveHere(nil) }

// Release starts a driver goroutine for the queued input, the held turn
// included, when the agent is idle.
func (h *Held) Release() {
	if h.a.becomeDriver() {
		go h.a.drive(nil)
	}
}

// driveHere becomes the agent's driver on the calling goroutine when the
// agent is idle with queued input (see drive).
func (a *Agent) driveHere(until func() bool) {
	if a.becomeDriver() {
		a.drive(until)
	}
}

// becomeDriver marks an idle agent with queued input running, for a driver
// the caller then starts, and reports whether it did.
func (a *Agent) becomeDriver() bool {
	a.mu.Lock()
	a.parked = false
	start := !a.running && !a.disposed && a.inbox.pending()
	if start {
		a.startDriver()
	}
	a.mu.Unlock()
	if start {
		a.reg.deps.Events.Emit(StatusChanged{Agent: a, Status: StatusRunning})
	}
	return start
}

// CancelMessage cancels the turn that took msgID as its prompt, or drops
// the message while it is still queued. Other turns are unaffected.
func (a *Agent) CancelMessage(msgID string, cause session.Cause) { a.cancelItem(msgID, cause) }

// Cancel aborts the running turn with cause and clears the inbox, or, with
// keepInbox, parks it: what is queued stays, and no turn takes it until a
// waking send (Followup, Steer, Submit) or Wake. It is a no-op when the
// agent is idle.
func (a *Agent) Cancel(cause session.Cause, keepInbox bool) {
	a.mu.Lock()
	if !a.running {
		a.mu.Unlock()
		return
	}
	var dropped []item
	if keepInbox {
		a.parked = true
	} else {
		dropped = a.inbox.clear()
	}
	cancel := a.cancelTurn
	a.mu.Unlock()
	a.discard(dropped)
	if cancel != nil {
		cancel(&CancelError{Cause: cause})
	}
}

// cancelItem cancels the turn running msgID, or drops it while queued.
func (a *Agent) cancelItem(msgID string, cause session.Cause) {
	a.mu.Lock()
	if it, ok := a.inbox.remove(msgID); ok {
		a.mu.Unlock()
		a.discard([]item{it})
		return
	}
	var cancel context.CancelCauseFunc
	if a.turnMsgID == msgID {
		cancel = a.cancelTurn
	}
	a.mu.Unlock()
	if cancel != nil {
		cancel(&CancelError{Cause: cause})
	}
}

// discard records dropped inbox items and answers their waiters.
func (a *Agent) discard(items []item) {
	if len(items) == 0 {
		return
	}
	byTarget := map[string][]string{}
	for _, it := range items {
		byTarget[it.target] = append(byTarget[it.target], it.msg.ID)
		if it.onEnd != nil {
			it.onEnd(session.TurnEnd{Reason: session.EndReason{Kind: session.EndAborted, Cause: &session.Cause{Kind: CauseUser}}})
		}
	}
	for target, ids := range byTarget {
		a.session.Append(session.TypeInboxSpliced, session.InboxSpliced{Target: target, Removed: ids, Outcome: "canceled"})
	}
}

// WaitIdle returns when the agent is idle or ctx is done.
func (a *Agent) WaitIdle(ctx context.Context) error {
	for {
		a.mu.Lock()
		if !a.running {
			a.mu.Unlock()
			return nil
		}
		if a.idle == nil {
			a.idle = make(chan struct{})
		}
		idle := a.idle
		a.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Dispose stops the agent: it refuses new input, cancels the running turn,
// waits for the driver to stop, disposes the agents it owns, runs its scoped
// disposers, leaves the registry and detaches its session. It is idempotent;
// a ctx that ends first makes this call return early while teardown goes on.
func (a *Agent) Dispose(ctx context.Context) error {
	a.mu.Lock()
	if a.disposeDone == nil { // made here, not at creation: a live child does not hold it
		a.disposeDone = make(chan struct{})
	}
	done := a.disposeDone
	a.mu.Unlock()
	if ctx.Done() == nil { // cannot end early: tear down on this goroutine
		a.disposeOnce.Do(a.dispose)
	}
	a.disposeOnce.Do(func() { go a.dispose() })
	select {
	case <-done:
		return a.disposeErr
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (a *Agent) dispose() {
	defer close(a.disposeDone)
	a.mu.Lock()
	a.disposed = true
	dropped := a.inbox.clear()
	cancel := a.cancelTurn
	owned := slices.Collect(maps.Keys(a.ownedAgents()))
	bySeq(owned)
	a.mu.Unlock()
	for _, it := range dropped {
		if it.onEnd != nil {
			it.onEnd(session.TurnEnd{Reason: session.EndReason{Kind: session.EndAborted, Cause: &session.Cause{Kind: CauseDisposed}}})
		}
	}
	if cancel != nil {
		cancel(&CancelError{Cause: session.Cause{Kind: CauseDisposed}})
	}
	a.wg.Wait()
	a.sessionEndHooks()
	var errs []error
	for _, c := range slices.Backward(owned) {
		errs = append(errs, c.Dispose(context.Background()))
	}
	a.unwind()
	if a.owner != nil {
		a.owner.disown(a)
	}
	a.reg.remove(a)
	a.reg.deps.Events.Emit(Disposed{Agent: a})
	if a.detach != nil {
		errs = append(errs, a.detach())
	}
	a.disposeErr = errors.Join(errs...)
}

func (a *Agent) send(msg content.Message, target string, wake bool, onEnd func(session.TurnEnd)) error {
	if msg.ID == "" {
		return &Error{Code: CodeInvalidOptions, Msg: "message has no id"}
	}
	a.mu.Lock()
	if a.disposed {
		a.mu.Unlock()
		return &Error{Code: CodeDisposed, Msg: fmt.Sprintf("agent %s is disposed", a.id)}
	}
	if a.inbox.has(msg.ID) {
		a.mu.Unlock()
		return &Error{Code: CodeInvalidOptions, Msg: "message " + msg.ID + " is already queued"}
	}
	// Record the splice before the item becomes claimable, so the log shows
	// the insertion before the turn that consumes it.
	inserted := []content.Message{msg}
	a.session.Append(session.TypeInboxSpliced, session.InboxSpliced{Target: target, Inserted: inserted})
	a.inbox.push(item{msg: &inserted[0], target: target, onEnd: onEnd, wake: wake})
	if wake {
		a.parked = false
	}
	start := wake && !a.running
	if start {
		a.startDriver()
		go a.drive(nil)
	}
	a.mu.Unlock()
	if start {
		a.reg.deps.Events.Emit(StatusChanged{Agent: a, Status: StatusRunning})
	}
	return nil
}

// startDriver marks the agent running for a driver about to start. a.mu
// must be held.
func (a *Agent) startDriver() {
	a.running = true
	a.wg.Add(1)
}
