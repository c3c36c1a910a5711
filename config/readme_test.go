package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/sandbox"
)

// The README's configuration example is valid.
func TestREADMEExampleParses(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block in the README")
	}
	cfg, err := config.Parse("README.md", []byte(example), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools.Sandbox != sandbox.WorkspaceWrite {
		t.Fatalf("tools.sandbox = %q", cfg.Tools.Sandbox)
	}
}

func TestSandboxModeIsChecked(t *testing.T) {
	_, err := config.Parse("dsh.yaml", []byte("tools: {sandbox: wide-open}\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "line 1: tools.sandbox: unknown sandbox mode") {
		t.Fatalf("err = %v", err)
	}
}

// The credentials a configuration uses: every route's key variable,
// whatever its name, and the default route's base URL when it carries a
// secret; their values, and the secret parts of the URLs.
func TestCredentials(t *testing.T) {
	vars := map[string]string{"LLM_BEARER": "sk-bearer-123456", "DEEPSEEK_API_KEY": "sk-ds-123456",
		"DEEPSEEK_BASE_URL": "https://u:pw-secret-1@api.example/v1"}
	cfg, err := config.Parse("dsh.yaml", []byte(`models:
  - name: bearer
    baseURL: https://h.example/v1?key=qk-secret-99
    apiKeyEnv: LLM_BEARER
`), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.CredentialEnv(env(vars)), " "); got != "DEEPSEEK_API_KEY ANTHROPIC_API_KEY OPENAI_API_KEY OPENROUTER_API_KEY LLM_BEARER DEEPSEEK_BASE_URL" {
		t.Fatalf("CredentialEnv = %s", got)
	}
	delete(vars, "DEEPSEEK_BASE_URL")
	if got := strings.Join(cfg.CredentialEnv(env(vars)), " "); got != "DEEPSEEK_API_KEY ANTHROPIC_API_KEY OPENAI_API_KEY OPENROUTER_API_KEY LLM_BEARER" {
		t.Fatalf("CredentialEnv without a secret URL = %s", got)
	}
	got := strings.Join(cfg.Credentials(env(vars)), " ")
	for _, want := range []string{"sk-bearer-123456", "sk-ds-123456", "pw-secret-1", "qk-secret-99"} {
		if !strings.Contains(got, want) {
			t.Errorf("Credentials = %s, lacks %s", got, want)
		}
	}
}
