package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/llm/openai"
	"github.com/dsh-go/dsh/session"
)

// A route's context window comes from the built-in table for its model,
// or from its contextWindow; agent.compactAt sets the share that starts a
// compaction.
func TestContextWindowAndCompactAt(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte(`
agent:
  compactAt: 0.6
models:
  - name: local
    baseURL: http://127.0.0.1:8080/v1
    model: qwen
    contextWindow: 32768
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.CompactAt != 0.6 {
		t.Errorf("compactAt = %v", cfg.Agent.CompactAt)
	}
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	if got := rt.LLM.ContextWindow("local", "qwen"); got != 32768 {
		t.Errorf("local window = %d", got)
	}
	if got := rt.LLM.ContextWindow("deepseek", ""); got != 1_000_000 || openai.DeepSeekModel != "deepseek-flash" {
		t.Errorf("deepseek window = %d (model %s)", got, openai.DeepSeekModel)
	}
	for yaml, want := range map[string]string{
		"agent:\n  compactAt: 1.5\n":                           "agent.compactAt",
		"agent:\n  compactAt: -1\n":                            "agent.compactAt",
		"models:\n  - name: deepseek\n    contextWindow: -5\n": "contextWindow",
	} {
		if _, err := config.Parse("dsh.yaml", []byte(yaml), env(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}
