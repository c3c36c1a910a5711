package config_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/session"
)

// TestDeepSeekDefaults runs dsh's default configuration (no model named)
// against the loopback server that enforces DeepSeek's documented rules: a
// multi-step tool-calling turn whose middle step has no reasoning, a
// foreground spawn child, a fork child, and a follow-up turn whose history
// holds every tool-call turn, with thinking on (the default) and off.
func TestDeepSeekDefaults(t *testing.T) {
	for _, thinking := range []string{"", "disabled"} {
		t.Run("thinking="+thinking, func(t *testing.T) {
			var mu sync.Mutex
			var seen []llmtest.Request
			srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
				mu.Lock()
				seen = append(seen, r)
				mu.Unlock()
				return deepSeekScript(r)
			})
			getenv := env(map[string]string{"DEEPSEEK_BASE_URL": srv.URL, "DEEPSEEK_API_KEY": "sk-loopback", "DSH_HOME": t.TempDir()})
			cfg := config.Default(getenv)
			if thinking != "" {
				path := filepath.Join(t.TempDir(), "dsh.yaml")
				// A route named deepseek tunes the built-in one: its URL still
				// comes from DEEPSEEK_BASE_URL.
				yaml := fmt.Sprintf("models:\n  - name: deepseek\n    thinking: %s\n    reasoningEffort: high\n", thinking)
				if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
					t.Fatal(err)
				}
				var err error
				if cfg, err = config.Load(path, getenv); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			rt, err := cfg.Build(ctx, nil, session.NewMemoryBackend(), getenv)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(ctx)
			a, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: t.TempDir(), Options: cfg.Agent})
			if err != nil {
				t.Fatal(err)
			}
			for _, turn := range []struct{ prompt, answer string }{{"start", "all done"}, {"follow up", "ok"}} {
				end, err := a.Run(ctx, content.UserText(turn.prompt))
				if err != nil {
					t.Fatal(err)
				}
				if end.Reason.Kind != session.EndCompleted {
					t.Fatalf("turn %q ended %+v (error %+v)", turn.prompt, end.Reason, end.Reason.Error)
				}
				if got := content.JoinText(a.Session().Messages()[len(a.Session().Messages())-1].Content); got != turn.answer {
					t.Errorf("turn %q answered %q, want %q", turn.prompt, got, turn.answer)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 8 { // parent 4 steps, spawn child 2, fork child 1, follow-up 1
				t.Errorf("%d model requests, want 8", len(seen))
			}
			for _, r := range seen {
				if r.Model != "deepseek-flash" || r.Thinking != (thinking == "") || r.MaxTokens != 65536 {
					t.Errorf("request model %q thinking %v max_tokens %d", r.Model, r.Thinking, r.MaxTokens)
				}
			}
		})
	}
}

// deepSeekScript answers the parent, the spawn child and the fork child of
// TestDeepSeekDefaults by the last user message and the tool results so far.
func deepSeekScript(r llmtest.Request) llmtest.Reply {
	results := len(r.ToolResults)
	switch {
	case strings.Contains(r.LastUser, "child task"):
		if results == 0 {
			return llmtest.Reply{Reasoning: "the child plans", ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo child"}`}}
		}
		return llmtest.Reply{Text: "child done"}
	case strings.Contains(r.LastUser, "fork task"):
		return llmtest.Reply{Reasoning: "the fork thinks", Text: "fork done"}
	case r.LastUser == "follow up":
		return llmtest.Reply{Reasoning: "recall", Text: "ok"}
	}
	switch results {
	case 0:
		return llmtest.Reply{Reasoning: "list first", ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo one"}`}}
	case 1: // no reasoning at all on this tool-call step
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"child","prompt":"child task"}`}}
	case 2:
		return llmtest.Reply{Reasoning: "fork next", ToolCall: &llmtest.ToolCall{Name: "subagent_fork", Arguments: `{"description":"fork","prompt":"fork task"}`}}
	}
	return llmtest.Reply{Text: "all done"}
}
