package config_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
)

// With no configuration, the agent runs on the first built-in route whose
// variable is set, in the documented order, and says so.
func TestRoutePickedFromKeys(t *testing.T) {
	for _, tc := range []struct {
		vars        map[string]string
		route, mdl  string
		url, choice string
	}{
		{map[string]string{}, "deepseek", "deepseek-flash", "https://api.deepseek.com", "no model key is set"},
		{map[string]string{"OPENAI_API_KEY": "k", "OPENROUTER_API_KEY": "k"}, "openai", "gpt-5", "https://api.openai.com/v1", "OPENAI_API_KEY is set"},
		{map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}, "anthropic", "claude-sonnet-4-5", "http://127.0.0.1:9/", "ANTHROPIC_API_KEY is set"},
		{map[string]string{"DEEPSEEK_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, "deepseek", "deepseek-flash", "https://api.deepseek.com", "DEEPSEEK_API_KEY is set"},
		{map[string]string{"OPENROUTER_API_KEY": " "}, "deepseek", "deepseek-flash", "https://api.deepseek.com", "no model key"},
		{map[string]string{"DSH_LOCAL_BASE_URL": "http://127.0.0.1:8080/v1", "DSH_LOCAL_MODEL": "qwen3"}, "local", "qwen3", "http://127.0.0.1:8080/v1", "DSH_LOCAL_BASE_URL is set"},
	} {
		cfg := config.Default(env(tc.vars))
		if cfg.Agent.Provider != tc.route || cfg.Agent.Model != tc.mdl {
			t.Errorf("%v: route %s model %s, want %s %s", tc.vars, cfg.Agent.Provider, cfg.Agent.Model, tc.route, tc.mdl)
		}
		for _, m := range cfg.Models {
			if m.Name == tc.route && m.BaseURL != tc.url {
				t.Errorf("%v: %s at %s, want %s", tc.vars, m.Name, m.BaseURL, tc.url)
			}
		}
		if !strings.Contains(cfg.RouteChoice(), tc.choice) {
			t.Errorf("%v: RouteChoice %q lacks %q", tc.vars, cfg.RouteChoice(), tc.choice)
		}
	}
	// A file that names the route: no pick to report.
	cfg, err := config.Parse("dsh.yaml", []byte("agent: {route: openai}\n"), env(map[string]string{"ANTHROPIC_API_KEY": "k"}))
	if err != nil || cfg.Agent.Provider != "openai" || cfg.Agent.Model != "gpt-5" || cfg.RouteChoice() != "" {
		t.Fatalf("named route: %+v %q %v", cfg.Agent, cfg.RouteChoice(), err)
	}
}

// agent.route names the model route; agent.provider, its old name, still
// works with a warning; both at once is an error naming the line.
func TestRouteKeyAndItsOldName(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte("agent:\n  route: anthropic\n"), env(nil))
	if err != nil || cfg.Agent.Provider != "anthropic" || len(cfg.Warnings()) != 0 {
		t.Fatalf("route: %+v %q %v", cfg.Agent, cfg.Warnings(), err)
	}
	cfg, err = config.Parse("dsh.yaml", []byte("agent:\n  provider: openai\n"), env(nil))
	if err != nil || cfg.Agent.Provider != "openai" || len(cfg.Warnings()) != 1 || !strings.Contains(cfg.Warnings()[0], `old name of "route"`) {
		t.Fatalf("provider: %+v %q %v", cfg.Agent, cfg.Warnings(), err)
	}
	cfg, err = config.Parse("dsh.yaml", []byte("subagents:\n  providers: [{name: spawn}]\n  tools:\n    - provider: spawn\n      agentOptions: {route: openai, model: gpt-5-mini}\n"), env(nil))
	if err != nil || cfg.Subagents.Tools[0].AgentOptions.Provider != "openai" || len(cfg.Warnings()) != 0 {
		t.Fatalf("agentOptions.route: %v %q", err, cfg.Warnings())
	}
	_, err = config.Parse("dsh.yaml", []byte("agent:\n  route: openai\n  provider: deepseek\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "line 3: route and provider (its old name) are both set") {
		t.Fatalf("both: %v", err)
	}
	_, err = config.Parse("dsh.yaml", []byte("agent:\n  route: nowhere\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), `line 2: agent.route: "nowhere" is not a configured model route (the routes are deepseek, anthropic, openai, openrouter, local`) {
		t.Fatalf("unknown: %v", err)
	}
	_, err = config.Parse("dsh.yaml", []byte("models: [{name: x, baseURL: 'http://h/v1', api: grpc}]\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "models[0].api: want openai or anthropic") {
		t.Fatalf("api: %v", err)
	}
}

// The built-in routes' default models have prices, so usage lines show
// dollars; a route whose model is not its default one has none unless it
// sets one; a price block overrides.
func TestBuiltinPrices(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte(`models:
  - {name: openai, model: gpt-5-mini}
  - {name: openrouter, price: {input: 1, output: 2}}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for route, want := range map[string]bool{"deepseek": true, "anthropic": true, "openai": false, "openrouter": true, "local": false} {
		if _, ok := cfg.PriceOf(route); ok != want {
			t.Errorf("PriceOf(%s) = %v, want %v", route, ok, want)
		}
	}
	if p, _ := cfg.PriceOf("openrouter/any/model"); p.Input != 1 {
		t.Errorf("openrouter price %+v, want the file's for every model", p)
	}
	// Usage is keyed route/model: a built-in price is the listed model's only.
	for key, want := range map[string]bool{"deepseek/deepseek-flash": true, "deepseek/deepseek-v4-pro": false, "anthropic/claude-sonnet-4-5": true,
		"anthropic/claude-opus-4-1": false, "openai/gpt-5": true, "local/llama3.2": false} {
		if _, ok := cfg.PriceOf(key); ok != want {
			t.Errorf("PriceOf(%s) = %v, want %v", key, ok, want)
		}
	}
	p, _ := cfg.PriceOf("anthropic")
	if p.CacheWrite == 0 || p.Cost(usage(2_000_000, 0, 0, 1_000_000)) != p.Input+p.CacheWrite {
		t.Errorf("anthropic %+v: cache writes are not charged", p)
	}
}

func usage(in, cacheRead, out, cacheWrite int64) content.Usage {
	return content.Usage{Input: in, CacheRead: cacheRead, Output: out, CacheWrite: cacheWrite}
}
