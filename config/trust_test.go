package config_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/trust"
)

// Load merges a folder's .mcp.json only when the folder is trusted, and
// not once it changed.
func TestLoadTrustsProjectMCP(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte(`{"mcpServers": {"srv": {"command": "srv"}}}`), 0o600)
	t.Chdir(dir)
	getenv := env(map[string]string{"DSH_HOME": home})
	load := func() []string {
		t.Helper()
		cfg, err := config.Load("", getenv)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(mapsKeys(cfg.MCPServers))
	}
	if got := load(); len(got) != 0 {
		t.Fatalf("an untrusted folder's servers loaded: %v", got)
	}
	if _, err := trust.Open(home).Trust(dir); err != nil {
		t.Fatal(err)
	}
	if got := load(); !slices.Equal(got, []string{"srv"}) {
		t.Fatalf("trusted: %v", got)
	}
	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte(`{"mcpServers": {"srv": {"command": "srv"}, "planted": {"command": "sh"}}}`), 0o600)
	if got := load(); len(got) != 0 {
		t.Fatalf("a changed file loaded: %v", got)
	}
	os.WriteFile(filepath.Join(home, trust.RecordFile), []byte("garbage"), 0o600)
	if _, err := config.Load("", getenv); err == nil || !strings.Contains(err.Error(), filepath.Join(home, trust.RecordFile)) {
		t.Errorf("a corrupt record: %v", err)
	}
}

// A project server that names a credential variable, anywhere, is left
// out with a warning naming the file, the server and the variable.
func TestProjectMCPRefusesCredentials(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte(`{"mcpServers": {
  "env":     {"command": "sh", "env": {"K": "${DEEPSEEK_API_KEY}"}},
  "args":    {"command": "sh", "args": ["-c", "echo ${GITHUB_TOKEN:-none}"]},
  "command": {"command": "${MY_LLM}/bin/srv"},
  "header":  {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${OPENAI_API_KEY}"}},
  "url":     {"type": "sse", "url": "http://127.0.0.1:1/mcp?p=${DB_PASSWORD}"},
  "pass":    {"command": "sh", "passEnv": ["AWS_SECRET_ACCESS_KEY"]},
  "own":     {"command": "sh", "env": {"DSH": "${DSH_HOME}"}},
  "fine":    {"command": "sh", "env": {"P": "${PATH}"}, "passEnv": ["LANG"]}
}}`), 0o600)
	cfg, err := config.Parse("dsh.yaml", []byte("models:\n  - {name: mine, baseURL: http://127.0.0.1:1, apiKeyEnv: MY_LLM, model: m}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.WithProjectMCP(dir)
	if names := slices.Sorted(mapsKeys(got.MCPServers)); !slices.Equal(names, []string{"fine"}) {
		t.Errorf("servers %v", names)
	}
	path := filepath.Join(dir, config.ProjectMCPFile)
	for server, v := range map[string]string{"env": "DEEPSEEK_API_KEY", "args": "GITHUB_TOKEN", "command": "MY_LLM", "header": "OPENAI_API_KEY",
		"url": "DB_PASSWORD", "pass": "AWS_SECRET_ACCESS_KEY", "own": "DSH_HOME"} {
		want := path + `: MCP server "` + server + `" left out: its `
		if !slices.ContainsFunc(got.Warnings(), func(w string) bool {
			return strings.HasPrefix(w, want) && strings.Contains(w, "credential variable "+v+",") && strings.Contains(w, "dsh.yaml")
		}) {
			t.Errorf("no warning for %s (%s) in %q", server, v, got.Warnings())
		}
	}
}

// .mcp.json is JSON: a YAML alias bomb is refused at once.
func TestProjectMCPAliasBomb(t *testing.T) {
	dir := t.TempDir()
	bomb := "mcpServers:\n  a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i < 9; i++ {
		bomb += strings.Replace("  aN: &aN [*aP, *aP, *aP, *aP, *aP, *aP, *aP, *aP, *aP]\n", "N", string(rune('0'+i)), 2)
		bomb = strings.Replace(bomb, "aP", "a"+string(rune('0'+i-1)), 9)
	}
	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte(bomb), 0o600)
	start := time.Now()
	w := config.Default(env(nil)).WithProjectMCP(dir).Warnings()
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v", took)
	}
	if len(w) != 1 || !strings.Contains(w[0], ".mcp.json ignored: line 1: not JSON") {
		t.Errorf("warnings %q", w)
	}
}

// LoadAgents reads a project's definitions only when the project is
// trusted; a trusted one that replaces a built-in is a warning.
func TestLoadAgentsTrustsProject(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".claude", "agents"), 0o755)
	path := filepath.Join(dir, ".claude", "agents", "explore.md")
	os.WriteFile(path, []byte("---\nname: explore\ndescription: the project's\n---\nProject explorer.\n"), 0o644)
	getenv := env(map[string]string{"DSH_HOME": home})
	cfg := config.Default(getenv)
	cfg.ProjectDir = dir
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	explore := func() (string, []string) {
		t.Helper()
		c, warnings, err := cfg.LoadAgents(rt, getenv)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := c.Get("explore")
		return d.Source.Scope, warnings
	}
	if scope, w := explore(); scope != "built-in" || len(w) != 0 {
		t.Errorf("untrusted: explore from %s, warnings %q", scope, w)
	}
	if _, err := trust.Open(home).Trust(dir); err != nil {
		t.Fatal(err)
	}
	scope, w := explore()
	if scope != "project" || len(w) != 1 || !strings.Contains(w[0], "the project's agent definition explore ("+path+") replaces the built-in explore") {
		t.Errorf("trusted: explore from %s, warnings %q", scope, w)
	}
	p, err := cfg.Project(dir, getenv)
	if err != nil || p.State != trust.Trusted || len(p.Definitions) != 1 || p.Definitions[0].Replaces != "the built-in explore" {
		t.Errorf("project %+v %v", p, err)
	}
}
