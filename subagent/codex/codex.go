// Package codex is the subagent provider that runs the official OpenAI Codex
// program as a one-shot child: it spawns `codex app-server`, speaks its
// JSON-RPC dialect over stdio (initialize, initialized, an ephemeral
// thread/start, one turn/start), answers Codex's approval requests by the
// parent's permission policy, and returns the turn's final answer.
package codex

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/internal/warm"
)

// Permission modes (Config.PermissionMode).
const (
	// PermissionPolicy (the default) runs the thread with approvalPolicy
	// "untrusted" and sandbox "workspace-write": Codex asks before any
	// command outside its set of known read-only ones, and each request is
	// decided by the parent's permission policy (deny declines, ask goes to
	// the person behind the delegation tree, allow accepts).
	PermissionPolicy = "policy"
	// PermissionNever runs the thread with approvalPolicy "never": Codex
	// asks nothing, so the parent's policy never sees its commands, and any
	// approval request is declined.
	PermissionNever = "never"
	// PermissionApproveForMe runs the thread with approvalPolicy
	// "on-request", approvalsReviewer "auto_review" and sandbox
	// "workspace-write", and accepts approval requests.
	PermissionApproveForMe = "approve-for-me"
	// PermissionBypass runs the thread with approvalPolicy "never" and
	// sandbox "danger-full-access", and accepts approval requests.
	PermissionBypass = "dangerously-bypass-approvals-and-sandbox"
)

// Config configures a Codex provider. Its Options are the kit's shared
// block: name (default "codex"), command (default "codex", looked up in
// PATH), args (default ["app-server"]), cwd, env, passEnv (e.g.
// OPENAI_API_KEY) and the timeouts (ReadyTimeout bounds the handshake;
// CancelGrace how long an interrupted turn may take to end).
type Config struct {
	childproc.Options `yaml:",inline"`
	Model             string `yaml:"model"` // thread model (default: Codex's configured one)
	// CodexHome is the CODEX_HOME of every run, used as is: Codex keeps
	// its threads there, so that a continuable child continues its thread
	// (thread/resume). Empty means a fresh temporary directory per run,
	// removed when the run is disposed, and threads that cannot continue.
	CodexHome string `yaml:"codexHome"`
	// PermissionMode is policy (default), never, approve-for-me or
	// dangerously-bypass-approvals-and-sandbox.
	PermissionMode string `yaml:"permissionMode"`
	// Config holds Codex config overrides sent with thread/start.
	Config map[string]any `yaml:"config"`
	// Pool keeps `codex app-server` processes warm between children: each
	// child is then a thread/start on a running process, ended with
	// thread/unsubscribe at its disposal (see childproc.Pool). Nil: a
	// process per child.
	Pool *childproc.Pool `yaml:"pool"`
}

// Provider runs Codex app-server children. Close it: it stops the
// processes it keeps warm.
type Provider struct {
	cfg     Config
	maxLine int
	pool    *warm.Pool[*codexProc] // nil: a process per child
}

// New validates cfg, applies its defaults and returns a provider.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Options.Check(providerKind, "codex", "codex", map[string]string{"CODEX_HOME": "codexHome"}); err != nil {
		return nil, err
	}
	if cfg.Args == nil {
		cfg.Args = []string{"app-server"}
	}
	cfg.PermissionMode = cmp.Or(cfg.PermissionMode, PermissionPolicy)
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Kind: providerKind, Provider: cfg.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch cfg.PermissionMode {
	case PermissionPolicy, PermissionNever, PermissionApproveForMe, PermissionBypass:
	default:
		return nil, bad("permissionMode", "must be %q, %q, %q or %q, got %q", PermissionPolicy, PermissionNever, PermissionApproveForMe, PermissionBypass, cfg.PermissionMode)
	}
	if cfg.Config != nil {
		if _, err := json.Marshal(cfg.Config); err != nil {
			return nil, bad("config", "not representable as JSON: %v", err)
		}
	}
	if cfg.CodexHome != "" {
		abs, err := filepath.Abs(cfg.CodexHome)
		if err != nil {
			return nil, bad("codexHome", "%v", err)
		}
		cfg.CodexHome = abs
	}
	p := &Provider{cfg: cfg, maxLine: MaxLine}
	pc, err := cfg.Pool.Resolve(providerKind, cfg.Name, nil)
	if err != nil {
		return nil, err
	}
	if pc.On() {
		if p.pool, err = warm.New[*codexProc](pc.Bounds()); err != nil {
			return nil, bad("pool", "%v", err)
		}
	}
	return p, nil
}

// Close stops the processes the provider keeps warm, children or not (a
// child of one then fails as at any exit), and returns once they are
// reaped; the provider then refuses to start children in a warm process.
// A provider without a pool has nothing to stop.
func (p *Provider) Close() error {
	if p.pool == nil {
		return nil
	}
	return p.pool.Close()
}

// kind is the provider kind, as errors name it.
const providerKind = "codex"

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: none — Codex cannot be made to
// honour them.
func (p *Provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// InheritsParentContext implements subagent.Provider: false, the child
// starts a fresh thread.
func (p *Provider) InheritsParentContext() bool { return false }
