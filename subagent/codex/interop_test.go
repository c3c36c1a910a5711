package codex_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// codexBinary is the native binary of the pinned @openai/codex package.
const codexBinary = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

// realConfig runs the pinned codex against m, offline and keyless, with a
// fresh CODEX_HOME and HOME.
func realConfig(t *testing.T, m *llmtest.Responses) codex.Config {
	bin := testpeers.Path(t, codexBinary)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(llmtest.CodexConfig(m.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	return codex.Config{CodexHome: home, Options: childproc.Options{Command: bin,
		Env:           map[string]string{"HOME": t.TempDir(), "MOCK_API_KEY": "fake", "NO_PROXY": "127.0.0.1"},
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 10 * time.Second, CancelGrace: 3 * time.Second, EOFGrace: time.Second, TermGrace: time.Second}}}
}

func TestRealCodexAnswers(t *testing.T) {
	m := llmtest.NewResponses(t)
	p := newProvider(t, realConfig(t, m))
	var mu sync.Mutex
	var streamed strings.Builder
	req := request(t, "say PONG")
	req.Progress = func(pr subagent.Progress) {
		if pr.Kind == subagent.ProgressText {
			mu.Lock()
			streamed.WriteString(pr.Text)
			mu.Unlock()
		}
	}
	run := start(t, p, context.Background(), req)
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
	want := llmtest.ResponsesAnswer("say PONG")
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != want {
		t.Fatalf("result %+v", res)
	}
	if n, auth := m.Stats(); n != 1 || auth[0] != "Bearer fake" {
		t.Errorf("%d model requests, auth %q", n, auth)
	}
	if u := res.Usage["codex/mock-model"]; u != (content.Usage{Input: 8, CacheRead: 3, Output: 5, Reasoning: 1}) {
		t.Errorf("usage %+v", res.Usage)
	}
	mu.Lock()
	defer mu.Unlock()
	if streamed.String() != want {
		t.Errorf("streamed %q", streamed.String())
	}
}

func TestRealCodexModelFailure(t *testing.T) {
	m := llmtest.NewResponses(t)
	run := start(t, newProvider(t, realConfig(t, m)), context.Background(), request(t, "please fail"))
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
	if res.StopReason != subagent.Failed || !strings.Contains(res.Diagnostic, "category other") ||
		!strings.Contains(res.Diagnostic, "the mock rejects this request") {
		t.Fatalf("result %+v", res)
	}
}

func TestRealCodexCancelDuringModelRequest(t *testing.T) {
	m := llmtest.NewResponses(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := start(t, newProvider(t, realConfig(t, m)), ctx, request(t, "please hang"))
	select {
	case <-m.Hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("the model request never came")
	}
	t0 := time.Now()
	cancel()
	res := subagenttest.Wait(t, run)
	t.Logf("aborted %s after the cancel", time.Since(t0))
	subagenttest.Dispose(t, run)
	checkNoChildren(t)
	if res.StopReason != subagent.Aborted {
		t.Fatalf("result %+v", res)
	}
}

func TestRealCodexConformance(t *testing.T) {
	m := llmtest.NewResponses(t)
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return newProvider(t, realConfig(t, m)), subagenttest.ParentAgent(t)
		},
		Leftovers: noChildren,
	})
}

// The real Codex continues a settled child's thread in a new process:
// ResumeRun resumes the thread kept in CODEX_HOME, and the model's request
// holds the first turn. Without a CodexHome, a resume is refused with
// NOT_RESUMABLE, saying how to allow it.
func TestRealCodexResumesAThread(t *testing.T) {
	m := llmtest.NewResponses(t)
	cfg := realConfig(t, m)
	p := newProvider(t, cfg)
	run := start(t, p, context.Background(), request(t, "say one"))
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	thread := run.(subagent.RemoteRun).RemoteSession()
	if res.StopReason != subagent.Completed || thread == "" {
		t.Fatalf("first run %+v, thread %q", res, thread)
	}
	next, err := p.ResumeRun(context.Background(), request(t, "say two"), thread)
	if err != nil {
		t.Fatal(err)
	}
	res = subagenttest.Wait(t, next)
	subagenttest.Dispose(t, next)
	checkNoChildren(t)
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != llmtest.ResponsesAnswer("say two") {
		t.Fatalf("resumed run %+v", res)
	}
	users := m.UserTexts()
	if len(users) != 2 || !slices.Contains(users[1], "say one") || next.(subagent.RemoteRun).RemoteSession() != thread {
		t.Errorf("the resumed request's user texts: %q", users)
	}
	cfg.CodexHome = ""
	_, err = newProvider(t, cfg).ResumeRun(context.Background(), request(t, "x"), thread)
	if !errors.Is(err, subagent.ErrNotResumable) || !strings.Contains(err.Error(), "codexHome") {
		t.Errorf("resume without a home: %v", err)
	}
}
