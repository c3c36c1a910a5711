package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// A model that calls a tool forever: dsh run ends by itself at the step
// cap, says so, and still names the session and what it spent.
func TestRunStopsAtTheStepCap(t *testing.T) {
	var requests atomic.Int32
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		requests.Add(1)
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "glob", Arguments: `{"pattern":"*"}`}}
	})
	for _, tc := range []struct {
		args  []string
		steps int32
	}{{nil, 100}, {[]string{"--max-steps", "7"}, 7}} {
		requests.Store(0)
		env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
		_, errOut, err := runCLI(t, env, append([]string{"run", "--cwd", t.TempDir(), "loop"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), "step cap (max-steps)") {
			t.Fatalf("err = %v", err)
		}
		if requests.Load() != tc.steps {
			t.Errorf("%d model requests, want %d", requests.Load(), tc.steps)
		}
		id := regexp.MustCompile(`\[session ([0-9a-f-]{36}) · tokens in \d+`).FindStringSubmatch(errOut)
		if id == nil {
			t.Fatalf("no session line in stderr:\n%s", errOut)
		}
		if show, _, err := runCLI(t, env, "sessions", "show", id[1]); err != nil || !strings.Contains(show, "── end: max-steps") {
			t.Fatalf("sessions show: %v\n%s", err, show)
		}
	}
}

// A token budget stops a tree of three children that would run forever:
// each child ends with the budget stop reason, then the parent's turn that
// their notices open, and dsh run says why it stopped.
func TestBudgetStopsATree(t *testing.T) {
	var requests atomic.Int32
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		requests.Add(1)
		switch {
		case strings.HasPrefix(r.LastUser, "child"):
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "glob", Arguments: `{"pattern":"*"}`}}
		case len(r.ToolResults) < 3:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"worker","prompt":"child, loop forever","run_in_background":true}`}}
		}
		return llmtest.Reply{Text: "waiting for the workers"}
	})
	home := t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte("budget: {tokens: 200}\n"), 0o600)
	env := map[string]string{"DSH_HOME": home, "DSH_CONFIG": cfg, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	_, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "start three workers")
	if err == nil || !strings.Contains(err.Error(), "token budget (budget.tokens) is spent") {
		t.Fatalf("err = %v\n%s", err, errOut)
	}
	// Each request costs 5 tokens: the tree stops after 200/5 requests
	// (a few more were in flight), not after each agent's 100-step cap.
	if n := requests.Load(); n < 40 || n > 45 {
		t.Errorf("%d model requests, want about 40", n)
	}
	if n := strings.Count(errOut, "↳ spawn · worker · budget"); n != 3 {
		t.Errorf("%d children ended with the budget stop reason, want 3:\n%s", n, errOut)
	}
}

// The live-children cap refuses the next start with a tool error the model
// reads.
func TestLiveChildrenCap(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.LastUser == "child, wait":
			<-release // alive until the parent has tried a second start
			return llmtest.Reply{Text: "done waiting"}
		case len(r.ToolResults) < 2:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"waiter","prompt":"child, wait","run_in_background":true}`}}
		}
		once.Do(func() { close(release) })
		return llmtest.Reply{Text: "second start: " + r.ToolResults[1]}
	})
	home := t.TempDir()
	cfg := filepath.Join(home, "dsh.yaml")
	os.WriteFile(cfg, []byte("subagents:\n  maxLiveChildren: 1\n  providers: [{name: spawn}]\n  tools: [{provider: spawn}]\n"), 0o600)
	env := map[string]string{"DSH_HOME": home, "DSH_CONFIG": cfg, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "start two")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "second start: Error: subagent: the delegation tree already has 1 live children, its cap (subagents.maxLiveChildren)") {
		t.Fatalf("stdout %q\nstderr %s", out, errOut)
	}
}
