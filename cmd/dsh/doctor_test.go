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
	for _, want := range []string{"ok   model route deepseek (dsh run uses it, model deepseek-flash): DEEPSEEK_API_KEY set; " + srv.URL + " serves deepseek-flash",
		"skip built-in model routes anthropic, openai, openrouter, local: not checked: their variables are not set (dsh doctor --route NAME checks one)",
		"ok   configuration: the built-in defaults (no dsh.yaml; dsh config prints them)",
		"ok   DSH_HOME: " + home + " is writable"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A retired model, a missing key, a missing program: one FAIL line each.
	cfg := filepath.Join(t.TempDir(), "dsh.yaml")
	os.WriteFile(cfg, []byte(`agent: {route: deepseek}
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
	if err == nil || !strings.Contains(err.Error(), "3 of 8 checks failed") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	for _, want := range []string{
		`FAIL model route deepseek (dsh run uses it, model deepseek-chat): ` + srv.URL + ` does not list model "deepseek-chat"; it serves: deepseek-flash, deepseek-v4-flash, deepseek-v4-pro (set agent.model or models[].model in dsh.yaml, or pass -m MODEL to dsh run and dsh doctor)`,
		"FAIL model route other: OTHER_KEY is not set: export it to use this route",
		"FAIL subagent provider cx (codex): dsh-no-such-codex is not on PATH; install it with: npm install -g @openai/codex",
		"ok   subagent provider self (acp): runs this dsh",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// dsh doctor checks the model dsh run would ask for: agent.model, and -m
// and --route as dsh run takes them; an unknown route fails before
// anything is checked.
func TestDoctorChecksWhatRunUses(t *testing.T) {
	srv := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "unused"} })
	env := map[string]string{"DSH_HOME": t.TempDir(), "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL, "PATH": ""}
	cfg := filepath.Join(t.TempDir(), "dsh.yaml")
	os.WriteFile(cfg, []byte("agent: {model: deepseek-v4-pro}\n"), 0o600)
	out, _, err := runCLI(t, env, "--config", cfg, "doctor")
	if err != nil || !strings.Contains(out, "ok   model route deepseek (dsh run uses it, model deepseek-v4-pro): DEEPSEEK_API_KEY set; "+srv.URL+" serves deepseek-v4-pro") {
		t.Fatalf("agent.model: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, env, "--config", cfg, "doctor", "-m", "gpt-9")
	if err == nil || !strings.Contains(out, `FAIL model route deepseek (dsh run uses it, model gpt-9): `+srv.URL+` does not list model "gpt-9"`) {
		t.Fatalf("-m: %v\n%s", err, out)
	}
	_, _, err = runCLI(t, env, "doctor", "--route", "nosuch")
	if err == nil || !strings.Contains(err.Error(), `--route "nosuch": not a configured model route (the routes are deepseek, anthropic, openai, openrouter, local`) {
		t.Fatalf("--route nosuch: %v", err)
	}
	// No key at all: the FAIL line lists every route's variable.
	out, _, _ = runCLI(t, map[string]string{"DSH_HOME": t.TempDir(), "PATH": ""}, "doctor")
	if !strings.Contains(out, "FAIL model route deepseek (dsh run uses it, model deepseek-flash): no model key is set: export one of DEEPSEEK_API_KEY, ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY, DSH_LOCAL_BASE_URL") {
		t.Fatalf("no key:\n%s", out)
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
