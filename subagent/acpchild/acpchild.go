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
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
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
}

// Provider runs ACP agents as children.
type Provider struct{ cfg Config }

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
	return &Provider{cfg: cfg}, nil
}

// providerKind is the provider kind, as errors name it.
const providerKind = "acp"

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
	child, err := p.cfg.Spawn(cwd, p.cfg.Args, extra...)
	if err != nil {
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "spawn", Err: err}
	}
	r := &run{cfg: p.cfg, id: "acp-" + uuid.NewString(), proc: child, progress: req.Progress,
		parent: req.Parent, label: subagent.ChildLabel(p.cfg.Name, req.Label), trace: telemetry.Carrier(ctx), req: req}
	r.client = &client{run: r}
	r.slots = &slots{live: req.LiveSlots}
	go func() { <-child.Done(); r.slots.close() }()
	r.conn = acpsdk.NewClientSideConnection(r.client, child.Stdin(), child.Stdout())
	// No SetLogger: in acp-go-sdk v0.13.0 it races with the connection's
	// receive goroutine, which starts in the constructor; the connection
	// logs through slog.Default.
	if err := r.handshake(ctx, cwd, depth, remote, req.Descriptor); err != nil {
		child.Stop(0, p.cfg.TermGrace)
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		if se := (*subagent.Error)(nil); errors.As(err, &se) {
			return nil, err
		}
		return nil, &childproc.StartError{Kind: providerKind, Provider: p.cfg.Name, Stage: "handshake", Err: err,
			Diagnostic: subagent.Diagnostic(child.Diagnostic())}
	}
	r.start(ctx, req.Prompt)
	return r, nil
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
		init, err := r.conn.Initialize(hctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber,
			ClientCapabilities: acpsdk.ClientCapabilities{}, ClientInfo: &acpsdk.Implementation{Name: "dsh", Version: "0"}})
		if err != nil {
			errc <- fmt.Errorf("initialize: %w", err)
			return
		}
		if remote != "" {
			errc <- r.load(hctx, init, cwd, remote, meta)
			return
		}
		resp, err := r.conn.NewSession(hctx, acpsdk.NewSessionRequest{Cwd: cwd, McpServers: []acpsdk.McpServer{},
			Meta: telemetry.SetMeta(acpmeta.Set(nil, meta), r.trace)})
		if err != nil {
			errc <- fmt.Errorf("session/new: %w", err)
			return
		}
		r.session = resp.SessionId
		errc <- nil
	}()
	select {
	case err := <-errc:
		return err
	case <-hctx.Done():
		return context.Cause(hctx)
	case <-r.proc.Done():
		return &childproc.ExitError{Program: "the agent", During: "the handshake", Diagnostic: r.proc.Diagnostic()}
	}
}

// load continues the agent's session remote: session/load, whose replay
// of the conversation is not this run's output.
func (r *run) load(ctx context.Context, init acpsdk.InitializeResponse, cwd string, remote acpsdk.SessionId, meta acpmeta.Session) error {
	if !init.AgentCapabilities.LoadSession {
		return subagent.NotResumable(r.cfg.Name, "the agent does not advertise loadSession, so it cannot load its earlier session")
	}
	meta.Descriptor = nil // recorded when the session was created
	r.client.replay(true)
	defer r.client.replay(false)
	if _, err := r.conn.LoadSession(ctx, acpsdk.LoadSessionRequest{SessionId: remote, Cwd: cwd, McpServers: []acpsdk.McpServer{},
		Meta: acpmeta.Set(nil, meta)}); err != nil {
		return fmt.Errorf("session/load %s: %w", remote, err)
	}
	r.session = remote
	return nil
}

// RemoteSession implements subagent.RemoteRun: the agent's session id.
func (r *run) RemoteSession() string { return string(r.session) }

// run is one ACP child.
type run struct {
	cfg      Config
	id       string
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
			res.err = fmt.Errorf("the agent exited during the turn: %s", r.proc.Diagnostic())
		}
	case <-r.cancelled:
		timer := time.NewTimer(r.cfg.CancelGrace)
		select {
		case res = <-answered:
		case <-timer.C:
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
		select {
		case <-r.proc.Done():
		case <-time.After(time.Second):
		}
		out.StopReason = subagent.Failed
		out.Diagnostic = subagent.Diagnostic(fmt.Sprintf("%v; %s", res.err, r.proc.Diagnostic()))
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

// Dispose implements subagent.Run: it cancels the prompt, waits for the run
// to settle, and stops the process (stdin EOF, SIGTERM, SIGKILL to its whole
// process group), returning once it is reaped.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		childproc.Settle(r.Done(), r.cancel)
		r.disposeErr = r.proc.Stop(r.cfg.EOFGrace, r.cfg.TermGrace)
	})
	return r.disposeErr
}
