package llm_test

import (
	"testing"

	"github.com/dsh-go/dsh/llm"
)

func TestContextWindowTable(t *testing.T) {
	for model, want := range map[string]int{
		"deepseek-flash":             1_000_000,
		"deepseek-chat":              128_000,
		"gpt-4o-mini":                128_000,
		"gpt-4.1":                    1_047_576,
		"gpt-5-mini":                 400_000,
		"claude-sonnet-4-5-20250929": 200_000,
		"anthropic/claude-opus-4.1":  200_000,
		"openai/gpt-4o":              128_000,
		"GPT-4o":                     128_000,
		"my-local-model":             0,
		"":                           0,
	} {
		if got := llm.ContextWindow(model); got != want {
			t.Errorf("ContextWindow(%q) = %d, want %d", model, got, want)
		}
	}
}

// A route's own window wins over the table; an unset one falls back to it.
func TestRegistryContextWindow(t *testing.T) {
	r := llm.NewRegistry()
	if got := r.ContextWindow("openai", "gpt-4o"); got != 128_000 {
		t.Errorf("table: %d", got)
	}
	r.SetContextWindow("openai", 8192)
	if got := r.ContextWindow("openai", "gpt-4o"); got != 8192 {
		t.Errorf("route: %d", got)
	}
	r.SetContextWindow("openai", 0)
	if got := r.ContextWindow("openai", "local"); got != 0 {
		t.Errorf("unknown: %d", got)
	}
}
