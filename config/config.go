// Package config reads dsh's YAML configuration file and turns it into a
// wired Runtime: model routes, built-in tools, subagent providers and tool
// instances, task tools, persona and session store.
package config

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/llm/openai"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/claudecode"
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool/builtin"
)

// Config is the content of a dsh configuration file.
type Config struct {
	// Agent is the default model route and limits of top-level agents.
	Agent agent.Options `yaml:"agent"`
	// Models are OpenAI-compatible endpoints, each a model route. A route
	// named "deepseek" is always present unless redefined.
	Models []Model `yaml:"models"`
	// Persona is the deployment:persona prompt section.
	Persona string `yaml:"persona"`
	// Tools configure the built-in tools.
	Tools Tools `yaml:"tools"`
	// Subagents declares the subagent providers and the tool instances
	// bound to them.
	Subagents *Subagents `yaml:"subagents"`
	// Tasks configure background tasks.
	Tasks Tasks `yaml:"tasks"`
	// ACP configures `dsh acp`.
	ACP ACP `yaml:"acp"`
	// SessionsDir holds the JSONL session files (default $DSH_HOME/sessions).
	SessionsDir string `yaml:"sessionsDir"`
}

// Model is one OpenAI-compatible chat-completions endpoint.
type Model struct {
	Name        string        `yaml:"name"`
	BaseURL     string        `yaml:"baseURL"`
	APIKeyEnv   string        `yaml:"apiKeyEnv"`
	Model       string        `yaml:"model"`
	MaxTokens   int           `yaml:"maxTokens"`
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	MaxRetries  int           `yaml:"maxRetries"`
}

// Tools configure the built-in tools.
type Tools struct {
	BashTimeout time.Duration `yaml:"bashTimeout"`
	OutputLimit int           `yaml:"outputLimit"`
}

// Tasks configure background tasks.
type Tasks struct {
	MaxPerOwner int `yaml:"maxPerOwner"`
	// MaxWakes bounds the consecutive turns completion notices may open.
	MaxWakes int `yaml:"maxWakes"`
}

// ACP configures dsh serving the Agent Client Protocol.
type ACP struct {
	// AskPermission names the tools whose calls need the client's approval
	// (default: bash, write_file, edit_file; an empty list asks for none).
	AskPermission *[]string `yaml:"askPermission"`
	// PermissionTimeout bounds the wait for the client's answer to a
	// permission request (default 5m); unanswered, the call is denied and
	// the turn goes on.
	PermissionTimeout time.Duration `yaml:"permissionTimeout"`
	// MaxSessions caps the sessions one connection holds (default 32).
	MaxSessions int `yaml:"maxSessions"`
}

// Subagents declares providers and the model-facing tools bound to them.
type Subagents struct {
	Providers []Provider            `yaml:"providers"`
	Tools     []subagenttool.Config `yaml:"tools"`
}

// Provider is one subagent provider. Its kind's block configures it; the
// provider's name overrides any name in the block.
type Provider struct {
	Name string `yaml:"name"`
	// Kind is spawn, fork, acp, codex or claude-code (default: the name).
	Kind string `yaml:"kind"`
	// ACP configures an acp provider: any ACP agent as a child process;
	// command "self" runs this dsh in acp mode.
	ACP *acpchild.Config `yaml:"acp"`
	// Codex configures a codex provider (`codex app-server`).
	Codex *codex.Config `yaml:"codex"`
	// ClaudeCode configures a claude-code provider (`claude -p`).
	ClaudeCode *claudecode.Config `yaml:"claudeCode"`
}

// Provider kinds.
const (
	KindSpawn      = "spawn"
	KindFork       = "fork"
	KindACP        = "acp"
	KindCodex      = "codex"
	KindClaudeCode = "claude-code"
)

// SelfCommand as an acp provider's command runs this dsh binary in acp mode.
const SelfCommand = "self"

// DefaultSubagents is the composition used when the file declares none:
// spawn and fork providers, exposed as the tools subagent and subagent_fork.
func DefaultSubagents() *Subagents {
	return &Subagents{
		Providers: []Provider{{Name: KindSpawn, Kind: KindSpawn}, {Name: KindFork, Kind: KindFork}},
		Tools:     []subagenttool.Config{{Provider: KindSpawn}, {Provider: KindFork, ToolName: "subagent_fork"}},
	}
}

// Default returns the configuration used when no file exists: DeepSeek's
// deepseek-chat through DEEPSEEK_API_KEY, and the default subagents.
func Default(getenv func(string) string) Config {
	ds := openai.DeepSeek()
	ds.BaseURL = cmp.Or(getenv("DEEPSEEK_BASE_URL"), ds.BaseURL, "https://api.deepseek.com")
	return Config{
		Agent:     agent.Options{Provider: ds.Provider, Model: ds.Model},
		Models:    []Model{{Name: ds.Provider, BaseURL: ds.BaseURL, APIKeyEnv: ds.APIKeyEnv, Model: ds.Model}},
		Subagents: DefaultSubagents(),
	}
}

// Home returns $DSH_HOME, defaulting to ~/.dsh.
func Home(getenv func(string) string) (string, error) {
	if h := getenv("DSH_HOME"); h != "" {
		return h, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("config: cannot find the home directory (set DSH_HOME): %w", err)
	}
	return filepath.Join(home, ".dsh"), nil
}

// Load reads the configuration file over the defaults. The file is path,
// else $DSH_CONFIG, else $DSH_HOME/dsh.yaml when it exists. Unknown keys
// and bad values are errors naming the key and its line.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg := Default(getenv)
	explicit := path != "" || getenv("DSH_CONFIG") != ""
	path = cmp.Or(path, getenv("DSH_CONFIG"))
	if path == "" {
		home, err := Home(getenv)
		if err != nil {
			return cfg, err
		}
		path = filepath.Join(home, "dsh.yaml")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data, getenv)
}

// Parse reads a configuration file's content over the defaults; name is
// used in error messages.
func Parse(name string, data []byte, getenv func(string) string) (Config, error) {
	cfg := Default(getenv)
	var file Config
	if err := yaml.NewDecoder(bytes.NewReader(data), yaml.Strict()).Decode(&file); err != nil {
		return cfg, fmt.Errorf("config %s: %s", name, withSourceLine(data, yaml.FormatError(err, false, false)))
	}
	cfg, verr := cfg.merge(file)
	if verr != nil {
		return cfg, fmt.Errorf("config %s: %w", name, locate(data, verr))
	}
	return cfg, nil
}

var position = regexp.MustCompile(`^\[(\d+):\d+\] `)

// withSourceLine appends the offending source line to a decoder message
// that starts with its [line:column] position, so the key is named.
func withSourceLine(data []byte, msg string) string {
	m := position.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(data), "\n")
	if n < 1 || n > len(lines) {
		return msg
	}
	return fmt.Sprintf("%s (at %q)", strings.TrimSpace(msg), strings.TrimSpace(lines[n-1]))
}

// fieldError is a bad value at a YAML path.
type fieldError struct {
	path string // e.g. $.subagents.tools[0].maxDepth
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

func bad(path, format string, args ...any) error {
	return &fieldError{path: path, msg: fmt.Sprintf(format, args...)}
}

// locate adds the line of a fieldError's key.
func locate(data []byte, err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return err
	}
	file, perr := parser.ParseBytes(data, 0)
	p, xerr := yaml.PathString(fe.path)
	if perr != nil || xerr != nil {
		return err
	}
	if node, ferr := p.FilterFile(file); ferr == nil && node != nil {
		return fmt.Errorf("line %d: %s: %s", node.GetToken().Position.Line, fe.path[2:], fe.msg)
	}
	return err
}

// merge lays file over cfg: models replace same-named ones, a subagents
// section replaces the default composition, other non-zero fields win.
func (cfg Config) merge(file Config) (Config, error) {
	for i, m := range file.Models {
		at := fmt.Sprintf("$.models[%d]", i)
		switch {
		case m.Name == "":
			return cfg, bad(at, "name is required")
		case m.BaseURL == "":
			return cfg, bad(at, "baseURL is required")
		case m.APIKeyEnv == "":
			return cfg, bad(at, "apiKeyEnv is required (the name of the variable holding the key)")
		case m.MaxTokens < 0:
			return cfg, bad(at+".maxTokens", "must not be negative")
		}
		replaced := false
		for j := range cfg.Models {
			if cfg.Models[j].Name == m.Name {
				cfg.Models[j], replaced = m, true
			}
		}
		if !replaced {
			cfg.Models = append(cfg.Models, m)
		}
	}
	if file.Agent.Provider != "" {
		cfg.Agent.Provider, cfg.Agent.Model = file.Agent.Provider, ""
	}
	cfg.Agent.Model = cmp.Or(file.Agent.Model, cfg.Agent.Model, cfg.ModelOf(cfg.Agent.Provider))
	if file.Agent.MaxTokens < 0 {
		return cfg, bad("$.agent.maxTokens", "must not be negative")
	}
	cfg.Agent.MaxTokens = cmp.Or(file.Agent.MaxTokens, cfg.Agent.MaxTokens)
	cfg.Agent.MaxParallelToolCalls = cmp.Or(file.Agent.MaxParallelToolCalls, cfg.Agent.MaxParallelToolCalls)
	cfg.Persona = cmp.Or(file.Persona, cfg.Persona)
	if file.Tools != (Tools{}) {
		cfg.Tools = file.Tools
	}
	if file.Tasks != (Tasks{}) {
		cfg.Tasks = file.Tasks
	}
	cfg.SessionsDir = cmp.Or(file.SessionsDir, cfg.SessionsDir)
	if file.Subagents != nil {
		cfg.Subagents = file.Subagents
	}
	cfg.ACP = file.ACP
	return cfg, cfg.validate()
}

// ModelOf returns the default model id of a model route.
func (cfg Config) ModelOf(route string) string {
	for _, m := range cfg.Models {
		if m.Name == route {
			return m.Model
		}
	}
	return ""
}

func (cfg Config) validate() error {
	known := false
	for _, m := range cfg.Models {
		known = known || m.Name == cfg.Agent.Provider
	}
	if !known {
		return bad("$.agent.provider", "%q is not a configured model route", cfg.Agent.Provider)
	}
	if cfg.Tools.BashTimeout < 0 || cfg.Tools.OutputLimit < 0 {
		return bad("$.tools", "bashTimeout and outputLimit must not be negative")
	}
	if cfg.Tasks.MaxPerOwner < 0 || cfg.Tasks.MaxWakes < 0 {
		return bad("$.tasks", "maxPerOwner and maxWakes must not be negative")
	}
	if cfg.ACP.PermissionTimeout < 0 || cfg.ACP.MaxSessions < 0 {
		return bad("$.acp", "permissionTimeout and maxSessions must not be negative")
	}
	if cfg.Subagents == nil {
		return nil
	}
	providers := map[string]bool{}
	for i, p := range cfg.Subagents.Providers {
		at := fmt.Sprintf("$.subagents.providers[%d]", i)
		if p.Name == "" {
			return bad(at, "name is required")
		}
		if providers[p.Name] {
			return bad(at+".name", "provider %q is declared twice", p.Name)
		}
		providers[p.Name] = true
		k := cmp.Or(p.Kind, p.Name)
		blocks := map[string]bool{KindACP: p.ACP != nil, KindCodex: p.Codex != nil, KindClaudeCode: p.ClaudeCode != nil}
		switch k {
		case KindSpawn, KindFork, KindCodex, KindClaudeCode:
		case KindACP:
			if p.ACP == nil || p.ACP.Command == "" {
				return bad(at, "an acp provider needs acp.command (%q runs this dsh)", SelfCommand)
			}
		default:
			return bad(at, "unknown kind %q (want spawn, fork, acp, codex or claude-code)", k)
		}
		for block, set := range blocks {
			if set && block != k {
				return bad(at, "a %s provider cannot have a %s block", k, map[string]string{KindACP: "acp", KindCodex: "codex", KindClaudeCode: "claudeCode"}[block])
			}
		}
	}
	names := map[string]bool{}
	for i, t := range cfg.Subagents.Tools {
		at := fmt.Sprintf("$.subagents.tools[%d]", i)
		switch {
		case t.Provider == "":
			return bad(at, "provider is required")
		case !providers[t.Provider]:
			return bad(at+".provider", "%q is not a declared subagent provider", t.Provider)
		case t.MaxDepth != nil && *t.MaxDepth < 0:
			return bad(at+".maxDepth", "must be a non-negative integer, got %d", *t.MaxDepth)
		case t.ToolFilter != nil && t.ToolFilter.Allow == nil && len(t.ToolFilter.Deny) == 0:
			return bad(at+".toolFilter", "needs allow or deny")
		}
		name := cmp.Or(t.ToolName, "subagent")
		if names[name] {
			return bad(at, "tool name %q is used twice: give each instance its own toolName", name)
		}
		names[name] = true
	}
	return nil
}

// SessionsRoot returns where JSONL sessions are kept.
func (cfg Config) SessionsRoot(getenv func(string) string) (string, error) {
	if cfg.SessionsDir != "" {
		return cfg.SessionsDir, nil
	}
	return jsonl.DefaultRoot(getenv)
}

// Build makes a runtime from cfg: JSONL sessions (or backend, when
// non-nil), the model routes, the built-in and task tools, the subagent
// providers and tools, and the persona.
func (cfg Config) Build(ctx context.Context, log *slog.Logger, backend session.Backend, getenv func(string) string) (*dsh.Runtime, error) {
	if backend == nil {
		root, err := cfg.SessionsRoot(getenv)
		if err != nil {
			return nil, err
		}
		backend = jsonl.New(root)
	}
	rt, err := dsh.New(dsh.Options{Logger: log, Backend: backend, Persona: cfg.Persona, MaxTasksPerOwner: cfg.Tasks.MaxPerOwner})
	if err != nil {
		return nil, err
	}
	for _, m := range cfg.Models {
		model, err := openai.New(openai.Config{Provider: m.Name, BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv, Model: m.Model,
			MaxTokens: m.MaxTokens, IdleTimeout: m.IdleTimeout, MaxRetries: m.MaxRetries, Getenv: getenv, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("model route %s: %w", m.Name, err)
		}
		if _, err := rt.LLM.Register(m.Name, model); err != nil {
			return nil, err
		}
	}
	if _, err := builtin.Register(rt.Tools, builtin.Options{BashTimeout: cfg.Tools.BashTimeout, OutputLimit: cfg.Tools.OutputLimit}); err != nil {
		return nil, err
	}
	if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{MaxWakes: cfg.Tasks.MaxWakes}); err != nil {
		return nil, err
	}
	if err := cfg.mountSubagents(rt, getenv); err != nil {
		return nil, err
	}
	return rt, nil
}
