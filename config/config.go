// Package config reads dsh's YAML configuration file and turns it into a
// wired Runtime: model routes, built-in tools, subagent providers and tool
// instances, task tools, persona and session store.
package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/internal/secret"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/anthropic"
	"github.com/dsh-go/dsh/llm/openai"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool/builtin"
	"github.com/dsh-go/dsh/trust"
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
	// Permissions is the permission policy of every agent and of every
	// child it delegates to: allow, ask or deny per tool (children can
	// only narrow it). Under `dsh acp`, acp.askPermission adds asks on top.
	Permissions permission.Rules `yaml:"permissions"`
	// Budget bounds what one prompt (and all it starts) may spend, children included.
	Budget Budget `yaml:"budget"`
	// SessionsDir holds the JSONL session files (default $DSH_HOME/sessions).
	SessionsDir string `yaml:"sessionsDir"`
	// Hooks are commands run around the tool calls, children and turns of
	// every agent (Claude Code's format; see package hook).
	Hooks hook.Config `yaml:"hooks"`
	// MCPServers are Model Context Protocol servers whose tools every agent
	// and child may use, as mcp__<server>__<tool>: a map from a server's
	// name to its block, as in Claude Code's .mcp.json.
	MCPServers map[string]mcptool.ServerConfig `yaml:"mcpServers"`
	// ProjectMCP reads the working directory's .mcp.json (Claude Code's
	// project file) too (default true); a server of dsh.yaml wins over a
	// same-named one there.
	ProjectMCP *bool `yaml:"projectMCP"`

	// ProjectDir is the project whose .dsh/agents and .claude/agents hold
	// agent definitions (default: the current directory). It is not read
	// from the file.
	ProjectDir string `yaml:"-"`
	// ModelOverride, when set, serves every model route in place of its
	// endpoint (`dsh replay` answers from a recording). It is not read
	// from the file.
	ModelOverride llm.Model `yaml:"-"`
	// Tracer traces the runtime's agents (nil: no tracing; see package
	// telemetry/otlp). It is not read from the file.
	Tracer *telemetry.Tracer `yaml:"-"`

	path        string            // the last file read, absolute (Parse: as named); "" for none
	files       []File            // the files read, in order
	notes       []string          // warnings of the files read
	warnings    []string          // what is legal but probably not meant
	kinds       []Kind            // the provider kinds the file was checked against
	mcpSources  map[string]string // server name → the .mcp.json it came from
	routeKey    string            // "provider" when the file names the route by its old key
	modelSet    bool              // a file named agent.model (the route's own model is not used)
	picked      bool              // the route was picked from the variables set, not named (see RouteChoice)
	pickedByKey bool              // … because its variable is set
	// hookSources are Claude Code's settings files whose hooks run after
	// Hooks.
	hookSources []hookSource
}

// Loader loads configuration files against a table of provider kinds.
type Loader struct {
	// Kinds are the provider kinds a file may declare (default
	// BuiltinKinds). A program that brings a kind of its own appends it.
	Kinds []Kind
}

func (l Loader) kinds() []Kind {
	if l.Kinds == nil {
		return BuiltinKinds()
	}
	return l.Kinds
}

// Warnings returns what the file says that is legal but probably not
// meant, such as a provider no tool is bound to.
func (cfg Config) Warnings() []string { return cfg.warnings }

// Path returns the absolute path of the last file the configuration was
// read from, or "" when it is the built-in default.
func (cfg Config) Path() string { return cfg.path }

// Model is one model route: an endpoint, the key it takes and the model
// it serves by default.
type Model struct {
	Name string `yaml:"name"`
	// API is the protocol the endpoint speaks: openai (chat completions,
	// the default) or anthropic (the Messages API).
	API         string        `yaml:"api"`
	BaseURL     string        `yaml:"baseURL"`
	APIKeyEnv   string        `yaml:"apiKeyEnv"`
	Model       string        `yaml:"model"`
	MaxTokens   int           `yaml:"maxTokens"`
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// RequestTimeout bounds a whole model call, retries included (default 30m).
	RequestTimeout time.Duration `yaml:"requestTimeout"`
	MaxRetries     int           `yaml:"maxRetries"`
	// Thinking is DeepSeek's thinking switch: enabled or disabled (default:
	// the endpoint's own, which is enabled on DeepSeek).
	Thinking string `yaml:"thinking"`
	// ReasoningEffort is sent as reasoning_effort: low, high or max on
	// DeepSeek (openai routes only).
	ReasoningEffort string `yaml:"reasoningEffort"`
	// ThinkingBudget is budget_tokens of an anthropic route with thinking
	// enabled (default half of maxTokens).
	ThinkingBudget int `yaml:"thinkingBudget"`
	// PassBackReasoning sends reasoning_content, "" when empty, with every
	// assistant message that made tool calls, as DeepSeek's thinking mode
	// requires. Default: on for a DeepSeek route, off elsewhere.
	PassBackReasoning *bool `yaml:"passBackReasoning"`
	// Price, when set, lets usage lines show what a run cost.
	Price *Price `yaml:"price"`
	// ContextWindow is the model's context window in tokens (default: the
	// built-in table's for Model, see llm.ContextWindow; unknown models
	// compact only when the endpoint answers CONTEXT_WINDOW_EXCEEDED).
	ContextWindow int `yaml:"contextWindow"`

	builtin   bool // a built-in route no file mentions
	filePrice bool // Price is a file's, for every model of the route
}

// builtinRoute reports whether m is (a tuning of) a built-in route.
func (m Model) builtinRoute() bool { return slices.Contains(builtinNames(), m.Name) }

// Builtin reports whether m is a built-in route that no configuration
// file mentions.
func (m Model) Builtin() bool { return m.builtin }

// overlay returns m with the fields that o sets: a route named like a
// built-in one tunes it, keeping its URL and key unless it sets them.
func (m Model) overlay(o Model) Model {
	m.builtin = false
	if o.Model != "" && o.Model != m.Model && o.Price == nil {
		m.Price = builtinPrice(m.Name, o.Model) // the old model's price is not the new one's
	}
	m.API = cmp.Or(o.API, m.API)
	m.BaseURL = cmp.Or(o.BaseURL, m.BaseURL)
	m.APIKeyEnv = cmp.Or(o.APIKeyEnv, m.APIKeyEnv)
	m.Model = cmp.Or(o.Model, m.Model)
	m.MaxTokens = cmp.Or(o.MaxTokens, m.MaxTokens)
	m.ContextWindow = cmp.Or(o.ContextWindow, m.ContextWindow)
	m.IdleTimeout = cmp.Or(o.IdleTimeout, m.IdleTimeout)
	m.RequestTimeout = cmp.Or(o.RequestTimeout, m.RequestTimeout)
	m.MaxRetries = cmp.Or(o.MaxRetries, m.MaxRetries)
	m.Thinking = cmp.Or(o.Thinking, m.Thinking)
	m.ReasoningEffort = cmp.Or(o.ReasoningEffort, m.ReasoningEffort)
	m.ThinkingBudget = cmp.Or(o.ThinkingBudget, m.ThinkingBudget)
	if o.PassBackReasoning != nil {
		m.PassBackReasoning = o.PassBackReasoning
	}
	if o.Price != nil {
		m.Price, m.filePrice = o.Price, true
	}
	return m
}

// OpenAI is the adapter configuration of route m. A DeepSeek route (named
// deepseek, or at a deepseek.com URL) defaults to DeepSeek's max_tokens and
// passes reasoning back.
func (m Model) OpenAI(getenv func(string) string, log *slog.Logger) openai.Config {
	deepSeek := m.Name == "deepseek" || strings.HasSuffix(hostOf(m.BaseURL), "deepseek.com")
	passBack := deepSeek
	if m.PassBackReasoning != nil {
		passBack = *m.PassBackReasoning
	}
	maxTokens := m.MaxTokens
	if deepSeek && maxTokens == 0 {
		maxTokens = openai.DeepSeekMaxTokens
	}
	return openai.Config{Provider: m.Name, BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv, Model: m.Model,
		MaxTokens: maxTokens, IdleTimeout: m.IdleTimeout, RequestTimeout: m.RequestTimeout, MaxRetries: m.MaxRetries,
		Thinking: m.Thinking, ReasoningEffort: m.ReasoningEffort, PassBackReasoning: passBack, Getenv: getenv, Logger: log,
		MaxCompletionTokens: hostOf(m.BaseURL) == "api.openai.com"}
}

// Anthropic is the adapter configuration of route m when it speaks the
// Messages API.
func (m Model) Anthropic(getenv func(string) string, log *slog.Logger) anthropic.Config {
	return anthropic.Config{Provider: m.Name, BaseURL: m.BaseURL, APIKeyEnv: m.APIKeyEnv, Model: m.Model, MaxTokens: m.MaxTokens,
		IdleTimeout: m.IdleTimeout, RequestTimeout: m.RequestTimeout, MaxRetries: m.MaxRetries, Thinking: m.Thinking,
		ThinkingBudget: m.ThinkingBudget, Getenv: getenv, Logger: log}
}

// Adapter returns the model adapter of route m.
func (m Model) Adapter(getenv func(string) string, log *slog.Logger) (Lister, error) {
	if m.API == APIAnthropic {
		return anthropic.New(m.Anthropic(getenv, log))
	}
	return openai.New(m.OpenAI(getenv, log))
}

// Lister is a model adapter that lists the models its endpoint serves.
type Lister interface {
	llm.Model
	ListModels(ctx context.Context) ([]string, error)
}

func hostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Budget bounds what one prompt, and all it starts, may spend.
type Budget struct {
	// Tokens bounds the input, cached input and output tokens of a
	// top-level agent and all its descendants (default
	// DefaultBudgetTokens, at most MaxBudgetTokens).
	Tokens int64 `yaml:"tokens"`
}

// Bounds of the caps a file (or the command line) may set: a value past
// one is a mistake, not a wish for no cap.
const (
	// DefaultBudgetTokens is budget.tokens when unset: enough for a long
	// task, and a stop for a model that delegates or loops without end.
	DefaultBudgetTokens = 10_000_000
	// MaxBudgetTokens is the largest budget.tokens.
	MaxBudgetTokens = 1_000_000_000
	// MaxSteps is the largest agent.maxSteps (and dsh run --max-steps).
	MaxSteps = 10_000
	// MaxLiveChildren is the largest subagents.maxLiveChildren.
	MaxLiveChildren = 1024
	// MaxChildrenPerTurn is the largest subagents.maxChildrenPerTurn.
	MaxChildrenPerTurn = 1000
)

// CheckMaxSteps checks a step cap given outside the file (dsh run
// --max-steps): 1 to MaxSteps.
func CheckMaxSteps(n int) error {
	if n < 1 || n > MaxSteps {
		return fmt.Errorf("must be between 1 and %d, got %d", MaxSteps, n)
	}
	return nil
}

// Price is what a model route charges per million tokens, in US dollars.
type Price struct {
	Input       float64 `yaml:"input"`
	CachedInput float64 `yaml:"cachedInput"`
	// CacheWrite is the price of input written to the prompt cache
	// (Anthropic's cache_creation_input_tokens, counted in Usage.Input
	// and again in Usage.CacheWrite); 0 charges it as Input.
	CacheWrite float64 `yaml:"cacheWrite"`
	Output     float64 `yaml:"output"`
}

// Cost returns what u costs at p, in US dollars.
func (p Price) Cost(u content.Usage) float64 {
	written := min(u.CacheWrite, u.Input)
	return (float64(u.Input-written)*p.Input + float64(written)*cmp.Or(p.CacheWrite, p.Input) + float64(u.CacheRead)*p.CachedInput +
		float64(u.Output)*p.Output) / 1e6
}

// Tools configure the built-in tools.
type Tools struct {
	BashTimeout time.Duration `yaml:"bashTimeout"`
	OutputLimit int           `yaml:"outputLimit"`
	// Sandbox is where the commands dsh runs (bash, hooks, MCP stdio
	// servers, dsh's own git) may write: workspace-write (the default: the
	// working directory and temporary directories), read-only or full.
	// Under the first two they cannot read the credential stores of
	// sandbox.Unreadable either.
	Sandbox sandbox.Mode `yaml:"sandbox"`
	// Network is whether those commands may use the network: allow (the
	// default) or deny (TCP connect and bind refused, where the kernel
	// can enforce it).
	Network sandbox.Network `yaml:"network"`
}

// Tasks configure background tasks.
type Tasks struct {
	MaxPerOwner int `yaml:"maxPerOwner"`
	// MaxWakes bounds the consecutive model calls completion notices alone
	// may cause in an agent (default 3): the turns they open in an idle
	// agent and the steps they add to a turn whose model has answered;
	// those of its background tasks, and apart from them the settlement
	// notices of its continuable children.
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
	// MaxLiveChildren caps the children one delegation tree may have alive
	// at once (default DefaultMaxLiveChildren, at most MaxLiveChildren).
	MaxLiveChildren int `yaml:"maxLiveChildren"`
	// MaxChildrenPerTurn caps the children one turn of an agent may start
	// or continue (default DefaultMaxChildrenPerTurn, at most
	// MaxChildrenPerTurn).
	MaxChildrenPerTurn int `yaml:"maxChildrenPerTurn"`
	// ControlTools mounts send_message, interrupt_agent, list_agents and
	// the children's report tool when some tool instance starts
	// continuable children (default true).
	ControlTools *bool `yaml:"controlTools"`
}

// over lays a file's subagents section over s: the providers and the
// tools it declares replace s's (a file that declares providers and no
// tools binds none of the earlier tools, which may name providers it
// dropped; one that declares only tools keeps the earlier providers, the
// default spawn and fork among them), the limits it sets replace s's.
func (s *Subagents) over(file *Subagents) *Subagents {
	if file == nil {
		return s
	}
	if s == nil {
		return file
	}
	out := *s
	if file.Providers != nil {
		out.Providers, out.Tools = file.Providers, file.Tools
	}
	if file.Tools != nil {
		out.Tools = file.Tools
	}
	out.MaxLiveChildren = cmp.Or(file.MaxLiveChildren, s.MaxLiveChildren)
	out.MaxChildrenPerTurn = cmp.Or(file.MaxChildrenPerTurn, s.MaxChildrenPerTurn)
	out.ControlTools = cmp.Or(file.ControlTools, s.ControlTools)
	return &out
}

// DefaultMaxLiveChildren is subagents.maxLiveChildren when unset.
const DefaultMaxLiveChildren = 64

// DefaultMaxChildrenPerTurn is subagents.maxChildrenPerTurn when unset.
const DefaultMaxChildrenPerTurn = 100

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

// Default returns the configuration used when no file exists: the
// built-in model routes (BuiltinRoutes), the agent on the first whose key
// is set (DeepSeek when none is), and the default subagents.
func Default(getenv func(string) string) Config { return Loader{}.Default(getenv) }

// Default is the package's Default over the loader's kinds.
func (l Loader) Default(getenv func(string) string) Config {
	var models []Model
	for _, r := range BuiltinRoutes() {
		models = append(models, r.model(getenv))
	}
	pick, byKey := pickRoute(getenv)
	cfg := Config{
		Budget:      Budget{Tokens: DefaultBudgetTokens},
		Models:      models,
		Subagents:   DefaultSubagents(),
		kinds:       l.kinds(),
		picked:      true,
		pickedByKey: byKey,
	}
	cfg.Agent = agent.Options{Provider: pick.Name, Model: cfg.ModelOf(pick.Name)}
	return cfg
}

// protected returns the files no tool may write, whatever the sandbox:
// the loaded configuration file, $DSH_HOME and the session store; and the
// folder of $DSH_HOME that holds worktrees, whose children write their own
// tree.
func (cfg Config) protected(getenv func(string) string) (files []string, worktrees string, err error) {
	home, err := Home(getenv)
	if err != nil {
		return nil, "", err
	}
	if home, err = filepath.Abs(home); err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	paths := []string{home, cfg.SessionsDir}
	for _, f := range cfg.files {
		paths = append(paths, f.Path)
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		if p, err = filepath.Abs(p); err != nil {
			return nil, "", fmt.Errorf("config: %w", err)
		}
		files = append(files, p)
	}
	return files, filepath.Join(home, "worktrees"), nil
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

// Load reads the configuration files over the defaults, each over the
// ones before it: the user's $DSH_HOME/dsh.yaml, then the project's
// .dsh/dsh.yaml of the working directory when the user trusts that folder
// (see package trust; a project file may not redirect a route's key or
// loosen the sandbox, see projectOnly), then path, else $DSH_CONFIG. A
// missing user or project file is skipped; a missing path is an error.
// Unknown keys and bad values are errors naming the file, the key and its
// line. Unless the result sets projectMCP: false, the MCP servers of the
// working directory's .mcp.json join it when the user trusts that folder
// (see WithProjectMCP); a trust record dsh cannot read is an error.
func Load(path string, getenv func(string) string) (Config, error) {
	return Loader{}.Load(path, getenv)
}

// Load is the package's Load over the loader's kinds.
func (l Loader) Load(path string, getenv func(string) string) (Config, error) {
	wd, _ := os.Getwd()
	return l.LoadIn(wd, path, getenv)
}

// LoadIn is Load for the working directory wd ("" for none: no project
// items).
func (l Loader) LoadIn(wd, path string, getenv func(string) string) (Config, error) {
	cfg := l.Default(getenv)
	explicit := cmp.Or(path, getenv("DSH_CONFIG"))
	home, err := Home(getenv)
	if err != nil && explicit == "" {
		return cfg, err
	}
	if err == nil {
		if cfg, err = l.layer(cfg, LayerUser, filepath.Join(home, "dsh.yaml"), false, getenv); err != nil {
			return cfg, err
		}
	}
	if wd != "" {
		if cfg, err = l.withTrustedProject(cfg, wd, getenv); err != nil {
			return cfg, err
		}
	}
	if explicit != "" {
		layer := LayerFlag
		if path == "" {
			layer = LayerEnv
		}
		if cfg, err = l.layer(cfg, layer, explicit, true, getenv); err != nil {
			return cfg, err
		}
	}
	if wd != "" {
		if cfg, err = cfg.withTrustedProjectMCP(wd, getenv); err != nil {
			return cfg, err
		}
		return cfg.withClaudeSettings(wd, getenv)
	}
	return cfg, nil
}

// The layers a configuration file is read as (File.Layer).
const (
	LayerUser    = "user"       // $DSH_HOME/dsh.yaml
	LayerProject = "project"    // .dsh/dsh.yaml of a trusted folder
	LayerFlag    = "--config"   // the file --config names
	LayerEnv     = "DSH_CONFIG" // the file $DSH_CONFIG names
)

// File is a configuration file a Config was read from.
type File struct {
	Path  string // absolute
	Layer string // LayerUser, LayerProject, LayerFlag or LayerEnv
}

// Files returns the files the configuration was read from, in the order
// they were laid over the defaults.
func (cfg Config) Files() []File { return slices.Clone(cfg.files) }

// explicitFile is the path of the file --config or $DSH_CONFIG named, or
// "".
func (cfg Config) explicitFile() string {
	for _, f := range cfg.files {
		if f.Layer == LayerFlag || f.Layer == LayerEnv {
			return f.Path
		}
	}
	return ""
}

// layer reads the file at path over cfg; a missing file is skipped unless
// required, and a file read already (as DSH_CONFIG naming the user's file)
// is not read again.
func (l Loader) layer(cfg Config, layer, path string, required bool, getenv func(string) string) (Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if slices.ContainsFunc(cfg.files, func(f File) bool { return sameFile(f.Path, abs) }) {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !required {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	return l.parseOver(cfg, layer, abs, data, getenv)
}

// withTrustedProject lays the project's .dsh/dsh.yaml over cfg when the
// user trusts dir as it is now (an untrusted folder's file is reported by
// dsh's one-line notice, with the folder's other items).
func (l Loader) withTrustedProject(cfg Config, dir string, getenv func(string) string) (Config, error) {
	store, err := TrustStore(getenv)
	if err != nil {
		return cfg, nil // no record: nothing is trusted
	}
	st, err := store.Check(dir)
	if err != nil || st.State != trust.Trusted {
		return cfg, err
	}
	it, ok := st.Item(trust.ConfigFile)
	if !ok || it.Problem != "" {
		return cfg, nil
	}
	// The bytes the user trusted, not the file as it may be by now.
	return l.parseOver(cfg, LayerProject, filepath.Join(st.Dir, filepath.FromSlash(trust.ConfigFile)), it.Data, getenv)
}

// sameFile reports whether a and b name the same file.
func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

// Parse reads a configuration file's content over the defaults; name is
// used in error messages.
func Parse(name string, data []byte, getenv func(string) string) (Config, error) {
	return Loader{}.Parse(name, data, getenv)
}

// Parse is the package's Parse over the loader's kinds.
func (l Loader) Parse(name string, data []byte, getenv func(string) string) (Config, error) {
	cfg, err := l.parseOver(l.Default(getenv), LayerFlag, name, data, getenv)
	if len(cfg.files) > 0 && !filepath.IsAbs(name) {
		cfg.files[len(cfg.files)-1].Path, cfg.path = name, name
	}
	return cfg, err
}

// parseOver reads the content of the file at path, a file of layer, over
// cfg.
func (l Loader) parseOver(cfg Config, layer, path string, data []byte, getenv func(string) string) (Config, error) {
	name := path
	if err := checkTypes(data); err != nil {
		return cfg, fmt.Errorf("config %s: %w", name, err)
	}
	var file Config
	aliased, err := decodeFile(data, &file)
	if err != nil {
		return cfg, fmt.Errorf("config %s: %w", name, err)
	}
	file.kinds = cfg.kinds
	if err := cfg.decodeBlocks(&file); err != nil {
		return cfg, fmt.Errorf("config %s: %w", name, err)
	}
	if aliased {
		cfg.routeKey = "provider"
		cfg.notes = append(slices.Clip(cfg.notes), fmt.Sprintf(`%s: "provider" in agent options is the old name of "route" (a model route; a subagent provider is another thing): rename it, as the old name will go`, name))
	}
	if layer == LayerProject {
		for _, key := range file.projectOnly(cfg.routeNames()) {
			cfg.notes = append(slices.Clip(cfg.notes), fmt.Sprintf("%s: %s: left out (only your own dsh.yaml or --config may set it)", name, key))
		}
	}
	cfg.files = append(slices.Clip(cfg.files), File{Path: path, Layer: layer})
	cfg.path = path
	cfg, verr := cfg.merge(file)
	if verr != nil {
		return cfg, fmt.Errorf("config %s: %w", name, locate(data, verr))
	}
	return cfg, nil
}

// projectOnly clears, from a project's file, what only the user's own
// configuration may set, and returns the keys it cleared: a route's
// baseURL and apiKeyEnv, and a route not among routes (they would send a
// key the user holds to an endpoint the repository chose), the sandbox and network of commands,
// the sessions folder and an MCP server's sandbox.
func (file *Config) projectOnly(routes []string) []string {
	var keys []string
	var models []Model
	for i, m := range file.Models {
		switch {
		case !slices.Contains(routes, m.Name):
			keys = append(keys, fmt.Sprintf("models[%d] (a new route, %s, whose endpoint and key)", i, m.Name))
			continue
		case m.BaseURL != "" || m.APIKeyEnv != "":
			keys = append(keys, fmt.Sprintf("models[%d].baseURL and apiKeyEnv", i))
			m.BaseURL, m.APIKeyEnv = "", ""
		}
		models = append(models, m)
	}
	file.Models = models
	if file.Tools.Sandbox != "" || file.Tools.Network != "" {
		keys = append(keys, "tools.sandbox and tools.network")
		file.Tools.Sandbox, file.Tools.Network = "", ""
	}
	if file.SessionsDir != "" {
		keys = append(keys, "sessionsDir")
		file.SessionsDir = ""
	}
	for _, name := range slices.Sorted(maps.Keys(file.MCPServers)) {
		if srv := file.MCPServers[name]; srv.Sandbox != "" {
			keys = append(keys, "mcpServers."+name+".sandbox")
			srv.Sandbox = ""
			file.MCPServers[name] = srv
		}
	}
	return keys
}

// decodeDuration reads a duration such as 30s or 1m30s.
func decodeDuration(d *time.Duration, b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"'`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30s or 2m, got %q", s)
	}
	*d = v
	return nil
}

var position = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[(\d+):\d+\] `) })

// withSourceLine appends the offending source line to a decoder message
// that starts with its [line:column] position, so the key is named.
func withSourceLine(data []byte, msg string) string {
	m := position().FindStringSubmatch(msg)
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

// locate adds the line of a fieldError's key, or of the nearest enclosing
// key the file has (a missing key is reported at its block).
func locate(data []byte, err error) error {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return err
	}
	file, perr := parser.ParseBytes(data, 0)
	if perr != nil {
		return err
	}
	// A key the file does not have (a required one) is placed at the
	// nearest enclosing key it does.
	for at := fe.path; len(at) > 1; at = parentPath(at) {
		p, xerr := yaml.PathString(at)
		if xerr != nil {
			continue
		}
		if node, ferr := p.FilterFile(file); ferr == nil && node != nil {
			return fmt.Errorf("line %d: %s: %s", node.GetToken().Position.Line, fe.path[2:], fe.msg)
		}
	}
	return err
}

// parentPath drops the last key or index of a YAML path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i <= 0 {
		return "$"
	}
	return path[:i]
}

// merge lays file over cfg: models replace same-named ones, a subagents
// section replaces the default composition, other non-zero fields win.
func (cfg Config) merge(file Config) (Config, error) {
	for i, m := range file.Models {
		at := fmt.Sprintf("$.models[%d]", i)
		base := slices.IndexFunc(cfg.Models, func(x Model) bool { return x.Name == m.Name })
		switch {
		case m.Name == "":
			return cfg, bad(at, "name is required")
		case m.BaseURL == "" && base < 0:
			return cfg, bad(at, "baseURL is required (a new route; the built-in routes %s have one)", strings.Join(builtinNames(), ", "))
		case m.API != "" && m.API != APIOpenAI && m.API != APIAnthropic:
			return cfg, bad(at+".api", "want %s or %s, got %q", APIOpenAI, APIAnthropic, m.API)
		case m.MaxTokens < 0:
			return cfg, bad(at+".maxTokens", "must not be negative")
		case m.ContextWindow < 0:
			return cfg, bad(at+".contextWindow", "must not be negative")
		case m.Thinking != "" && m.Thinking != openai.ThinkingEnabled && m.Thinking != openai.ThinkingDisabled:
			return cfg, bad(at+".thinking", "want %s or %s, got %q", openai.ThinkingEnabled, openai.ThinkingDisabled, m.Thinking)
		case m.ReasoningEffort != "" && !slices.Contains([]string{"minimal", "low", "medium", "high", "xhigh", "max"}, m.ReasoningEffort):
			return cfg, bad(at+".reasoningEffort", "want low, high or max (DeepSeek), got %q", m.ReasoningEffort)
		}
		if base < 0 {
			m.filePrice = m.Price != nil
			cfg.Models = append(cfg.Models, m)
			continue
		}
		cfg.Models[base] = cfg.Models[base].overlay(m)
	}
	if file.Agent.Provider != "" {
		if file.Agent.Provider != cfg.Agent.Provider {
			cfg.modelSet = false // another route: its own model, unless this file names one
		}
		cfg.Agent.Provider = file.Agent.Provider
		cfg.picked, cfg.pickedByKey = false, false
	}
	if file.Agent.Model != "" {
		cfg.Agent.Model, cfg.modelSet = file.Agent.Model, true
	} else if !cfg.modelSet {
		cfg.Agent.Model = cfg.ModelOf(cfg.Agent.Provider) // the route's, as this file may have tuned it
	}
	if file.Agent.MaxTokens < 0 {
		return cfg, bad("$.agent.maxTokens", "must not be negative")
	}
	cfg.Agent.MaxTokens = cmp.Or(file.Agent.MaxTokens, cfg.Agent.MaxTokens)
	if c := file.Agent.CompactAt; c != 0 {
		if err := agent.CheckCompactAt(c); err != nil {
			return cfg, bad("$.agent.compactAt", "%v", err)
		}
		cfg.Agent.CompactAt = c
	}
	cfg.Agent.MaxParallelToolCalls = cmp.Or(file.Agent.MaxParallelToolCalls, cfg.Agent.MaxParallelToolCalls)
	if n := file.Agent.MaxSteps; n != 0 {
		if err := CheckMaxSteps(n); err != nil {
			return cfg, bad("$.agent.maxSteps", "%v", err)
		}
		cfg.Agent.MaxSteps = n
	}
	if d := file.Permissions.Default; d != "" && !d.Valid() {
		return cfg, bad("$.permissions.default", "want allow, ask or deny, got %q", d)
	}
	for _, name := range slices.Sorted(maps.Keys(file.Permissions.Tools)) {
		if d := file.Permissions.Tools[name]; !d.Valid() {
			return cfg, bad("$.permissions.tools."+name, "want allow, ask or deny, got %q", d)
		}
	}
	if file.Permissions.Default != "" || file.Permissions.Tools != nil {
		cfg.Permissions = file.Permissions
	}
	if n := file.Budget.Tokens; n < 0 || n > MaxBudgetTokens {
		return cfg, bad("$.budget.tokens", "must be between 1 and %d (0 or unset: the default, %d), got %d", MaxBudgetTokens, DefaultBudgetTokens, n)
	}
	cfg.Budget = cmp.Or(file.Budget, cfg.Budget)
	cfg.Persona = cmp.Or(file.Persona, cfg.Persona)
	cfg.Tools = Tools{BashTimeout: cmp.Or(file.Tools.BashTimeout, cfg.Tools.BashTimeout), OutputLimit: cmp.Or(file.Tools.OutputLimit, cfg.Tools.OutputLimit),
		Sandbox: cmp.Or(file.Tools.Sandbox, cfg.Tools.Sandbox), Network: cmp.Or(file.Tools.Network, cfg.Tools.Network)}
	cfg.Tasks = Tasks{MaxPerOwner: cmp.Or(file.Tasks.MaxPerOwner, cfg.Tasks.MaxPerOwner), MaxWakes: cmp.Or(file.Tasks.MaxWakes, cfg.Tasks.MaxWakes)}
	cfg.SessionsDir = cmp.Or(file.SessionsDir, cfg.SessionsDir)
	cfg.Subagents = cfg.Subagents.over(file.Subagents)
	cfg.ACP = ACP{AskPermission: cmp.Or(file.ACP.AskPermission, cfg.ACP.AskPermission),
		PermissionTimeout: cmp.Or(file.ACP.PermissionTimeout, cfg.ACP.PermissionTimeout), MaxSessions: cmp.Or(file.ACP.MaxSessions, cfg.ACP.MaxSessions)}
	usableHooks, hookWarnings, err := file.Hooks.Usable(true)
	if err != nil {
		var ce *hook.ConfigError
		if errors.As(err, &ce) {
			return cfg, bad("$.hooks."+ce.Field, "%s", ce.Msg)
		}
		return cfg, err
	}
	if file.Hooks != nil {
		cfg.Hooks = usableHooks
	}
	for _, name := range slices.Sorted(maps.Keys(file.MCPServers)) {
		if err := mcpError("$.mcpServers", file.MCPServers[name].Validate(name)); err != nil {
			return cfg, err
		}
	}
	if file.MCPServers != nil {
		cfg.MCPServers = file.MCPServers
	}
	if file.ProjectMCP != nil {
		cfg.ProjectMCP = file.ProjectMCP
	}
	if err := cfg.validate(); err != nil {
		return cfg, err
	}
	cfg.warnings = append(slices.Clone(cfg.notes), cfg.lint()...)
	for _, w := range hookWarnings {
		cfg.warnings = append(cfg.warnings, "dsh.yaml "+w)
	}
	return cfg, nil
}

// lint lists what is legal but probably not meant.
func (cfg Config) lint() []string {
	if cfg.Subagents == nil {
		return nil
	}
	var out []string
	for _, p := range cfg.Subagents.Providers {
		if !slices.ContainsFunc(cfg.Subagents.Tools, func(t subagenttool.Config) bool { return t.Provider == p.Name }) {
			out = append(out, fmt.Sprintf("subagent provider %q is bound to no tool, so no model can use it: add {provider: %s} under subagents.tools", p.Name, p.Name))
		}
	}
	return out
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
		return bad("$.agent."+cmp.Or(cfg.routeKey, "route"), "%q is not a configured model route (the routes are %s; declare another under models:)",
			cfg.Agent.Provider, strings.Join(cfg.routeNames(), ", "))
	}
	for i, m := range cfg.Models {
		at := fmt.Sprintf("$.models[%d]", i)
		switch {
		case m.API == APIAnthropic && m.ReasoningEffort != "":
			return bad(at+".reasoningEffort", "route %s speaks the anthropic API, which takes thinking and thinkingBudget instead", m.Name)
		case m.API == APIAnthropic && m.PassBackReasoning != nil:
			return bad(at+".passBackReasoning", "route %s speaks the anthropic API, which always passes thinking back", m.Name)
		case m.ThinkingBudget != 0 && (m.API != APIAnthropic || m.ThinkingBudget < 1024):
			return bad(at+".thinkingBudget", "at least 1024, on a route of api: anthropic")
		}
	}
	if cfg.Tools.BashTimeout < 0 || cfg.Tools.OutputLimit < 0 {
		return bad("$.tools", "bashTimeout and outputLimit must not be negative")
	}
	if _, err := sandbox.ParseMode(string(cfg.Tools.Sandbox)); err != nil {
		return bad("$.tools.sandbox", "%v", err)
	}
	if _, err := sandbox.ParseNetwork(string(cfg.Tools.Network)); err != nil {
		return bad("$.tools.network", "%v", err)
	}
	if cfg.Tasks.MaxPerOwner < 0 || cfg.Tasks.MaxWakes < 0 {
		return bad("$.tasks", "maxPerOwner and maxWakes must not be negative")
	}
	if cfg.ACP.PermissionTimeout < 0 || cfg.ACP.MaxSessions < 0 {
		return bad("$.acp", "permissionTimeout and maxSessions must not be negative")
	}
	tools := cfg.knownTools()
	for _, name := range slices.Sorted(maps.Keys(cfg.Permissions.Tools)) {
		if err := checkToolName(tools, "$.permissions.tools."+name, name); err != nil {
			return err
		}
	}
	if cfg.Subagents == nil {
		return nil
	}
	for _, c := range []struct {
		key      string
		n, limit int
	}{{"maxLiveChildren", cfg.Subagents.MaxLiveChildren, MaxLiveChildren}, {"maxChildrenPerTurn", cfg.Subagents.MaxChildrenPerTurn, MaxChildrenPerTurn}} {
		if c.n < 0 || c.n > c.limit {
			return bad("$.subagents."+c.key, "must be between 1 and %d (0 or unset: the default), got %d", c.limit, c.n)
		}
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
		if err := cfg.validateProvider(at, p); err != nil {
			return err
		}
	}
	names := map[string]bool{}
	for i, t := range cfg.Subagents.Tools {
		at := fmt.Sprintf("$.subagents.tools[%d]", i)
		if err := t.Check(); err != nil {
			if ce := (*subagenttool.ConfigError)(nil); errors.As(err, &ce) {
				return bad(at+"."+ce.Field, "%s", ce.Msg)
			}
			return err
		}
		if !providers[t.Provider] {
			var names []string
			for _, p := range cfg.Subagents.Providers {
				names = append(names, p.Name)
			}
			return bad(at+".provider", "%q is not a declared subagent provider (the declared ones are %s: declare it under subagents.providers)",
				t.Provider, cmp.Or(strings.Join(names, ", "), "none"))
		}
		if f := t.ToolFilter; f != nil {
			for _, list := range []struct {
				key   string
				names []string
			}{{"allow", f.Allow}, {"deny", f.Deny}} {
				for j, n := range list.names {
					if err := checkToolName(tools, fmt.Sprintf("%s.toolFilter.%s[%d]", at, list.key, j), n); err != nil {
						return err
					}
				}
			}
		}
		name := cmp.Or(t.ToolName, "subagent")
		if names[name] {
			return bad(at, "tool name %q is used twice: give each instance its own toolName", name)
		}
		names[name] = true
	}
	return nil
}

// Policy is the permission policy of top-level agents (and, narrowed,
// of their children).
func (cfg Config) Policy() permission.Policy {
	p, _ := permission.New(cfg.Permissions) // validated when loaded
	return p
}

// ACPPolicy is the policy of `dsh acp` sessions: Policy, asking the client
// before the tools of acp.askPermission (default acp.DefaultAskPermission).
func (cfg Config) ACPPolicy(defaultAsk []string) permission.Policy {
	ask := defaultAsk
	if cfg.ACP.AskPermission != nil {
		ask = *cfg.ACP.AskPermission
	}
	return cfg.Policy().Narrow(permission.AskFor(ask...))
}

// PriceOf returns the price of a model route, if it has one: of key, a
// route ("openai") or a route and a model ("openai/gpt-5-mini", as usage
// is keyed). A route's price block applies to every model it serves; a
// built-in price only to the model it is listed for.
func (cfg Config) PriceOf(key string) (Price, bool) {
	route, model, _ := strings.Cut(key, "/")
	for _, m := range cfg.Models {
		if m.Name != route {
			continue
		}
		if m.Price != nil && (model == "" || model == m.Model || m.filePrice) {
			return *m.Price, true
		}
		if p := builtinPrice(route, model); p != nil && m.builtinRoute() {
			return *p, true
		}
	}
	return Price{}, false
}

// SessionsRoot returns where JSONL sessions are kept.
func (cfg Config) SessionsRoot(getenv func(string) string) (string, error) {
	if cfg.SessionsDir != "" {
		return cfg.SessionsDir, nil
	}
	return jsonl.DefaultRoot(getenv)
}

// BuiltinOptions are the options of the built-in tools Build registers:
// the sandbox, the protected files, the output limit, the redaction of the
// credentials.
func (cfg Config) BuiltinOptions(getenv func(string) string) (builtin.Options, error) {
	protected, worktrees, err := cfg.protected(getenv)
	if err != nil {
		return builtin.Options{}, err
	}
	return builtin.Options{BashTimeout: cfg.Tools.BashTimeout, OutputLimit: cfg.Tools.OutputLimit,
		Sandbox: cfg.Tools.Sandbox.Or(sandbox.Default), Network: cfg.Tools.Network, Protected: protected, Worktrees: worktrees,
		Redact: secret.NewRedactor(cfg.Credentials(getenv)...).String}, nil
}

// Build makes a runtime from cfg: JSONL sessions (or backend, when
// non-nil), the model routes, the built-in and task tools, the subagent
// providers and tools, the persona and the project's instructions. The credentials cfg uses are
// redacted from what the built-in tools return and from stored events.
func (cfg Config) Build(ctx context.Context, log *slog.Logger, backend session.Backend, getenv func(string) string) (*dsh.Runtime, error) {
	if backend == nil {
		root, err := cfg.SessionsRoot(getenv)
		if err != nil {
			return nil, err
		}
		backend = jsonl.New(root)
	}
	redactor := secret.NewRedactor(cfg.Credentials(getenv)...)
	backend = redactor.Backend(backend)
	log = slog.New(redactor.Handler(cmp.Or(log, slog.Default()).Handler()))
	mode := cfg.Tools.Sandbox.Or(sandbox.Default)
	hooks, err := cfg.hooks(log)
	if err != nil {
		return nil, err
	}
	rt, err := dsh.New(dsh.Options{Logger: log, Backend: backend, Persona: cfg.Persona, MaxTasksPerOwner: cfg.Tasks.MaxPerOwner, Hooks: hooks,
		Tracer: cfg.Tracer})
	if err != nil {
		return nil, err
	}
	if err := cfg.mountInstructions(rt, getenv, redactor.String); err != nil {
		return nil, err
	}
	for _, m := range cfg.Models {
		var model llm.Model = cfg.ModelOverride
		if model == nil {
			if model, err = m.Adapter(getenv, log); err != nil {
				return nil, fmt.Errorf("model route %s: %w", m.Name, err)
			}
		}
		if _, err := rt.LLM.Register(m.Name, model); err != nil {
			return nil, err
		}
		rt.LLM.SetContextWindow(m.Name, cmp.Or(m.ContextWindow, llm.ContextWindow(m.Model)))
	}
	if err := sandbox.Check(mode); err != nil {
		rt.Log.Warn("commands run without a sandbox", "tools.sandbox", mode, "reason", err)
	}
	if err := sandbox.CheckNetwork(cfg.Tools.Network); err != nil {
		rt.Log.Warn("commands may use the network", "tools.network", cfg.Tools.Network, "reason", err)
	}
	tools, err := cfg.BuiltinOptions(getenv)
	if err != nil {
		return nil, err
	}
	if _, err := builtin.Register(rt.Tools, tools); err != nil {
		return nil, err
	}
	if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{MaxWakes: cfg.Tasks.MaxWakes}); err != nil {
		return nil, err
	}
	if err := cfg.mountSubagents(rt, getenv); err != nil {
		return nil, err
	}
	if err := cfg.mountMCP(rt, getenv); err != nil {
		return nil, err
	}
	maxLive, perTurn := DefaultMaxLiveChildren, DefaultMaxChildrenPerTurn
	if s := cfg.Subagents; s != nil {
		maxLive, perTurn = cmp.Or(s.MaxLiveChildren, maxLive), cmp.Or(s.MaxChildrenPerTurn, perTurn)
	}
	rt.Subagents.LimitLiveChildren(maxLive)
	rt.Subagents.LimitChildrenPerTurn(perTurn)
	rt.Subagents.LimitWakes(cfg.Tasks.MaxWakes)
	return rt, nil
}
