package config_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// echoConfig is the block of the test's own provider kind.
type echoConfig struct {
	Greeting string `yaml:"greeting"`
	Times    int    `yaml:"times"`
}

// One table entry adds a provider kind: the file declares it with its
// block, the loader checks the block (types, keys, values, lines) and the
// runtime builds it; nothing else in config knows it.
func TestOneEntryAddsAKind(t *testing.T) {
	echo := config.Kind{Name: "echo", Block: "echo", NewBlock: func() any { return new(echoConfig) },
		Check: func(name string, block any) error {
			if c, _ := block.(*echoConfig); c == nil || c.Greeting == "" {
				return &subagent.ConfigError{Kind: "echo", Provider: name, Field: "greeting", Msg: "is required"}
			}
			return nil
		},
		New: func(_ config.BuildEnv, name string, block any) (subagent.Provider, error) {
			greeting := block.(*echoConfig).Greeting
			return &subagenttest.Provider{ProviderName: name,
				Default: subagenttest.Script{Result: subagent.Result{Output: []content.Block{content.Text(greeting)}}}}, nil
		}}
	l := config.Loader{Kinds: append(config.BuiltinKinds(), echo)}
	var names []string // spawn, fork, acp, codex, claude-code (and temporal in its build), echo
	for _, k := range l.Kinds {
		names = append(names, k.Name)
	}
	cfg, err := l.Parse("dsh.yaml", []byte(`subagents:
  providers:
    - name: greeter
      kind: echo
      echo: {greeting: hello, times: 2}
  tools: [{provider: greeter, toolName: subagent_greet}]
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	if !slices.Contains(rt.Subagents.Names(), "greeter") || !slices.Contains(rt.Tools.Names(), "subagent_greet") {
		t.Fatalf("providers %v, tools %v", rt.Subagents.Names(), rt.Tools.Names())
	}
	for yaml, want := range map[string]string{
		"subagents:\n  providers:\n    - name: g\n      kind: echo\n      echo: {times: two}\n": `config dsh.yaml: line 5: subagents.providers[0].echo.times: want an integer, got "two"`,
		"subagents:\n  providers:\n    - name: g\n      kind: echo\n      echo: {times: 2}\n":   `config dsh.yaml: line 5: subagents.providers[0].echo.greeting: is required`,
		"subagents:\n  providers:\n    - name: g\n      kind: echo\n      echo: {greting: x}\n": `unknown field "greting"`,
		"subagents:\n  providers:\n    - name: g\n      kind: teleport\n":                       `unknown kind "teleport" (want ` + strings.Join(names[:len(names)-1], ", ") + " or echo)",
		"subagents:\n  providers:\n    - name: g\n      kind: echo\n      codex: {}\n":          `line 3: subagents.providers[0]: a echo provider cannot have a codex block`,
	} {
		_, err := l.Parse("dsh.yaml", []byte(yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

// The README's provider table lists every built-in kind.
func TestREADMEListsEveryKind(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range config.BuiltinKinds() {
		if !strings.Contains(string(readme), "| `"+k.Name+"` |") {
			t.Errorf("README's provider table lacks %s", k.Name)
		}
	}
}
