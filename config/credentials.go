package config

import (
	"slices"

	"github.com/dsh-go/dsh/internal/secret"
)

// baseURLEnv overrides the DeepSeek route's endpoint (see BuiltinRoutes).
const baseURLEnv = "DEEPSEEK_BASE_URL"

// CredentialEnv lists the variables that hold credentials under cfg: every
// model route's apiKeyEnv, those of the subagent providers' blocks (a
// temporal provider's apiKeyEnv), and a built-in route's base-URL
// variable (DEEPSEEK_BASE_URL, …) when its URL carries a secret
// (user-info, or a key in its query). dsh takes them out of its
// environment at start-up (see internal/secret).
func (cfg Config) CredentialEnv(getenv func(string) string) []string {
	var names []string
	for _, name := range cfg.keyEnv() {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, r := range BuiltinRoutes() {
		if len(secret.URLSecrets(getenv(r.BaseURLEnv))) > 0 {
			names = append(names, r.BaseURLEnv)
		}
	}
	return names
}

// Credentials lists the secret values cfg uses: the routes' keys and the
// secret parts of their base URLs. They are redacted from tool results,
// session files and logs.
func (cfg Config) Credentials(getenv func(string) string) []string {
	var values []string
	for _, name := range cfg.keyEnv() {
		values = append(values, getenv(name))
	}
	for _, m := range cfg.Models {
		values = append(values, secret.URLSecrets(m.BaseURL)...)
	}
	return values
}

// keyEnv lists the variables naming keys: the routes' apiKeyEnv, then the
// providers' credentials.
func (cfg Config) keyEnv() []string {
	var names []string
	for _, m := range cfg.Models {
		if m.APIKeyEnv != "" {
			names = append(names, m.APIKeyEnv)
		}
	}
	if cfg.Subagents == nil {
		return names
	}
	for _, p := range cfg.Subagents.Providers {
		if k, ok := cfg.kindOf(p); ok && k.Credentials != nil {
			names = append(names, k.Credentials(p.block)...)
		}
	}
	return names
}
