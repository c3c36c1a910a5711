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
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/childproc"
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

// A `command: self` provider keeps one `dsh acp` warm by default, serving
// no more children at once than acp.maxSessions lets that process hold.
func TestSelfPoolFollowsMaxSessions(t *testing.T) {
	for yaml, want := range map[string]childproc.Pool{
		"subagents:\n  providers:\n    - name: s\n      kind: acp\n      acp: {command: self}\n":                                                      {Size: new(1), Sessions: 32},
		"acp: {maxSessions: 4}\nsubagents:\n  providers:\n    - name: s\n      kind: acp\n      acp: {command: self}\n":                               {Size: new(1), Sessions: 4},
		"acp: {maxSessions: 4}\nsubagents:\n  providers:\n    - name: s\n      kind: acp\n      acp: {command: self, pool: {size: 2, sessions: 8}}\n": {Size: new(2), Sessions: 4},
		"subagents:\n  providers:\n    - name: s\n      kind: acp\n      acp: {command: self, pool: {size: 0}}\n":                                     {Size: new(0), Sessions: 32},
	} {
		cfg, err := config.Parse("dsh.yaml", []byte(yaml), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), env(map[string]string{"DSH_HOME": t.TempDir()}))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := rt.Subagents.Provider("s")
		got := p.(*acpchild.Provider).Pool()
		if *got.Size != *want.Size || *want.Size > 0 && got.Sessions != want.Sessions {
			t.Errorf("%s: pool size %d, sessions %d; want %d, %d", yaml, *got.Size, got.Sessions, *want.Size, want.Sessions)
		}
		rt.Close(context.Background())
	}
}
