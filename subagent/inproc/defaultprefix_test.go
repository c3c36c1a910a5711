package inproc_test

import (
	"bytes"
	"context"
	"encoding/json"
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

// chatTemplate renders a chat-completions request body as a chat template
// lays it out for the model, keeping the bytes the adapter sent: the system
// message, the tools, then the other messages. A provider's prompt cache
// reuses a byte prefix of it. It also returns where each message after the
// system one starts.
func chatTemplate(t *testing.T, body []byte) (out []byte, starts []int) {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var first struct {
		Role string `json:"role"`
	}
	if len(req.Messages) == 0 || json.Unmarshal(req.Messages[0], &first) != nil || first.Role != "system" {
		t.Fatalf("the request does not open with a system message: %.200s", body)
	}
	var b bytes.Buffer
	b.Write(req.Messages[0])
	b.WriteByte('\n')
	b.Write(req.Tools)
	for _, m := range req.Messages[1:] {
		b.WriteByte('\n')
		starts = append(starts, b.Len())
		b.Write(m)
	}
	return b.Bytes(), starts
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// With the shipped defaults (JSONL sessions, continuable spawn and fork,
// the control tools mounted, so that continuable children can report), a
// fork child's first request, as the OpenAI-compatible adapter sends it,
// is the parent's delegating request up to the child's own first message
// (at least 95 % of its bytes), and a spawn child's shares at least 90 %
// with the request that delegated it. report, which only a child can use,
// must not change the shared prefix.
func TestDefaultChildrenKeepTheParentsPrefix(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string][]byte{} // what → request body
	keep := func(what string, r llmtest.Request) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := bodies[what]; !ok {
			bodies[what] = r.Body
		}
	}
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && strings.Contains(r.LastUser, "fork task"):
			keep("fork child", r)
			return llmtest.Reply{Text: "the chapter is consistent"}
		case r.Child:
			keep("spawn child", r)
			return llmtest.Reply{Text: "summarised"}
		case r.LastUser == "read the chapter" && len(r.ToolResults) == 0:
			return llmtest.Reply{Reasoning: "read it", ToolCall: &llmtest.ToolCall{Name: "read_file", Arguments: `{"path":"chapter.txt"}`}}
		case r.LastUser == "read the chapter":
			return llmtest.Reply{Text: "read"}
		}
		switch len(r.ToolResults) { // the second turn: a fork, then a spawn
		case 1:
			keep("parent of the fork", r)
			return llmtest.Reply{Reasoning: "a fork", ToolCall: &llmtest.ToolCall{Name: "subagent_fork", Arguments: `{"description":"review","prompt":"fork task"}`}}
		case 2:
			keep("parent of the spawn", r)
			return llmtest.Reply{Reasoning: "a helper", ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"sum","prompt":"spawn task"}`}}
		}
		return llmtest.Reply{Text: "done"}
	})
	home, cwd := t.TempDir(), t.TempDir()
	chapter := strings.Repeat("The chapter goes on about prompt caches and their prefixes.\n", 200) // 12 KB
	if err := os.WriteFile(filepath.Join(cwd, "chapter.txt"), []byte(chapter), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		return map[string]string{"DEEPSEEK_BASE_URL": srv.URL, "DEEPSEEK_API_KEY": "sk-loopback", "DSH_HOME": home, "HOME": home}[k]
	}
	cfg := config.Default(getenv)
	ctx := context.Background()
	rt, err := cfg.Build(ctx, nil, nil, getenv) // the JSONL store under DSH_HOME, as dsh run has it
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	if !rt.Subagents.CanContinue("spawn") || !rt.Subagents.CanContinue("fork") {
		t.Fatal("the default runtime's spawn and fork are not continuable")
	}
	a, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: cwd, Options: cfg.Agent})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Tools().Has("send_message") {
		t.Fatal("the default runtime has no control tools")
	}
	for _, prompt := range []string{"read the chapter", "have a fork review it and a helper summarise it"} {
		end, err := a.Run(ctx, content.UserText(prompt))
		if err != nil || end.Reason.Kind != session.EndCompleted {
			t.Fatalf("turn %q: %+v %v", prompt, end.Reason, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, what := range []string{"fork child", "spawn child", "parent of the fork", "parent of the spawn"} {
		if bodies[what] == nil {
			t.Fatalf("no request of the %s", what)
		}
	}

	parent, _ := chatTemplate(t, bodies["parent of the fork"])
	fork, starts := chatTemplate(t, bodies["fork child"])
	own := starts[len(starts)-1] // the fork child's first message of its own
	if !bytes.HasPrefix(parent, fork[:own]) {
		n := commonPrefix(parent, fork)
		t.Errorf("the fork child's first request up to its own message (%d bytes) is not a prefix of its parent's; they part at byte %d: %q vs %q",
			own, n, fork[n:min(n+80, len(fork))], parent[n:min(n+80, len(parent))])
	}
	if share := float64(commonPrefix(parent, fork)) / float64(len(fork)); share < 0.95 {
		t.Errorf("%.1f %% of the fork child's first request is a prefix of its parent's, want ≥ 95 %%", 100*share)
	}

	parent, _ = chatTemplate(t, bodies["parent of the spawn"])
	spawn, _ := chatTemplate(t, bodies["spawn child"])
	if share := float64(commonPrefix(parent, spawn)) / float64(len(spawn)); share < 0.90 {
		n := commonPrefix(parent, spawn)
		t.Errorf("%.1f %% of the spawn child's first request is a prefix of its parent's, want ≥ 90 %%; they part at %q vs %q",
			100*share, spawn[n:min(n+80, len(spawn))], parent[n:min(n+80, len(parent))])
	}
}
