// Package config reads dsh's YAML configuration file and turns it into a
// wired Runtime: model adapters, built-in tools, persona and session store.
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
	"time"

	"github.com/goccy/go-yaml"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/llm/openai"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/tool/builtin"
)

// Config is the content of a dsh configuration file.
type Config struct {
	// Agent is the default model route and limits of top-level agents.
	Agent agent.Options `yaml:"agent"`
	// Providers are OpenAI-compatible endpoints, keyed by Name. A provider
	// named "deepseek" is always present unless redefined.
	Providers []Provider `yaml:"providers"`
	// Persona is the deployment:persona prompt section.
	Persona string `yaml:"persona"`
	Tools   Tools  `yaml:"tools"`
	// SessionsDir holds the JSONL session files (default $DSH_HOME/sessions).
	SessionsDir string `yaml:"sessionsDir"`
}

// Provider is one OpenAI-compatible chat-completions endpoint.
type Provider struct {
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

// Default returns the configuration used when no file exists: DeepSeek's
// deepseek-chat through DEEPSEEK_API_KEY.
func Default(getenv func(string) string) Config {
	ds := openai.DeepSeek()
	ds.BaseURL = cmp.Or(getenv("DEEPSEEK_BASE_URL"), ds.BaseURL, "https://api.deepseek.com")
	return Config{
		Agent:     agent.Options{Provider: ds.Provider, Model: ds.Model},
		Providers: []Provider{{Name: ds.Provider, BaseURL: ds.BaseURL, APIKeyEnv: ds.APIKeyEnv, Model: ds.Model}},
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

// Load reads the file at path over the defaults. An empty path means
// $DSH_HOME/config.yaml when it exists. Unknown keys are errors.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg := Default(getenv)
	explicit := path != ""
	if !explicit {
		home, err := Home(getenv)
		if err != nil {
			return cfg, err
		}
		path = filepath.Join(home, "config.yaml")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	var file Config
	if err := yaml.NewDecoder(bytes.NewReader(data), yaml.Strict()).Decode(&file); err != nil {
		return cfg, fmt.Errorf("config %s: %s", path, yaml.FormatError(err, false, true))
	}
	return cfg.merge(file, path)
}

// merge lays file over cfg: providers replace same-named ones, other
// non-zero fields win.
func (cfg Config) merge(file Config, path string) (Config, error) {
	for _, p := range file.Providers {
		if p.Name == "" || p.BaseURL == "" || p.APIKeyEnv == "" {
			return cfg, fmt.Errorf("config %s: every provider needs name, baseURL and apiKeyEnv", path)
		}
		replaced := false
		for i := range cfg.Providers {
			if cfg.Providers[i].Name == p.Name {
				cfg.Providers[i], replaced = p, true
			}
		}
		if !replaced {
			cfg.Providers = append(cfg.Providers, p)
		}
	}
	if file.Agent.Provider != "" {
		cfg.Agent.Provider = file.Agent.Provider
		cfg.Agent.Model = ""
	}
	if file.Agent.Model != "" {
		cfg.Agent.Model = file.Agent.Model
	}
	if cfg.Agent.Model == "" {
		for _, p := range cfg.Providers {
			if p.Name == cfg.Agent.Provider {
				cfg.Agent.Model = p.Model
			}
		}
	}
	if file.Agent.MaxTokens != 0 {
		cfg.Agent.MaxTokens = file.Agent.MaxTokens
	}
	if file.Agent.MaxParallelToolCalls != 0 {
		cfg.Agent.MaxParallelToolCalls = file.Agent.MaxParallelToolCalls
	}
	if file.Persona != "" {
		cfg.Persona = file.Persona
	}
	if file.Tools != (Tools{}) {
		cfg.Tools = file.Tools
	}
	if file.SessionsDir != "" {
		cfg.SessionsDir = file.SessionsDir
	}
	return cfg, cfg.validate(path)
}

func (cfg Config) validate(path string) error {
	for _, p := range cfg.Providers {
		if p.Name == cfg.Agent.Provider {
			return nil
		}
	}
	return fmt.Errorf("config %s: agent.provider %q is not a configured provider", path, cfg.Agent.Provider)
}

// SessionsRoot returns where JSONL sessions are kept.
func (cfg Config) SessionsRoot(getenv func(string) string) (string, error) {
	if cfg.SessionsDir != "" {
		return cfg.SessionsDir, nil
	}
	return jsonl.DefaultRoot(getenv)
}

// Build makes a runtime from cfg: JSONL sessions (or backend, when non-nil),
// the configured model adapters, the built-in tools and the persona.
func (cfg Config) Build(ctx context.Context, log *slog.Logger, backend session.Backend, getenv func(string) string) (*dsh.Runtime, error) {
	if backend == nil {
		root, err := cfg.SessionsRoot(getenv)
		if err != nil {
			return nil, err
		}
		backend = jsonl.New(root)
	}
	rt, err := dsh.New(dsh.Options{Logger: log, Backend: backend, Persona: cfg.Persona})
	if err != nil {
		return nil, err
	}
	for _, p := range cfg.Providers {
		m, err := openai.New(openai.Config{Provider: p.Name, BaseURL: p.BaseURL, APIKeyEnv: p.APIKeyEnv, Model: p.Model,
			MaxTokens: p.MaxTokens, IdleTimeout: p.IdleTimeout, MaxRetries: p.MaxRetries, Getenv: getenv, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		if _, err := rt.LLM.Register(p.Name, m); err != nil {
			return nil, err
		}
	}
	if _, err := builtin.Register(rt.Tools, builtin.Options{BashTimeout: cfg.Tools.BashTimeout, OutputLimit: cfg.Tools.OutputLimit}); err != nil {
		return nil, err
	}
	return rt, nil
}
