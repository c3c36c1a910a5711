package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
)

func TestDoctor(t *testing.T) {
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "unused"} })
	home := t.TempDir()
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL, "PATH": ""}
	out, _, err := runCLI(t, env, "doctor")
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	for _, want := range []string{"ok   model route deepseek: DEEPSEEK_API_KEY set; " + srv.URL + " serves deepseek-flash",
		"ok   DSH_HOME: " + home + " is writable"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A retired model, a missing key, a missing program: one FAIL line each.
	cfg := filepath.Join(t.TempDir(), "dsh.yaml")
	os.WriteFile(cfg, []byte(`agent: {provider: deepseek}
models:
  - {name: deepseek, baseURL: `+srv.URL+`, apiKeyEnv: DEEPSEEK_API_KEY, model: deepseek-chat}
  - {name: other, baseURL: http://127.0.0.1:1/v1, apiKeyEnv: OTHER_KEY, model: m}
subagents:
  providers:
    - name: cx
      kind: codex
      codex: {command: dsh-no-such-codex}
    - name: self
      kind: acp
      acp: {command: self}
`), 0o600)
	out, _, err = runCLI(t, env, "--config", cfg, "doctor")
	if err == nil || !strings.Contains(err.Error(), "3 of 6 checks failed") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	for _, want := range []string{
		`FAIL model route deepseek: ` + srv.URL + ` does not list model "deepseek-chat"; it serves: deepseek-flash, deepseek-v4-flash, deepseek-v4-pro`,
		"FAIL model route other: OTHER_KEY is not set",
		"FAIL subagent provider cx (codex): dsh-no-such-codex is not on PATH; install it with: npm install -g @openai/codex",
		"ok   subagent provider self (acp): runs this dsh",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// dsh run with its defaults against the loopback server that enforces
// DeepSeek's rules: the reasoning is shown on stderr as reasoning, the
// answer on stdout.
func TestRunShowsReasoning(t *testing.T) {
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Reasoning: "weighing it", Text: "the answer"}
	})
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	out, errOut, err := runCLI(t, env, "run", "--cwd", t.TempDir(), "why?")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if strings.TrimSpace(out) != "the answer" || !strings.Contains(errOut, "thinking: weighing it\n") {
		t.Fatalf("stdout %q, stderr %q", out, errOut)
	}
}
