package llm

import "strings"

// ContextWindow returns the context window, in tokens, of model by the
// built-in table, or 0 when the model is not in it. An OpenRouter-style
// "vendor/model" name is looked up by its model part; case is ignored.
func ContextWindow(model string) int {
	// windows is the built-in table of context windows, in tokens, by model
	// name prefix; the longest prefix that matches wins. It covers the default
	// models of the built-in routes (DeepSeek, OpenAI, Anthropic, and
	// OpenRouter's vendor/model names, whose vendor part is dropped).
	windows := [...]struct {
		prefix string
		tokens int
	}{
		{"deepseek-flash", 1_000_000}, // DeepSeek-V4.1-Flash
		{"deepseek-chat", 128_000},
		{"deepseek-reasoner", 128_000},
		{"deepseek-v3", 128_000},
		{"deepseek", 128_000},
		{"gpt-5", 400_000},
		{"gpt-4.1", 1_047_576},
		{"gpt-4o", 128_000},
		{"gpt-4-turbo", 128_000},
		{"o1", 200_000},
		{"o3", 200_000},
		{"o4-mini", 200_000},
		{"claude-", 200_000},
		{"gemini-2.5", 1_048_576},
		{"gemini-", 1_048_576},
		{"llama-3.1", 128_000},
		{"llama-3.3", 128_000},
		{"qwen3", 128_000},
	}
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	best, n := 0, 0
	for _, w := range windows {
		if strings.HasPrefix(m, w.prefix) && len(w.prefix) > best {
			best, n = len(w.prefix), w.tokens
		}
	}
	return n
}

// SetContextWindow records the context window of the model behind
// provider (tokens; 0 forgets it, so that the built-in table answers).
func (r *Registry) SetContextWindow(provider string, tokens int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tokens <= 0 {
		delete(r.windows, provider)
		return
	}
	if r.windows == nil {
		r.windows = map[string]int{}
	}
	r.windows[provider] = tokens
}

// ContextWindow returns the context window, in tokens, of a request to
// model on provider: the provider's own (SetContextWindow), else the
// built-in table's for model, else 0 (unknown).
func (r *Registry) ContextWindow(provider, model string) int {
	r.mu.RLock()
	n := r.windows[provider]
	r.mu.RUnlock()
	if n > 0 {
		return n
	}
	return ContextWindow(model)
}
