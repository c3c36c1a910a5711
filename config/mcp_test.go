package config_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/session"
)

func TestMCPServers(t *testing.T) {
	cfg, err := config.Parse("dsh.yaml", []byte(`
mcpServers:
  files:
    command: npx
    args: [-y, "@modelcontextprotocol/server-filesystem", /tmp]
    env: {TOKEN: "${FILES_TOKEN}"}
    passEnv: [HOME]
    startTimeout: 10s
  remote:
    url: https://example.com/mcp
    headers: {Authorization: "Bearer ${REMOTE_KEY}"}
    callTimeout: 2m
permissions:
  tools:
    mcp__remote__*: ask
    mcp__files__write_file: deny
subagents:
  providers: [{name: spawn}]
  tools:
    - provider: spawn
      toolFilter: {allow: [read_file, "mcp__files__*"], deny: [mcp__files__write_file]}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	files, remote := cfg.MCPServers["files"], cfg.MCPServers["remote"]
	if files.Transport() != mcptool.TypeStdio || files.Command != "npx" || len(files.Args) != 3 || files.StartTimeout != 10*time.Second ||
		remote.Transport() != mcptool.TypeHTTP || remote.Headers["Authorization"] != "Bearer ${REMOTE_KEY}" || remote.CallTimeout != 2*time.Minute {
		t.Fatalf("servers %+v", cfg.MCPServers)
	}
	// Building starts nothing: the servers start with the first top-level
	// agent, and stop when the runtime closes.
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(rt.Tools.Names(), func(n string) bool { return strings.HasPrefix(n, "mcp__") }) {
		t.Errorf("tools before any agent: %v", rt.Tools.Names())
	}
	if !rt.Events.Wants(agent.Created{}.EventType()) {
		t.Error("nothing starts the servers")
	}
	rt.Close(context.Background())

	// Without servers, nothing listens.
	plain, err := config.Default(env(nil)).Build(context.Background(), nil, session.NewMemoryBackend(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(context.Background())
	if plain.Events.Wants(agent.Created{}.EventType()) {
		t.Error("a runtime without MCP servers pays for them")
	}
}

// The resource tools can be named in permissions (say, to ask before a
// resource is read).
func TestResourceToolsInPermissions(t *testing.T) {
	if _, err := config.Parse("dsh.yaml", []byte("permissions:\n  tools:\n    read_mcp_resource: ask\n    list_mcp_resources: allow\n"), env(nil)); err != nil {
		t.Error(err)
	}
}

func TestMCPServerErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"mcpServers:\n  web:\n    type: ws\n    url: ws://x\n", `line 3: mcpServers.web.type: want stdio, http or sse, got "ws"`},
		{"mcpServers:\n  web:\n    url: ftp://x\n", `line 3: mcpServers.web.url: want an http:// or https:// URL`},
		{"mcpServers:\n  x:\n    args: [a]\n", `line 3: mcpServers.x.command: is required`},
		{"mcpServers:\n  x:\n    command: c\n    args: notalist\n", `line 4: mcpServers.x.args: want a list`},
		{"mcpServers:\n  x:\n    command: c\n    startTimeout: soon\n", `line 4: mcpServers.x.startTimeout: want a duration`},
		{"mcpServers:\n  x:\n    command: c\n    comand: d\n", `unknown field "comand"`},
		{"mcpServers:\n  a__b:\n    command: c\n", `mcpServers.a__b: a server name must not contain "__"`},
	} {
		_, err := config.Parse("dsh.yaml", []byte(tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// A project's .mcp.json (Claude Code's file) adds its servers; dsh.yaml's
// win; a block dsh cannot use is left out with a warning naming the line;
// projectMCP: false turns the file off.
func TestProjectMCPFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte(`{
  "mcpServers": {
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": {}},
    "remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Tenant": "${TENANT:-me}"}, "oauth": {"clientId": "x"}},
    "mine": {"command": "from-the-project"},
    "broken": {"type": "http"},
    "dsh": {"command": "dsh", "args": ["mcp"]},
    "GSD-2 Code": {"type": "http", "url": "https://example.com/gsd", "headersHelper": "print-headers"}
  }
}`), 0o600)
	cfg, err := config.Parse("dsh.yaml", []byte("mcpServers:\n  mine: {command: from-dsh-yaml}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.WithProjectMCP(dir)
	if names := slices.Sorted(mapsKeys(got.MCPServers)); !slices.Equal(names, []string{"GSD-2 Code", "files", "mine", "remote"}) {
		t.Fatalf("servers %v", names)
	}
	if got.MCPServers["GSD-2 Code"].HeadersHelper != "print-headers" {
		t.Errorf("headersHelper lost: %+v", got.MCPServers["GSD-2 Code"])
	}
	if got.MCPServers["mine"].Command != "from-dsh-yaml" || got.MCPSource("mine") != "" {
		t.Errorf("dsh.yaml's server lost: %+v", got.MCPServers["mine"])
	}
	if got.MCPServers["files"].Cwd != dir || got.MCPSource("files") != filepath.Join(dir, ".mcp.json") {
		t.Errorf("project server %+v from %q", got.MCPServers["files"], got.MCPSource("files"))
	}
	if w := got.Warnings(); len(w) != 2 || !strings.Contains(w[0], `MCP server "broken" left out: line 6: mcpServers.broken.url: is required`) ||
		!strings.Contains(w[1], `MCP server "dsh" left out: it is dsh itself (dsh mcp)`) {
		t.Errorf("warnings %q", w)
	}
	if _, ok := cfg.MCPServers["files"]; ok {
		t.Error("WithProjectMCP changed its receiver")
	}

	off, err := config.Parse("dsh.yaml", []byte("projectMCP: false\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if off = off.WithProjectMCP(dir); len(off.MCPServers) != 0 {
		t.Errorf("projectMCP: false read the file: %v", off.MCPServers)
	}

	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte("{\"mcpServers\": {\n  \"x\": {\"command\": 5, \"args\": \"no\"}}}"), 0o600)
	if w := cfg.WithProjectMCP(dir).Warnings(); len(w) != 1 || !strings.Contains(w[0], `MCP server "x" left out: line 2: mcpServers.x.command: want a string, got number`) {
		t.Errorf("warnings %q", w)
	}
	os.WriteFile(filepath.Join(dir, config.ProjectMCPFile), []byte(`{"mcpServers": `), 0o600)
	if w := cfg.WithProjectMCP(dir).Warnings(); len(w) != 1 || !strings.Contains(w[0], ".mcp.json ignored") {
		t.Errorf("warnings %q", w)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
