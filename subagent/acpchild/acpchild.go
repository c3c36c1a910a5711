// Package acpchild is the subagent provider that runs any Agent Client
// Protocol agent as a child process — including another dsh (`dsh acp`):
// it spawns the configured command, performs the ACP handshake, sends the
// task as one prompt and collects the agent's message text as the output.
package acpchild

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/subagent"
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

// Config configures an ACP provider.
type Config struct {
	Name    string            `yaml:"name"`    // registry name (default "acp")
	Command string            `yaml:"command"` // the agent program (required)
	Args    []string          `yaml:"args"`
	Cwd     string            `yaml:"cwd"`     // working directory override (default: the parent's)
	Env     map[string]string `yaml:"env"`     // explicit variables, layered on the scrubbed environment
	PassEnv []string          `yaml:"passEnv"` // parent variables kept despite scrubbing (e.g. a model key)
	// Permission is policy (default) or reject.
	Permission string `yaml:"permission"`
	// MaxDepth is the deepest delegation depth this provider starts a
	// child at (default 4): ACP cannot carry a depth cap to the child, so
	// the provider enforces one itself against runaway recursion.
	MaxDepth int `yaml:"maxDepth"`
	// DepthEnv, when set, names a variable that tells the child its depth
	// (dsh children read DSH_DEPTH).
	DepthEnv string `yaml:"depthEnv"`
	// ChildTimeouts: ReadyTimeout bounds the handshake; CancelGrace is how
	// long a cancelled prompt may take to answer.
	subagent.ChildTimeouts `yaml:",inline"`
}

// Provider runs ACP agents as children.
type Provider struct{ cfg Config }

// New validates cfg and returns a provider.
func New(cfg Config) (*Provider, error) {
	cfg.Name = cmp.Or(cfg.Name, "acp")
	cfg.Permission = cmp.Or(cfg.Permission, PermissionPolicy)
	cfg.ChildTimeouts = cfg.ChildTimeouts.WithDefaults()
	cfg.MaxDepth = cmp.Or(cfg.MaxDepth, 4)
	bad := func(field, format string, args ...any) error {
		return &subagent.ConfigError{Kind: "acp", Provider: cfg.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	key, d := cfg.Negative()
	switch {
	case cfg.Command == "":
		return nil, bad("command", "is required")
	case cfg.Permission != PermissionReject && cfg.Permission != PermissionPolicy:
		return nil, bad("permission", "must be %q (the parent's permission policy decides) or %q, got %q", PermissionPolicy, PermissionReject, cfg.Permission)
	case key != "":
		return nil, bad(key, "must be positive, got %s", d)
	case cfg.MaxDepth < 0:
		return nil, bad("maxDepth", "must not be negative, got %d", cfg.MaxDepth)
	}
	if cfg.Cwd != "" {
		abs, err := filepath.Abs(cfg.Cwd)
		if err != nil {
			return nil, bad("cwd", "%v", err)
		}
		if err := checkDir(abs); err != nil {
			return nil, bad("cwd", "%v", err)
		}
		cfg.Cwd = abs
	}
	return &Provider{cfg: cfg}, nil
}

func checkDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("working directory %q is not absolute", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("working directory %q is not an existing directory", dir)
	}
	return nil
}

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: none — a remote process cannot
// be made to honour them.
func (p *Provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// InheritsParentContext implements subagent.Provider: false.
func (p *Provider) InheritsParentContext() bool { return false }

// Start spawns the agent, performs initialize and session/new, and only then
// returns the run; the prompt is sent once it is ready.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	if req.Parent == nil {
		return nil, errors.New("acp: the request has no parent agent")
	}
	if err := ctx.Err(); err != nil {
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	depth := cmp.Or(req.Depth, req.Parent.Depth()+1)
	if depth > p.cfg.MaxDepth {
		return nil, &subagent.Error{Code: subagent.CodeDepthExceeded, Provider: p.cfg.Name, Attempted: depth, Max: p.cfg.MaxDepth,
			Msg: fmt.Sprintf("provider %q: subagent depth %d exceeds its maxDepth %d", p.cfg.Name, depth, p.cfg.MaxDepth)}
	}
	cwd := cmp.Or(p.cfg.Cwd, req.Parent.Cwd())
	if err := checkDir(cwd); err != nil {
		return nil, fmt.Errorf("acp provider %s: %w", p.cfg.Name, err)
	}
	env := make([]string, 0, len(p.cfg.Env))
	for k, v := range p.cfg.Env {
		env = append(env, k+"="+v)
	}
	if p.cfg.DepthEnv != "" {
		env = append(env, fmt.Sprintf("%s=%d", p.cfg.DepthEnv, depth))
	}
	child, err := proc.Start(proc.Spec{Path: p.cfg.Command, Args: p.cfg.Args, Dir: cwd, PassEnv: p.cfg.PassEnv, Env: env})
	if err != nil {
		return nil, fmt.Errorf("acp provider %s: %w", p.cfg.Name, err)
	}
	r := &run{cfg: p.cfg, id: "acp-" + uuid.NewString(), proc: child, progress: req.Progress,
		parent: req.Parent, label: subagent.ChildLabel(p.cfg.Name, req.Label), trace: telemetry.Carrier(ctx)}
	r.client = &client{run: r}
	r.conn = acpsdk.NewClientSideConnection(r.client, child.Stdin(), child.Stdout())
	// No SetLogger: in acp-go-sdk v0.13.0 it races with the connection's
	// receive goroutine, which starts in the constructor; the connection
	// logs through slog.Default.
	if err := r.handshake(ctx, cwd, depth); err != nil {
		child.Stop(0, p.cfg.TermGrace)
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, fmt.Errorf("acp provider %s: %w", p.cfg.Name, err)
	}
	r.start(ctx, req.Prompt)
	return r, nil
}

// handshake performs initialize and session/new within ReadyTimeout. The
// session's `_meta` tells a dsh child its lineage, the parent's policy and
// the tree's remaining token budget (other agents ignore it).
func (r *run) handshake(ctx context.Context, cwd string, depth int) error {
	policy := r.parent.Policy()
	meta := acpmeta.Session{ParentSession: r.parent.ID(), Depth: depth, Policy: &policy}
	if used, budget := r.parent.TokensUsed(); budget > 0 {
		meta.TokenBudget = max(budget-used, 1)
	}
	hctx, cancel := context.WithTimeoutCause(ctx, r.cfg.ReadyTimeout, fmt.Errorf("no answer to the handshake within %s", r.cfg.ReadyTimeout))
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		if _, err := r.conn.Initialize(hctx, acpsdk.InitializeRequest{ProtocolVersion: acpsdk.ProtocolVersionNumber,
			ClientCapabilities: acpsdk.ClientCapabilities{}, ClientInfo: &acpsdk.Implementation{Name: "dsh", Version: "0"}}); err != nil {
			errc <- fmt.Errorf("initialize: %w", err)
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
		return fmt.Errorf("the agent exited during the handshake: %s", r.proc.Diagnostic())
	}
}

// run is one ACP child.
type run struct {
	cfg      Config
	id       string
	proc     *proc.Process
	conn     *acpsdk.ClientSideConnection
	client   *client
	session  acpsdk.SessionId
	progress func(subagent.Progress)
	parent   *agent.Agent
	label    string            // names the child in permission asks
	trace    map[string]string // the run span's W3C trace context, sent in `_meta`; nil: none

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

// ID implements subagent.Run: minted in the parent's namespace.
func (r *run) ID() string { return r.id }

// LocalAgent implements subagent.Run: nil, the child is remote.
func (r *run) LocalAgent() *agent.Agent { return nil }

// Dispose implements subagent.Run: it cancels the prompt, waits for the run
// to settle, and stops the process (stdin EOF, SIGTERM, SIGKILL to its whole
// process group), returning once it is reaped.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		select {
		case <-r.Done():
		default:
			r.cancel()
			<-r.Done()
		}
		r.disposeErr = r.proc.Stop(r.cfg.EOFGrace, r.cfg.TermGrace)
	})
	return r.disposeErr
}
