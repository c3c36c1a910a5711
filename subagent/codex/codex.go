// Package codex is the subagent provider that runs the official OpenAI Codex
// program as a one-shot child: it spawns `codex app-server`, speaks its
// JSON-RPC dialect over stdio (initialize, initialized, an ephemeral
// thread/start, one turn/start), answers Codex's approval requests
// unattended, and returns the turn's final answer.
package codex

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/subagent"
)

// Permission modes (Config.PermissionMode).
const (
	// PermissionNever runs the thread with approvalPolicy "never" and
	// declines any approval request (the default).
	PermissionNever = "never"
	// PermissionApproveForMe runs the thread with approvalPolicy
	// "on-request", approvalsReviewer "auto_review" and sandbox
	// "workspace-write", and accepts approval requests.
	PermissionApproveForMe = "approve-for-me"
	// PermissionBypass runs the thread with approvalPolicy "never" and
	// sandbox "danger-full-access", and accepts approval requests.
	PermissionBypass = "dangerously-bypass-approvals-and-sandbox"
)

// Config configures a Codex provider.
type Config struct {
	Name    string   `yaml:"name"`    // registry name (default "codex")
	Command string   `yaml:"command"` // the codex program (default "codex", looked up in PATH)
	Args    []string `yaml:"args"`    // its arguments (default ["app-server"])
	Cwd     string   `yaml:"cwd"`     // working directory override (default: the parent's)
	Model   string   `yaml:"model"`   // thread model (default: Codex's configured one)
	// CodexHome is the CODEX_HOME of every run, used as is: Codex keeps
	// its threads there, so that a continuable child continues its thread
	// (thread/resume). Empty means a fresh temporary directory per run,
	// removed when the run is disposed, and threads that cannot continue.
	CodexHome string            `yaml:"codexHome"`
	Env       map[string]string `yaml:"env"`     // explicit variables, layered on the scrubbed environment
	PassEnv   []string          `yaml:"passEnv"` // parent variables kept despite scrubbing (e.g. OPENAI_API_KEY)
	// PermissionMode is never (default), approve-for-me or
	// dangerously-bypass-approvals-and-sandbox.
	PermissionMode string `yaml:"permissionMode"`
	// Config holds Codex config overrides sent with thread/start.
	Config map[string]any `yaml:"config"`
	// ChildTimeouts: ReadyTimeout bounds the handshake; CancelGrace is how
	// long an interrupted turn may take to end.
	subagent.ChildTimeouts `yaml:",inline"`
}

// Provider runs Codex app-server children. It holds no state across runs.
type Provider struct {
	cfg     Config
	maxLine int
}

// New validates cfg, applies its defaults and returns a provider.
func New(cfg Config) (*Provider, error) {
	cfg.Name = cmp.Or(cfg.Name, "codex")
	cfg.Command = cmp.Or(cfg.Command, "codex")
	if cfg.Args == nil {
		cfg.Args = []string{"app-server"}
	}
	cfg.PermissionMode = cmp.Or(cfg.PermissionMode, PermissionNever)
	cfg.ChildTimeouts = cfg.ChildTimeouts.WithDefaults()
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Kind: "codex", Provider: cfg.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch cfg.PermissionMode {
	case PermissionNever, PermissionApproveForMe, PermissionBypass:
	default:
		return nil, bad("permissionMode", "must be %q, %q or %q, got %q", PermissionNever, PermissionApproveForMe, PermissionBypass, cfg.PermissionMode)
	}
	if key, d := cfg.Negative(); key != "" {
		return nil, bad(key, "must be positive, got %s", d)
	}
	for k := range cfg.Env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return nil, bad("env", "bad variable name %q", k)
		case k == "CODEX_HOME":
			return nil, bad("env", "set codexHome instead of CODEX_HOME")
		}
	}
	if cfg.Config != nil {
		if _, err := json.Marshal(cfg.Config); err != nil {
			return nil, bad("config", "not representable as JSON: %v", err)
		}
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
	if cfg.CodexHome != "" {
		abs, err := filepath.Abs(cfg.CodexHome)
		if err != nil {
			return nil, bad("codexHome", "%v", err)
		}
		cfg.CodexHome = abs
	}
	return &Provider{cfg: cfg, maxLine: MaxLine}, nil
}

// checkDir requires dir to be an absolute path to an existing directory.
func checkDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("directory %q is not absolute", dir)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%q is not an existing directory", dir)
	}
	return nil
}

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: none — Codex cannot be made to
// honour them.
func (p *Provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// InheritsParentContext implements subagent.Provider: false, the child
// starts a fresh thread.
func (p *Provider) InheritsParentContext() bool { return false }
