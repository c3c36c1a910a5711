package config

import (
	"cmp"
	"context"
	"fmt"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/a2achild"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/claudecode"
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// Kind is one kind of subagent provider: the one place that says how a
// configuration file declares, checks and builds providers of it. The
// loader's table of kinds drives validation, its error messages, the
// README's list and `dsh doctor`; adding a kind is one package and one
// entry (see Loader).
type Kind struct {
	// Name is what `kind:` says; a provider named like a kind and without
	// `kind:` is of that kind.
	Name string
	// Block is the YAML key of the kind's configuration block ("" when it
	// takes none); NewBlock returns a pointer to a zero block to decode
	// it into.
	Block    string
	NewBlock func() any
	// Check validates a provider's block (nil when the file has none) as
	// its constructor would, without building anything. A
	// *subagent.ConfigError names the offending key of the block. Nil:
	// nothing to check.
	Check func(name string, block any) error
	// New builds a provider named name from its block (nil when absent).
	New func(env BuildEnv, name string, block any) (subagent.Provider, error)
	// Program returns the program a provider of this kind runs, for `dsh
	// doctor` ("" for an in-process kind, SelfCommand for dsh itself), and
	// Install says how to install it.
	Program func(block any) string
	Install string
	// Credentials returns the variables that hold the credentials a
	// provider's block names (nil: none); dsh takes them out of its
	// environment and redacts their values.
	Credentials func(block any) []string
}

// BuildEnv is what a kind's constructor may use.
type BuildEnv struct {
	Runtime *dsh.Runtime
	Config  Config
	Getenv  func(string) string
}

// BuiltinKinds returns dsh's provider kinds: spawn, fork, acp, codex,
// claude-code, a2a, and temporal in a build with the tag temporal.
func BuiltinKinds() []Kind {
	return append([]Kind{
		{Name: KindSpawn, New: func(env BuildEnv, name string, _ any) (subagent.Provider, error) {
			return inproc.New(inproc.Config{Name: name, Agents: env.Runtime.Agents})
		}},
		{Name: KindFork, New: func(env BuildEnv, name string, _ any) (subagent.Provider, error) {
			return inproc.New(inproc.Config{Name: name, Agents: env.Runtime.Agents, Fork: true})
		}},
		{Name: KindACP, Block: "acp", NewBlock: func() any { return new(acpchild.Config) },
			Check: func(name string, block any) error {
				c := blockOf[acpchild.Config](block)
				if c.Command == "" {
					return &subagent.ConfigError{Kind: KindACP, Provider: name, Field: "command",
						Msg: fmt.Sprintf("is required (%q runs this dsh)", SelfCommand)}
				}
				c.Name = name
				_, err := acpchild.New(c)
				return err
			},
			New: func(env BuildEnv, name string, block any) (subagent.Provider, error) {
				c := blockOf[acpchild.Config](block)
				c.Name, c.Env = name, passed(c.Env, c.PassEnv, env.Getenv)
				if c.Command == SelfCommand {
					if err := env.Config.selfHost(&c, env.Getenv); err != nil {
						return nil, err
					}
				}
				p, err := acpchild.New(c)
				if err != nil {
					return nil, err
				}
				env.Runtime.OnClose(func(context.Context) error { return p.Close() }) // the processes it keeps warm
				return p, nil
			},
			Program: func(block any) string { return blockOf[acpchild.Config](block).Command }},
		{Name: KindCodex, Block: "codex", NewBlock: func() any { return new(codex.Config) }, Install: "npm install -g @openai/codex",
			Check: func(name string, block any) error { _, err := newCodex(name, block, nil); return err },
			New: func(env BuildEnv, name string, block any) (subagent.Provider, error) {
				p, err := newCodex(name, block, env.Getenv)
				if err != nil {
					return nil, err
				}
				env.Runtime.OnClose(func(context.Context) error { return p.Close() }) // the processes it keeps warm
				return p, nil
			},
			Program: func(block any) string { return cmp.Or(blockOf[codex.Config](block).Command, "codex") }},
		{Name: KindClaudeCode, Block: "claudeCode", NewBlock: func() any { return new(claudecode.Config) },
			Install: "npm install -g @anthropic-ai/claude-code",
			Check:   func(name string, block any) error { _, err := newClaudeCode(name, block, nil); return err },
			New: func(env BuildEnv, name string, block any) (subagent.Provider, error) {
				return newClaudeCode(name, block, env.Getenv)
			},
			Program: func(block any) string { return cmp.Or(blockOf[claudecode.Config](block).Command, "claude") }},
		{Name: a2achild.Kind, Block: "a2a", NewBlock: func() any { return new(a2achild.Config) },
			Check: func(name string, block any) error {
				c := blockOf[a2achild.Config](block)
				c.Name = name
				return c.Check()
			},
			New: func(env BuildEnv, name string, block any) (subagent.Provider, error) {
				c := blockOf[a2achild.Config](block)
				c.Name, c.Getenv = name, env.Getenv
				return a2achild.New(c)
			},
			Credentials: func(block any) []string {
				if v := blockOf[a2achild.Config](block).TokenEnv; v != "" {
					return []string{v}
				}
				return nil
			}},
	}, temporalKinds()...)
}

// newCodex and newClaudeCode build (with getenv) or only check (nil) a
// product provider; its passEnv is resolved through getenv, since dsh
// takes credentials out of its own environment.
func newCodex(name string, block any, getenv func(string) string) (*codex.Provider, error) {
	c := blockOf[codex.Config](block)
	c.Name = name
	if getenv != nil {
		c.Env = passed(c.Env, c.PassEnv, getenv)
	}
	return codex.New(c)
}

func newClaudeCode(name string, block any, getenv func(string) string) (*claudecode.Provider, error) {
	c := blockOf[claudecode.Config](block)
	c.Name = name
	if getenv != nil {
		c.Env = passed(c.Env, c.PassEnv, getenv)
	}
	return claudecode.New(c)
}

// blockOf returns a copy of a decoded block (a *T), or T's zero value.
func blockOf[T any](block any) T {
	if p, ok := block.(*T); ok && p != nil {
		return *p
	}
	var zero T
	return zero
}

// Provider is one subagent provider of a configuration file: its name, its
// kind, and its kind's block (`codex: {…}` for a codex provider).
type Provider struct {
	Name string
	// Kind is one of the loader's kinds (default: the name).
	Kind string

	blocks []providerBlock // the other keys, as written; one at most is valid
	block  any             // the kind's block, decoded; nil when absent
}

type providerBlock struct {
	key  string
	node ast.Node
}

// UnmarshalYAML keeps name and kind, and the other keys undecoded until the
// kind is known (see Loader.decodeBlocks).
func (p *Provider) UnmarshalYAML(node ast.Node) error {
	m, ok := node.(*ast.MappingNode)
	if !ok {
		if mv, single := node.(*ast.MappingValueNode); single {
			m = &ast.MappingNode{Values: []*ast.MappingValueNode{mv}}
		} else {
			return fmt.Errorf("line %d: a provider is a mapping with name and kind", node.GetToken().Position.Line)
		}
	}
	for _, mv := range m.Values {
		key := mv.Key.GetToken().Value
		switch key {
		case "name", "kind":
			s, ok := mv.Value.(*ast.StringNode)
			if !ok {
				return fmt.Errorf("line %d: %s: want a string, got %q", mv.Value.GetToken().Position.Line, key, mv.Value.GetToken().Value)
			}
			if key == "name" {
				p.Name = s.Value
			} else {
				p.Kind = s.Value
			}
		default:
			p.blocks = append(p.blocks, providerBlock{key, mv.Value})
		}
	}
	return nil
}

// Block returns the provider's decoded block: a pointer to its kind's
// block type, or nil.
func (p Provider) Block() any { return p.block }

// kindOf returns the kind of p.
func (cfg Config) kindOf(p Provider) (Kind, bool) {
	name := cmp.Or(p.Kind, p.Name)
	for _, k := range cfg.kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// kindNames lists the kinds for messages: "spawn, fork, acp, codex or
// claude-code".
func (cfg Config) kindNames() string {
	s := ""
	for i, k := range cfg.kinds {
		switch {
		case i == 0:
		case i == len(cfg.kinds)-1:
			s += " or "
		default:
			s += ", "
		}
		s += k.Name
	}
	return s
}

// decodeBlocks decodes each provider's block into its kind's type, strictly
// and with the file's lines in errors. Unknown kinds and misplaced blocks
// are left to validate, which names them.
func (cfg Config) decodeBlocks(file *Config) error {
	if file.Subagents == nil {
		return nil
	}
	for i := range file.Subagents.Providers {
		p := &file.Subagents.Providers[i]
		k, ok := cfg.kindOf(*p)
		if !ok || len(p.blocks) != 1 || p.blocks[0].key != k.Block || k.NewBlock == nil {
			continue
		}
		v := k.NewBlock()
		path := fmt.Sprintf("subagents.providers[%d].%s", i, k.Block)
		if err := checkNode(p.blocks[0].node, reflect.TypeOf(v), path); err != nil {
			return err
		}
		if err := yaml.NodeToValue(p.blocks[0].node, v, yaml.Strict(), yaml.CustomUnmarshaler(decodeDuration)); err != nil {
			return fmt.Errorf("%s: %s", path, yaml.FormatError(err, false, false))
		}
		p.block = v
	}
	return nil
}

// validateProvider checks one provider against the kinds table.
func (cfg Config) validateProvider(at string, p Provider) error {
	k, ok := cfg.kindOf(p)
	if !ok {
		return bad(at, "unknown kind %q (want %s)%s", cmp.Or(p.Kind, p.Name), cfg.kindNames(), missingKind(cmp.Or(p.Kind, p.Name)))
	}
	for _, b := range p.blocks {
		switch {
		case b.key == k.Block && len(p.blocks) == 1:
		case cfg.isBlock(b.key):
			return bad(at, "a %s provider cannot have a %s block", k.Name, b.key)
		default:
			return bad(at+"."+b.key, "unknown key %q (a provider has name, kind and its kind's block)", b.key)
		}
	}
	if k.Check == nil {
		return nil
	}
	if err := k.Check(p.Name, p.block); err != nil {
		if ce, ok := err.(*subagent.ConfigError); ok && k.Block != "" {
			if p.block == nil { // no block to point into: point at the provider
				return bad(at, "%s.%s: %s", k.Block, ce.Field, ce.Msg)
			}
			return bad(fmt.Sprintf("%s.%s.%s", at, k.Block, ce.Field), "%s", ce.Msg)
		}
		return bad(at, "%v", err)
	}
	return nil
}

// isBlock reports whether key is some kind's block key.
func (cfg Config) isBlock(key string) bool {
	for _, k := range cfg.kinds {
		if k.Block != "" && k.Block == key {
			return true
		}
	}
	return false
}

// ProgramOf returns the program a provider runs and how to install it
// ("" for an in-process provider), for diagnostics.
func (cfg Config) ProgramOf(p Provider) (program, install string) {
	k, ok := cfg.kindOf(p)
	if !ok || k.Program == nil {
		return "", ""
	}
	return k.Program(p.block), k.Install
}

// Kinds returns the provider kinds the configuration was checked against.
func (cfg Config) Kinds() []Kind { return cfg.kinds }
