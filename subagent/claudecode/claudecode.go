// Package claudecode is the subagent provider that runs the official Claude
// Code CLI as a child, one process per turn:
//
//	claude -p --output-format stream-json --input-format stream-json --verbose
//	  --permission-mode <mode> --permission-prompt-tool stdio
//	  --no-session-persistence --disallowedTools AskUserQuestion,… [--model m]
//	  [--allowedTools …] [--max-turns n] [args…]
//
// With a configured ConfigDir, Claude Code keeps its sessions there (no
// --no-session-persistence) and a continuable child continues its session
// with --resume <session_id> (the id system/init names); without one, a
// child cannot continue (NOT_RESUMABLE).
//
// The task goes to stdin as one user message. Claude Code (2.1.332) says
// nothing before its first user message — not even system/init — so Start
// sends the prompt at once and treats the system/init message, which
// precedes the first model request, as readiness. Permission asks arrive as
// can_use_tool control requests and are answered per Config.Permission;
// cancellation sends an interrupt control request. The run succeeds only
// when the result message has subtype "success", is_error false and a
// non-blank result: an API failure (a 401, say) arrives as subtype
// "success" with is_error true. Once the result is in, stdin is closed and
// the CLI exits.
//
// Usage comes from the result's modelUsage (else its usage), keyed
// "claude-code/<model>". The run's cost in US dollars (total_cost_usd) is
// Result.CostUSD, and is also noted in the diagnostic of a failed run.
//
// Credentials: the child authenticates with an API key from its
// environment (pass ANTHROPIC_API_KEY through PassEnv or Env), as
// Anthropic's terms require for programmatic use; the provider never uses a
// consumer subscription login, and each run gets its own empty
// CLAUDE_CONFIG_DIR unless ConfigDir names one.
package claudecode

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
)

// Answers to can_use_tool permission requests (Config.Permission).
const (
	// PermissionPolicy (the default) decides by the parent's permission
	// policy, which may ask the person behind the delegation tree, naming
	// this child. Claude Code's tool names map onto dsh's (Bash → bash,
	// Write → write_file, Edit → edit_file, Read → read_file, …).
	PermissionPolicy = "policy"
	PermissionDeny   = "deny" // deny every request
)

// permissionModes lists the values Config.PermissionMode accepts: the
// CLI's --permission-mode choices ("default" is the SDK's name for
// "manual").
func permissionModes() []string {
	return []string{"acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "manual", "plan"}
}

// Config configures a Claude Code provider. Its Options are the kit's
// shared block: name (default "claude-code"), command (default "claude",
// looked up in PATH), args (extra arguments appended to the provider's own,
// e.g. "--bare", "--settings", "--append-system-prompt"), cwd, env, passEnv
// (e.g. ANTHROPIC_API_KEY) and the timeouts (ReadyTimeout bounds the wait
// for system/init; CancelGrace how long an interrupted run may take to send
// its result).
type Config struct {
	childproc.Options `yaml:",inline"`
	Model             string `yaml:"model"` // --model (default: the CLI's)
	// PermissionMode is the --permission-mode (default "dontAsk"). In
	// dontAsk mode the CLI denies what its rules do not allow by itself;
	// other modes send permission asks to Permission.
	PermissionMode string `yaml:"permissionMode"`
	// Permission answers can_use_tool requests: policy (default) or deny.
	Permission      string   `yaml:"permission"`
	AllowedTools    []string `yaml:"allowedTools"`    // --allowedTools
	DisallowedTools []string `yaml:"disallowedTools"` // --disallowedTools, on top of AskUserQuestion (and ExitPlanMode in plan mode)
	MaxTurns        int      `yaml:"maxTurns"`        // --max-turns (0: the CLI's default)
	// ConfigDir is the CLAUDE_CONFIG_DIR of every run, used as is; the
	// sessions kept there let continuable children continue. Empty means a
	// fresh temporary directory per run, removed when the run is disposed
	// (so authenticate through Env or PassEnv, e.g. ANTHROPIC_API_KEY), and
	// sessions that are not kept.
	ConfigDir string `yaml:"configDir"`
}

// Provider runs Claude Code children. It holds no state across runs.
type Provider struct {
	cfg     Config
	maxLine int
}

var _ subagent.Provider = (*Provider)(nil)

// New validates cfg, applies its defaults and returns a provider.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Options.Check(providerKind, "claude-code", "claude", map[string]string{"CLAUDE_CONFIG_DIR": "configDir"}); err != nil {
		return nil, err
	}
	cfg.PermissionMode = cmp.Or(cfg.PermissionMode, "dontAsk")
	cfg.Permission = cmp.Or(cfg.Permission, PermissionPolicy)
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Kind: providerKind, Provider: cfg.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case !slices.Contains(permissionModes(), cfg.PermissionMode):
		return nil, bad("permissionMode", "must be one of %s, got %q", strings.Join(permissionModes(), ", "), cfg.PermissionMode)
	case cfg.Permission != PermissionDeny && cfg.Permission != PermissionPolicy:
		return nil, bad("permission", "must be %q (the parent's permission policy decides) or %q, got %q", PermissionPolicy, PermissionDeny, cfg.Permission)
	case cfg.MaxTurns < 0:
		return nil, bad("maxTurns", "must not be negative, got %d", cfg.MaxTurns)
	}
	for _, tools := range []struct {
		field string
		list  []string
	}{{"allowedTools", cfg.AllowedTools}, {"disallowedTools", cfg.DisallowedTools}} {
		for _, t := range tools.list {
			if strings.TrimSpace(t) == "" || strings.Contains(t, ",") {
				return nil, bad(tools.field, "tool %q is blank or contains a comma", t)
			}
		}
	}
	if cfg.ConfigDir != "" {
		abs, err := filepath.Abs(cfg.ConfigDir)
		if err != nil {
			return nil, bad("configDir", "%v", err)
		}
		cfg.ConfigDir = abs
	}
	return &Provider{cfg: cfg, maxLine: MaxLine}, nil
}

// providerKind is the provider kind, as errors name it.
const providerKind = "claude-code"

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: none — the CLI cannot be made
// to honour them.
func (p *Provider) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }

// InheritsParentContext implements subagent.Provider: false, the child
// sees only its prompt.
func (p *Provider) InheritsParentContext() bool { return false }

// args is the command line of a run; resume names the session it
// continues, or is empty.
func (c Config) args(resume string) []string {
	a := []string{"-p", "--output-format", "stream-json", "--input-format", "stream-json", "--verbose",
		"--permission-mode", c.PermissionMode, "--permission-prompt-tool", "stdio"}
	if c.ConfigDir == "" {
		a = append(a, "--no-session-persistence")
	}
	if resume != "" {
		a = append(a, "--resume", resume)
	}
	if c.PermissionMode == "bypassPermissions" {
		a = append(a, "--allow-dangerously-skip-permissions")
	}
	if c.Model != "" {
		a = append(a, "--model", c.Model)
	}
	if len(c.AllowedTools) > 0 {
		a = append(a, "--allowedTools", strings.Join(c.AllowedTools, ","))
	}
	// Nobody can answer the user's questions, nor approve a plan.
	disallowed := append(slices.Clone(c.DisallowedTools), "AskUserQuestion")
	if c.PermissionMode == "plan" {
		disallowed = append(disallowed, "ExitPlanMode")
	}
	a = append(a, "--disallowedTools", strings.Join(disallowed, ","))
	if c.MaxTurns > 0 {
		a = append(a, "--max-turns", strconv.Itoa(c.MaxTurns))
	}
	return append(a, c.Args...)
}
