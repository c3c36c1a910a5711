package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/sandbox"
)

// tools.network is allow or deny; a server of dsh.yaml may set its own
// sandbox mode, and a project's .mcp.json may not.
func TestSandboxSettings(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte("tools: {network: deny}\nmcpServers:\n  npx: {command: npx, sandbox: full}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools.Network != sandbox.NetworkDeny || cfg.MCPServers["npx"].Sandbox != sandbox.Full {
		t.Fatalf("tools.network = %q, npx's sandbox = %q", cfg.Tools.Network, cfg.MCPServers["npx"].Sandbox)
	}
	for yaml, want := range map[string]string{
		"tools: {network: off}\n":                       "tools.network: unknown network setting",
		"mcpServers:\n  x: {command: x, sandbox: no}\n": "mcpServers.x.sandbox: unknown sandbox mode",
	} {
		if _, err := config.Parse("dsh.yaml", []byte(yaml), env(nil)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, err, want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte(`{"mcpServers": {"p": {"command": "sh", "sandbox": "full"}}}`), 0o600)
	got := cfg.WithProjectMCP(dir)
	if srv, ok := got.MCPServers["p"]; ok && srv.Sandbox != "" {
		t.Errorf("a project's .mcp.json set its server's sandbox: %q", srv.Sandbox)
	}
}
