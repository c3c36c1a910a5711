package config_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// An acp or codex provider's pool block is checked key by key, and the runtime's
// Close closes the pool: the provider refuses children after it.
func TestACPPool(t *testing.T) {
	for yaml, want := range map[string]string{
		"subagents:\n  providers:\n    - name: a\n      kind: acp\n      acp: {command: x, pool: {size: -1}}\n":         `line 5: subagents.providers[0].acp.pool.size: must not be negative (0 turns the pool off), got -1`,
		"subagents:\n  providers:\n    - name: a\n      kind: acp\n      acp: {command: x, pool: {idleTimeout: -1s}}\n": `subagents.providers[0].acp.pool.idleTimeout: must not be negative, got -1s`,
		"subagents:\n  providers:\n    - name: a\n      kind: acp\n      acp: {command: x, pool: {maxChildren: -2}}\n":  `subagents.providers[0].acp.pool.maxChildren: must not be negative, got -2`,
		"subagents:\n  providers:\n    - name: a\n      kind: acp\n      acp: {command: x, pool: {sessions: -1}}\n":     `subagents.providers[0].acp.pool.sessions: must not be negative, got -1`,
		"subagents:\n  providers:\n    - name: a\n      kind: acp\n      acp: {command: x, pool: {sizes: 2}}\n":         `unknown field "sizes"`,
		"subagents:\n  providers:\n    - name: a\n      kind: acp\n      acp: {command: x, pool: {idleTimeout: 10}}\n":  `subagents.providers[0].acp.pool.idleTimeout: want a duration such as 30s or 2m, got "10"`,
	} {
		_, err := config.Parse("dsh.yaml", []byte(yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}

	cfg, err := config.Parse("dsh.yaml", []byte("subagents:\n  providers:\n    - name: warm\n      kind: acp\n      acp: {command: /bin/cat, pool: {size: 2, sessions: 4, idleTimeout: 30s, maxChildren: 10}}\n"+
		"    - name: cx\n      kind: codex\n      codex: {command: /bin/cat, pool: {size: 1}}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	warm, ok := rt.Subagents.Provider("warm")
	cx, ok2 := rt.Subagents.Provider("cx")
	if !ok || !ok2 {
		t.Fatal("no provider")
	}
	parent, err := rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: cfg.Agent})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []subagent.Provider{warm, cx} {
		_, err = p.Start(context.Background(), subagent.StartRequest{Prompt: []content.Block{content.Text("x")}, Parent: parent, Depth: 1})
		if err == nil || !strings.Contains(err.Error(), "the provider is closed") {
			t.Fatalf("%s: a start after the runtime closed: %v", p.Name(), err)
		}
	}
}
