package claudecode_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/claudecode"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The interop tier runs the real Claude Code CLI (the pinned native
// binary) against a loopback Anthropic Messages API mock: keyless and
// offline.

// claudeBinary is the pinned native binary, or skips (fails under CI).
func claudeBinary(t *testing.T) string {
	return testpeers.Path(t, "node_modules/@anthropic-ai/claude-code-linux-x64/claude")
}

func realConfig(t *testing.T, bin string, m *llmtest.Anthropic) claudecode.Config {
	return claudecode.Config{Model: "mock-model", Options: childproc.Options{Command: bin,
		Env: map[string]string{"ANTHROPIC_BASE_URL": m.URL, "ANTHROPIC_API_KEY": "fake", "HOME": t.TempDir(),
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
			"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_MAX_RETRIES": "0"},
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 20 * time.Second, CancelGrace: 5 * time.Second, EOFGrace: 2 * time.Second, TermGrace: 2 * time.Second}}}
}

const authError = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`

func TestRealClaudeAnswer(t *testing.T) {
	bin := claudeBinary(t)
	checkNoChildren(t)
	m := llmtest.NewAnthropic(t, func(r llmtest.AnthropicRequest) llmtest.AnthropicReply {
		return llmtest.AnthropicReply{Text: "Hello from the mock: " + r.LastUser}
	})
	var rec recorder
	run := startWith(t, newProvider(t, realConfig(t, bin, m)), context.Background(), "say hello", rec.add)
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "Hello from the mock: say hello" {
		t.Fatalf("result %+v", res)
	}
	want := map[string]content.Usage{"claude-code/mock-model": {Input: 11, Output: 5, CacheRead: 3, CacheWrite: 2}}
	if !mapsEqual(res.Usage, want) {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if res.CostUSD <= 0 {
		t.Errorf("cost %v", res.CostUSD)
	}
	seen := m.Seen()
	if len(seen) != 1 || seen[0].APIKey != "fake" || seen[0].Model != "mock-model" || !seen[0].Stream || seen[0].LastUser != "say hello" {
		t.Errorf("the mock saw %+v", seen)
	}
	var text string
	for _, p := range rec.all() {
		if p.Kind == subagent.ProgressText {
			text += p.Text
		}
	}
	if text != "Hello from the mock: say hello" {
		t.Errorf("progress text %q", text)
	}
}

func TestRealClaude401IsAFailure(t *testing.T) {
	bin := claudeBinary(t)
	checkNoChildren(t)
	m := llmtest.NewAnthropic(t, func(llmtest.AnthropicRequest) llmtest.AnthropicReply {
		return llmtest.AnthropicReply{Status: http.StatusUnauthorized, Body: authError}
	})
	res := runToEnd(t, realConfig(t, bin, m), "say hello")
	if res.StopReason != subagent.Failed || len(res.Output) != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, s := range []string{`claude result "success" with is_error`, "API status 401", "exit status 1"} {
		if !strings.Contains(res.Diagnostic, s) {
			t.Errorf("diagnostic %q lacks %q", res.Diagnostic, s)
		}
	}
	if n := len(m.Seen()); n != 1 {
		t.Errorf("%d requests, want 1 (no retries)", n)
	}
}

func TestRealClaudeCancelDuringModelRequest(t *testing.T) {
	bin := claudeBinary(t)
	checkNoChildren(t)
	m := llmtest.NewAnthropic(t, func(llmtest.AnthropicRequest) llmtest.AnthropicReply { return llmtest.AnthropicReply{Hang: true} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := realConfig(t, bin, m)
	run := start(t, newProvider(t, cfg), ctx, "take your time")
	select {
	case <-m.Arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("no model request")
	}
	began := time.Now()
	cancel()
	res := subagenttest.Wait(t, run)
	if res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
	if d := time.Since(began); d >= cfg.CancelGrace {
		t.Errorf("settled after %s: the CLI ignored the interrupt", d)
	}
	subagenttest.Dispose(t, run)
	if err := noChildren(); err != nil {
		t.Fatal(err)
	}
}

func TestRealClaudePermissionRequests(t *testing.T) {
	bin := claudeBinary(t)
	for _, policy := range []string{claudecode.PermissionDeny, claudecode.PermissionPolicy} {
		t.Run(policy, func(t *testing.T) {
			checkNoChildren(t)
			a := subagenttest.ParentAgent(t)
			target := filepath.Join(a.Cwd(), "out.txt")
			m := llmtest.NewAnthropic(t, func(r llmtest.AnthropicRequest) llmtest.AnthropicReply {
				if len(r.ToolResults) == 0 {
					return llmtest.AnthropicReply{Text: "I will write the file.", ToolUse: &llmtest.AnthropicToolUse{ID: "toolu_01", Name: "Write",
						Input: map[string]any{"file_path": target, "content": "hello\n"}}}
				}
				return llmtest.AnthropicReply{Text: "tool said: " + r.ToolResults[0]}
			})
			cfg := realConfig(t, bin, m)
			cfg.PermissionMode, cfg.Permission = "default", policy
			var rec recorder
			run, err := newProvider(t, cfg).Start(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("write a file"),
				Parent: a, Depth: 1, Progress: rec.add})
			if err != nil {
				t.Fatal(err)
			}
			res := subagenttest.Wait(t, run)
			subagenttest.Dispose(t, run)
			out := content.JoinText(res.Output)
			_, statErr := os.Stat(target)
			switch policy {
			case claudecode.PermissionDeny:
				if res.StopReason != subagent.Completed || !strings.HasPrefix(out, "tool said: error: permission to use Write denied") || statErr == nil {
					t.Fatalf("result %+v, file: %v", res, statErr)
				}
			case claudecode.PermissionPolicy: // the parent's policy allows everything
				if res.StopReason != subagent.Completed || !strings.HasPrefix(out, "tool said: File created successfully") || statErr != nil {
					t.Fatalf("result %+v, file: %v", res, statErr)
				}
			}
			var call bool
			for _, p := range rec.all() {
				call = call || p.Kind == subagent.ProgressToolCall && p.Tool == "Write" && p.CallID == "toolu_01"
			}
			if !call {
				t.Errorf("no tool-call progress in %+v", rec.all())
			}
		})
	}
}

func TestRealClaudeConformance(t *testing.T) {
	bin := claudeBinary(t)
	m := llmtest.NewAnthropic(t, func(r llmtest.AnthropicRequest) llmtest.AnthropicReply {
		switch r.LastUser {
		case subagenttest.PromptHang:
			return llmtest.AnthropicReply{Hang: true}
		case subagenttest.PromptFail:
			return llmtest.AnthropicReply{Status: http.StatusUnauthorized, Body: authError}
		}
		return llmtest.AnthropicReply{Text: "done: " + r.LastUser}
	})
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return newProvider(t, realConfig(t, bin, m)), subagenttest.ParentAgent(t)
		},
		Leftovers: noChildren,
	})
}

// The real Claude Code continues a settled child's session in a new
// process: with a ConfigDir the session is kept, ResumeRun passes
// --resume, and the model's request holds the first turn. Without one, a
// resume is refused with NOT_RESUMABLE.
func TestRealClaudeResumesASession(t *testing.T) {
	bin := claudeBinary(t)
	checkNoChildren(t)
	m := llmtest.NewAnthropic(t, func(r llmtest.AnthropicRequest) llmtest.AnthropicReply {
		return llmtest.AnthropicReply{Text: "mock heard: " + r.LastUser}
	})
	cfg := realConfig(t, bin, m)
	cfg.ConfigDir = t.TempDir()
	p := newProvider(t, cfg)
	run := start(t, p, context.Background(), "say one")
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	session := run.(subagent.RemoteRun).RemoteSession()
	if res.StopReason != subagent.Completed || session == "" {
		t.Fatalf("first run %+v, session %q", res, session)
	}
	next, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("say two"), Parent: subagenttest.ParentAgent(t), Depth: 1}, session)
	if err != nil {
		t.Fatal(err)
	}
	res = subagenttest.Wait(t, next)
	subagenttest.Dispose(t, next)
	checkNoChildren(t)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "mock heard: say two" {
		t.Fatalf("resumed run %+v", res)
	}
	seen := m.Seen()
	last := seen[len(seen)-1]
	if !slices.Contains(last.UserTexts, "say one") || next.(subagent.RemoteRun).RemoteSession() != session {
		t.Errorf("the resumed request's user texts: %q (session %q)", last.UserTexts, next.(subagent.RemoteRun).RemoteSession())
	}
	cfg.ConfigDir = ""
	_, err = newProvider(t, cfg).ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: subagenttest.ParentAgent(t), Depth: 1}, session)
	if !errors.Is(err, subagent.ErrNotResumable) || !strings.Contains(err.Error(), "configDir") {
		t.Errorf("resume without a config dir: %v", err)
	}
}
