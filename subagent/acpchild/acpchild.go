// Package acpchild is the subagent provider that runs any Agent Client
// Protocol agent as a child process — including another dsh (`dsh acp`):
// it spawns the configured command, performs the ACP handshake, sends the
// task as one prompt and collects the agent's message text as the output.
package acpchild

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/internal/warm"
	"github.com/dsh-go/dsh/telemetry"
)

// How the provider answers the child's permission requests.
const (
	// PermissionPolicy (the default) decides by the parent's permission
	// policy: what it allows is allowed, what it denies refused, and what
	// it says to ask about goes to the tree's asker (the person), naming
	// this child.
	PermissionPolicy = "policy"
	// PermissionReject refuses every request.
	PermissionReject = "reject"
)

// Config configures an ACP provider. Its Options are the kit's shared
// block: name (default "acp"), command (the agent program, required),
// args, cwd, env, passEnv (e.g. a model key) and the timeouts
// (ReadyTimeout bounds the handshake; CancelGrace is how long a cancelled
// prompt may take to answer).
type Config struct {
	childproc.Options `yaml:",inline"`
	// Permission is policy (default) or reject.
	Permission string `yaml:"permission"`
	// MaxDepth is the deepest delegation depth this provider starts a
	// child at (default 4): ACP cannot carry a depth cap to the child, so
	// the provider enforces one itself against runaway recursion.
	MaxDepth int `yaml:"maxDepth"`
	// DepthEnv, when set, names a variable that tells the child its depth
	// (dsh children read DSH_DEPTH).
	DepthEnv string `yaml:"depthEnv"`
	// Dsh says that the agent is dsh itself (`command: self`): it applies
	// the persona, tool filter, output schema and depth cap dsh's `_meta`
	// extension carries (acpmeta.Session), so the provider declares those
	// capabilities. Set by the configuration, not read from the file.
	Dsh bool `yaml:"-"`
	// Pool keeps the agent's processes warm between children: each child
	// is then a session/new on a running process, disposed with
	// session/close when the agent advertises it, else only dropped (see
	// childproc.Pool). Nil: the default, DefaultSelfPool for a dsh child
	// and a process per child for any other agent.
	Pool *childproc.Pool `yaml:"pool"`
}

// Provider runs ACP agents as children. Close it: it stops the processes
// it keeps warm.
type Provider struct {
	cfg    Config
	bounds childproc.Pool         // the pool's, resolved; Size 0: none
	pool   *warm.Pool[*agentProc] // nil: a process per child
}

// New validates cfg and returns a provider.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Options.Check(providerKind, "acp", "", nil); err != nil {
		return nil, err
	}
	cfg.Permission = cmp.Or(cfg.Permission, PermissionPolicy)
	cfg.MaxDepth = cmp.Or(cfg.MaxDepth, 4)
	bad := func(field, format string, args ...any) error {
		return &subagent.ConfigError{Kind: providerKind, Provider: cfg.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case cfg.Permission != PermissionReject && cfg.Permission != PermissionPolicy:
		return nil, bad("permission", "must be %q (the parent's permission policy decides) or %q, got %q", PermissionPolicy, PermissionReject, cfg.Permission)
	case cfg.MaxDepth < 0:
		return nil, bad("maxDepth", "must not be negative, got %d", cfg.MaxDepth)
	}
	p := &Provider{cfg: cfg}
	var dflt *childproc.Pool
	if cfg.Dsh {
		dflt = DefaultSelfPool()
	}
	pc, err := cfg.Pool.Resolve(providerKind, cfg.Name, dflt)
	if err != nil {
		return nil, err
	}
	p.bounds = pc
	if pc.On() {
		if p.pool, err = warm.New[*agentProc](pc.Bounds()); err != nil {
			return nil, bad("pool", "%v", err)
		}
	}
	return p, nil
}

// Close stops the processes the provider keeps warm, children or not (a
// child of one then fails as at any exit of its process), and returns once
// they are reaped; the provider then refuses to start children in a warm
// process. A provider without a pool has nothing to stop.
func (p *Provider) Close() error {
	if p.pool == nil {
		return nil
	}
	return p.pool.Close()
}

// Pool returns the pool the provider runs with, its defaults filled in
// (Size 0: a process per child).
func (p *Provider) Pool() childproc.Pool { return p.bounds }

// providerKind is the provider kind, as errors name it.
const providerKind = "acp"

// DefaultSelfPool is the pool of a dsh child (`command: self`) whose
// provider has no `pool:` block: one process, kept
// childproc.DefaultPoolIdle after its last child. A warm `dsh acp` takes a
// child in about a millisecond instead of 9–15 and holds about
// 27 MiB meanwhile (BENCHMARKS §8).
func DefaultSelfPool() *childproc.Pool { return &childproc.Pool{Size: new(1)} }

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: for a dsh child (Config.Dsh)
// the persona, tool filter, output schema and depth cap, which it applies
// as an in-process child does; none for another agent, which cannot be
// made to honour them.
func (p *Provider) Capabilities() subagent.Capabilities {
	if !p.cfg.Dsh {
		return subagent.Capabilities{}
	}
	return subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
}

// InheritsParentContext implements subagent.Provider: false.
func (p *Provider) InheritsParentContext() bool { return false }

// Start spawns the agent, performs initialize and session/new, and only then
// returns the run; the prompt is sent once it is ready.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	return p.start(ctx, req, "")
}

// ResumeRun implements subagent.RemoteContinuer: a new process of the agent
// loads the conversation remote (session/load) and takes req.Prompt as its
// next prompt. An agent that does not advertise loadSession cannot continue
// it (NOT_RESUMABLE).
func (p *Provider) ResumeRun(ctx context.Context, req subagent.StartRequest, remote string) (subagent.Run, error) {
	return p.start(ctx, req, acpsdk.SessionId(remote))
}

// start starts a run in a new session, or in the loaded session remote.
func (p *Provider) start(ctx context.Context, req subagent.StartRequest, remote acpsdk.SessionId) (subagent.Run, error) {
	cwd, err := p.cfg.Begin(ctx, providerKind, req)
	if err != nil {
		return nil, err
	}
	if p.cfg.Dsh && req.Parent.Tools().Restricted() {
		// The filter the child applies is the request's alone: its own
		// tools cannot be narrowed to a restricted parent's.
		return nil, &subagent.Error{Code: subagent.CodeUnsupportedCapability, Provider: p.cfg.Name, Capability: subagent.CapToolFilter,
			Msg: fmt.Sprintf("this agent's tools are restricted, and provider %q cannot restrict a child process to them: "+
				"a child sees no more than its parent", p.cfg.Name)}
	}
	depth := req.Depth
	if depth > p.cfg.MaxDepth {
		return nil, &subagent.Error{Code: subagent.CodeDepthExceeded, Provider: p.cfg.Name, Attempted: depth, Max: p.cfg.MaxDepth,
			Msg: fmt.Sprintf("provider %q: subagent depth %d exceeds its maxDepth %d", p.cfg.Name, depth, p.cfg.MaxDepth)}
	}
	var extra []string
	if p.cfg.DepthEnv != "" {
		extra = append(extra, fmt.Sprintf("%s=%d", p.cfg.DepthEnv, depth))
	}
	lease, err := p.process(ctx, cwd, extra)
	if err != nil {
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, err
	}
	a := lease.Process
	r := &run{cfg: p.cfg, id: "acp-" + uuid.NewString(), agent: a, lease: lease, proc: a.proc, conn: a.conn, progress: req.Progress,
		parent: req.Parent, label: subagent.ChildLabel(p.cfg.Name, req.Label), trace: telemetry.Carrier(ctx), req: req}
	r.client = &client{run: r}
	r.slots = &slots{live: req.LiveSlots}
	if err := r.handshake(ctx, cwd, depth, remote, req.Descriptor); err != nil {
		a.detach(r)
		r.slots.close()
		// A refusal the agent answered leaves a shared process in service;
		// a lost connection or no answer in time retires it.
		var re *acpsdk.RequestError
		lease.Release(!errors.As(err, &re) || !a.healthy())
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		if se := (*subagent.Error)(nil); errors.As(err, &se) {
			return nil, err
		}
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "handshake", Err: err,
			Diagnostic: subagent.Diagnostic(a.proc.Diagnostic())}
	}
	r.start(ctx, req.Prompt)
	return r, nil
}

// process returns the agent process a child runs on: a warm one of the
// same launch identity (the working directory and the variables given at
// spawn; the command, arguments and env are the provider's) from the pool,
// else a new one.
func (p *Provider) process(ctx context.Context, cwd string, extra []string) (*warm.Lease[*agentProc], error) {
	if p.pool == nil {
		a, err := p.startProcess(ctx, cwd, extra)
		if err != nil {
			return nil, err
		}
		return &warm.Lease[*agentProc]{Process: a}, nil
	}
	key := strings.Join(append([]string{cwd}, extra...), "\x00")
	lease, err := p.pool.Acquire(ctx, key, func(ctx context.Context) (*agentProc, error) {
		return p.startProcess(ctx, cwd, extra)
	})
	if errors.Is(err, warm.ErrClosed) {
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "spawn", Err: err}
	}
	return lease, err
}

// handshake performs initialize and session/new (or session/load of
// remote) within ReadyTimeout. The session's `_meta` tells a dsh child its
// lineage, the parent's policy, the tree's remaining token budget, the
// tree's live-children cap (the child asks for a place under it before
// each start: acpmeta.MethodAdmit) and the descriptor to record (other
// agents ignore it).
func (r *run) handshake(ctx context.Context, cwd string, depth int, remote acpsdk.SessionId, desc *subagent.Descriptor) error {
	policy := r.parent.Policy()
	meta := acpmeta.Session{ParentSession: r.parent.ID(), Depth: depth, Policy: &policy,
		Persona: r.req.Persona, ToolFilter: r.req.ToolFilter, MaxDepth: r.req.MaxDepth}
	if r.req.OutputSchema != nil {
		meta.OutputSchema, _ = json.Marshal(r.req.OutputSchema)
	}
	if desc != nil {
		meta.Descriptor, _ = json.Marshal(desc)
	}
	if r.slots.live != nil {
		meta.Admits, meta.MaxLiveChildren = true, r.slots.live.Max()
	}
	if used, budget := r.parent.TokensUsed(); budget > 0 {
		meta.TokenBudget = max(budget-used, 1)
	}
	hctx, cancel := context.WithTimeoutCause(ctx, r.cfg.ReadyTimeout,
		&childproc.ReadyTimeoutError{After: r.cfg.ReadyTimeout, Waiting: "answer to the handshake"})
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		if remote != "" {
			errc <- r.load(hctx, r.agent.init, cwd, remote, meta)
			return
		}
		resp, err := r.conn.NewSession(hctx, acpsdk.NewSessionRequest{Cwd: cwd, McpServers: []acpsdk.McpServer{},
			Meta: telemetry.SetMeta(acpmeta.Set(nil, meta), r.trace)})
		if err != nil {
			errc <- fmt.Errorf("session/new: %w", err)
			return
		}
		r.session = resp.SessionId
		errc <- r.agent.attach(r)
	}()
	var err error
	select {
	case err = <-errc:
		return err
	case <-hctx.Done():
		err = context.Cause(hctx)
	case <-r.proc.Done():
		err = &childproc.ExitError{Program: "the agent", During: "the handshake", Diagnostic: r.proc.Diagnostic()}
	}
	cancel()
	<-errc // the request ends with hctx: the run is left to its caller alone
	return err
}

// load continues the agent's session remote: session/load, whose replay
// of the conversation is not this run's output.
func (r *run) load(ctx context.Context, init acpsdk.InitializeResponse, cwd string, remote acpsdk.SessionId, meta acpmeta.Session) error {
	if !init.AgentCapabilities.LoadSession {
		return subagent.NotResumable(r.cfg.Name, "the agent does not advertise loadSession, so it cannot load its earlier session")
	}
	meta.Descriptor = nil // recorded when the session was created
	r.session = remote
	if err := r.agent.attach(r); err != nil {
		return err
	}
	r.client.replay(true)
	defer r.client.replay(false)
	if _, err := r.conn.LoadSession(ctx, acpsdk.LoadSessionRequest{SessionId: remote, Cwd: cwd, McpServers: []acpsdk.McpServer{},
		Meta: acpmeta.Set(nil, meta)}); err != nil {
		return fmt.Errorf("session/load %s: %w", remote, err)
	}
	return nil
}

// RemoteSession implements subagent.RemoteRun: the agent's session id.
func (r *run) RemoteSession() string { return string(r.session) }

// run is one ACP child.
type run struct {
	cfg      Config
	id       string
	agent    *agentProc // the process of the run's session
	lease    *warm.Lease[*agentProc]
	proc     *childproc.Process
	conn     *acpsdk.ClientSideConnection
	client   *client
	slots    *slots // places the child holds for its own children
	session  acpsdk.SessionId
	progress func(subagent.Progress)
	parent   *agent.Agent
	label    string            // names the child in permission asks
	trace    map[string]string // the run span's W3C trace context, sent in `_meta`; nil: none
	req      subagent.StartRequest

	subagent.Settlement
	cancelled   chan struct{} // closed when the run is cancelled
	cancelOnce  sync.Once
	stopParent  func() bool
	broken      atomic.Bool // the agent did not answer the cancellation in time: its process serves no more children
	disposeOnce sync.Once
	disposeErr  error
}

// start sends the prompt and settles the run when it is answered, the
// agent dies, or a cancellation is not answered in time.
func (r *run) start(ctx context.Context, prompt []content.Block) {
	r.cancelled = make(chan struct{})
	r.stopParent = context.AfterFunc(ctx, r.cancel)
	go r.drive(prompt)
}

func (r *run) cancel() {
	r.cancelOnce.Do(func() {
		close(r.cancelled)
		r.client.markCancelled()
		r.conn.Cancel(context.Background(), acpsdk.CancelNotification{SessionId: r.session})
	})
}

func (r *run) isCancelled() bool {
	select {
	case <-r.cancelled:
		return true
	default:
		return false
	}
}

type promptResult struct {
	resp acpsdk.PromptResponse
	err  error
}

func (r *run) drive(prompt []content.Block) {
	defer r.stopParent()
	var blocks []acpsdk.ContentBlock
	for _, b := range prompt {
		if b.Type == content.TypeText {
			blocks = append(blocks, acpsdk.TextBlock(b.Text))
		}
	}
	pctx, stopPrompt := context.WithCancel(context.Background())
	defer stopPrompt()
	answered := make(chan promptResult, 1)
	go func() {
		resp, err := r.conn.Prompt(pctx, acpsdk.PromptRequest{SessionId: r.session, Prompt: blocks, Meta: telemetry.SetMeta(nil, r.trace)})
		answered <- promptResult{resp, err}
	}()
	var res promptResult
	select {
	case res = <-answered:
	case <-r.proc.Done():
		select { // the answer may have arrived just before the exit
		case res = <-answered:
		case <-time.After(100 * time.Millisecond):
			stopPrompt()
			res = <-answered
			res.err = fmt.Errorf("%s exited during the turn: %s", r.processName(), r.proc.Diagnostic())
		}
	case <-r.cancelled:
		timer := time.NewTimer(r.cfg.CancelGrace)
		select {
		case res = <-answered:
		case <-timer.C:
			r.broken.Store(true)
			stopPrompt()
			<-answered
			res = promptResult{resp: acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}}
		case <-r.proc.Done():
			stopPrompt()
			<-answered
			res = promptResult{resp: acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}}
		}
		timer.Stop()
	}
	r.Settle(r.outcome(res))
}

func (r *run) outcome(res promptResult) subagent.Result {
	out := subagent.Result{Output: r.client.output(), Usage: r.usage(res.resp)}
	switch {
	case r.isCancelled():
		out.StopReason = subagent.Aborted
	case res.err != nil:
		// A lost connection usually means the agent died: give its exit a
		// moment to be reaped so the diagnostic names it.
		out.StopReason = subagent.Failed
		select {
		case <-r.proc.Done():
			out.Diagnostic = subagent.Diagnostic(fmt.Sprintf("%s exited during the turn (%v): %s", r.processName(), res.err, r.proc.Diagnostic()))
		case <-time.After(time.Second):
			out.Diagnostic = subagent.Diagnostic(fmt.Sprintf("%v; %s", res.err, r.proc.Diagnostic()))
		}
	default:
		switch res.resp.StopReason {
		case acpsdk.StopReasonEndTurn:
			out.StopReason = subagent.Completed
			if r.req.OutputSchema == nil {
				break
			}
			var m acpmeta.Prompt
			if acpmeta.Get(res.resp.Meta, &m) && len(m.Structured) > 0 && json.Unmarshal(m.Structured, &out.Structured) == nil {
				break
			}
			out.StopReason, out.Diagnostic = subagent.Failed, "the child finished without calling structured_output"
		case acpsdk.StopReasonMaxTokens:
			out.StopReason = subagent.MaxTokens
		case acpsdk.StopReasonRefusal:
			out.StopReason = subagent.Refusal
		case acpsdk.StopReasonCancelled:
			out.StopReason = subagent.Aborted
		default:
			out.StopReason = subagent.Failed
			out.Diagnostic = subagent.Diagnostic(fmt.Sprintf("the agent stopped with %q", res.resp.StopReason))
		}
	}
	return out
}

// usage reads a turn's usage from the agent's answer: per model from a
// dsh child's `_meta`, else ACP's usage under "acp/<provider>".
func (r *run) usage(resp acpsdk.PromptResponse) map[string]content.Usage {
	var m acpmeta.Prompt
	if acpmeta.Get(resp.Meta, &m) && len(m.Usage) > 0 {
		return m.Usage
	}
	u := resp.Usage
	if u == nil {
		return nil
	}
	var cached int64
	if u.CachedReadTokens != nil {
		cached = int64(*u.CachedReadTokens)
	}
	cu := content.Usage{Input: max(int64(u.InputTokens)-cached, 0), CacheRead: cached, Output: int64(u.OutputTokens)}
	if u.ThoughtTokens != nil {
		cu.Reasoning = int64(*u.ThoughtTokens)
	}
	return subagent.AddUsage(nil, "acp/"+r.cfg.Name, cu)
}

// InterruptDescendant implements subagent.DescendantInterrupter: it asks
// the child's process to interrupt target, a descendant of the child's
// session resident there (acpmeta.MethodInterrupt). An agent that is not
// dsh does not know the method, and has no such descendant to stop.
func (r *run) InterruptDescendant(ctx context.Context, target string) error {
	_, err := r.conn.CallExtension(ctx, acpmeta.MethodInterrupt, acpmeta.Interrupt{SessionID: string(r.session), Target: target})
	var re *acpsdk.RequestError
	if errors.As(err, &re) && re.Code == -32601 { // method not found
		return nil
	}
	return err
}

// ID implements subagent.Run: minted in the parent's namespace.
func (r *run) ID() string { return r.id }

// LocalAgent implements subagent.Run: nil, the child is remote.
func (r *run) LocalAgent() *agent.Agent { return nil }

// processName names the run's process in a failure: a shared process
// fails every child it serves.
func (r *run) processName() string {
	if r.lease.Pooled {
		return "the agent's process (kept warm for several children, all of which its exit fails)"
	}
	return "the agent"
}

// Dispose implements subagent.Run: it cancels the prompt and waits for the
// run to settle. A process of its own is stopped (stdin EOF, SIGTERM,
// SIGKILL to its whole process group) and Dispose returns once it is
// reaped; a warm process is told to close the session (session/close,
// when the agent advertises it; else the session is only dropped) and
// stays for the next child, unless the run found it broken.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		childproc.Settle(r.Done(), r.cancel)
		if !r.lease.Pooled {
			r.disposeErr = r.lease.Release(false)
			return
		}
		broken := r.broken.Load() || r.closeSession() != nil
		r.agent.detach(r)
		r.slots.close()
		r.lease.Release(broken)
	})
	return r.disposeErr
}

// closeSession tells the agent that the run's session is over, within the
// cancel grace; an error means the process did not answer as it should.
func (r *run) closeSession() error {
	if !r.agent.healthy() {
		return errors.New("the agent's process has ended")
	}
	if !r.agent.closes() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.CancelGrace)
	defer cancel()
	_, err := r.conn.CloseSession(ctx, acpsdk.CloseSessionRequest{SessionId: r.session})
	var re *acpsdk.RequestError
	if errors.As(err, &re) && r.agent.healthy() && ctx.Err() == nil {
		return nil // answered: an unknown session is a closed one
	}
	return err
}
