//go:build temporal

package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
)

// A temporal provider is one block; its API key variable is a credential
// (taken out of the environment, its value redacted), and its block is
// checked with the file's lines.
func TestTemporalKind(t *testing.T) {
	vars := map[string]string{"DEEPSEEK_API_KEY": "sk-ds-1", "TEMPORAL_API_KEY": "tk-secret-42"}
	cfg, err := config.Parse("dsh.yaml", []byte(`subagents:
  providers:
    - name: fleet
      kind: temporal
      temporal:
        hostPort: acme.tmprl.cloud:7233
        namespace: acme.a1b2c
        apiKeyEnv: TEMPORAL_API_KEY
        heartbeatTimeout: 20s
        readyTimeout: 1m
  tools:
    - provider: fleet
      toolName: subagent_fleet
`), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.CredentialEnv(env(vars)); !slices.Contains(got, "TEMPORAL_API_KEY") {
		t.Errorf("CredentialEnv = %v, lacks TEMPORAL_API_KEY", got)
	}
	if got := cfg.Credentials(env(vars)); !slices.Contains(got, "tk-secret-42") {
		t.Errorf("Credentials lack the Temporal API key")
	}
	for yaml, want := range map[string]string{
		"      temporal: {heartbeatTimeout: 2s, heartbeatInterval: 5s}\n": "line 5: subagents.providers[0].temporal.heartbeatInterval: must be at most half of heartbeatTimeout",
		"      temporal: {termGrace: 1s}\n":                               "temporal.eofGrace: eofGrace and termGrace do not apply",
		"      temporal: {certFile: c.pem}\n":                             "temporal.certFile: certFile and keyFile go together",
		"      temporal: {maxResumes: -1}\n":                              "temporal.maxResumes: must not be negative",
		"      temporal: {hostport: x}\n":                                 `unknown field "hostport"`,
	} {
		_, err := config.Parse("dsh.yaml", []byte("subagents:\n  providers:\n    - name: fleet\n      kind: temporal\n"+yaml), env(vars))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
