package config

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"strconv"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/claudecode"
	"github.com/dsh-go/dsh/subagent/codex"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
)

// DepthEnv tells a dsh started as an ACP child its delegation depth.
const DepthEnv = "DSH_DEPTH"

// mountSubagents registers the declared providers and mounts their tools.
func (cfg Config) mountSubagents(rt *dsh.Runtime, getenv func(string) string) error {
	if cfg.Subagents == nil {
		return nil
	}
	for _, p := range cfg.Subagents.Providers {
		prov, err := cfg.provider(rt, p, getenv)
		if err != nil {
			return fmt.Errorf("subagent provider %s: %w", p.Name, err)
		}
		if _, err := rt.Subagents.Register(prov); err != nil {
			return fmt.Errorf("subagent provider %s: %w", p.Name, err)
		}
	}
	deps := subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events, Log: rt.Log}
	continuable := false
	for _, t := range cfg.Subagents.Tools {
		if _, err := subagenttool.Mount(deps, t); err != nil {
			return err
		}
		continuable = continuable || ((t.Continuable == nil || *t.Continuable) && rt.Subagents.CanContinue(t.Provider))
	}
	if continuable && (cfg.Subagents.ControlTools == nil || *cfg.Subagents.ControlTools) {
		if _, err := subagenttool.MountControl(deps); err != nil {
			return err
		}
	}
	return nil
}

func (cfg Config) provider(rt *dsh.Runtime, p Provider, getenv func(string) string) (subagent.Provider, error) {
	switch cmp.Or(p.Kind, p.Name) {
	case KindSpawn:
		return inproc.New(inproc.Config{Name: p.Name, Agents: rt.Agents})
	case KindFork:
		return inproc.New(inproc.Config{Name: p.Name, Agents: rt.Agents, Fork: true})
	case KindCodex:
		c := deref(p.Codex)
		c.Name = p.Name
		return codex.New(c)
	case KindClaudeCode:
		c := deref(p.ClaudeCode)
		c.Name = p.Name
		return claudecode.New(c)
	}
	ac := deref(p.ACP)
	ac.Name = p.Name
	ac.Env = maps.Clone(ac.Env)
	if ac.Env == nil {
		ac.Env = map[string]string{}
	}
	if ac.Command == SelfCommand {
		if err := cfg.selfHost(&ac, getenv); err != nil {
			return nil, err
		}
	}
	return acpchild.New(ac)
}

// checkBlock validates a provider's block with its kind's constructor, so
// that a bad value is reported at load with its file and line.
func checkBlock(p Provider, kind string) error {
	var err error
	switch kind {
	case KindCodex:
		c := deref(p.Codex)
		c.Name = p.Name
		_, err = codex.New(c)
	case KindClaudeCode:
		c := deref(p.ClaudeCode)
		c.Name = p.Name
		_, err = claudecode.New(c)
	case KindACP:
		c := deref(p.ACP)
		c.Name = p.Name
		_, err = acpchild.New(c)
	}
	return err
}

// blockKey is the YAML key of a kind's block.
func blockKey(kind string) string {
	if kind == KindClaudeCode {
		return "claudeCode"
	}
	return kind
}

// deref returns a copy of *c, or the zero value.
func deref[T any](c *T) T {
	if c == nil {
		var zero T
		return zero
	}
	return *c
}

// selfHost runs this dsh binary in acp mode with the parent's home, the
// configuration file the parent loaded and its model keys, and tells it its
// depth.
func (cfg Config) selfHost(ac *acpchild.Config, getenv func(string) string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the dsh binary: %w", err)
	}
	ac.Command = exe
	if len(ac.Args) == 0 {
		ac.Args = []string{"acp"}
	}
	home, err := Home(getenv)
	if err != nil {
		return err
	}
	ac.Env["DSH_HOME"] = cmp.Or(ac.Env["DSH_HOME"], home)
	if c := cmp.Or(cfg.path, getenv("DSH_CONFIG")); c != "" { // the file this dsh loaded, --config included
		ac.Env["DSH_CONFIG"] = cmp.Or(ac.Env["DSH_CONFIG"], c)
	}
	for _, m := range cfg.Models {
		if m.APIKeyEnv != "" {
			ac.PassEnv = append(ac.PassEnv, m.APIKeyEnv)
		}
	}
	ac.DepthEnv = DepthEnv
	return nil
}

// DepthFrom reads the delegation depth a parent gave this process.
func DepthFrom(getenv func(string) string) int {
	d, err := strconv.Atoi(getenv(DepthEnv))
	if err != nil || d < 0 {
		return 0
	}
	return d
}
