package config

import (
	"cmp"
	"fmt"
	"os"
	"strconv"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/subagenttool"
)

// DepthEnv tells a dsh started as an ACP child its delegation depth.
const DepthEnv = "DSH_DEPTH"

// ReplayEnv, set by `dsh replay`, names the recording a dsh started as an
// ACP child answers its model requests from; ReplayTimingEnv says how fast
// (see llm/replay). A self child inherits both.
const (
	ReplayEnv       = "DSH_REPLAY"
	ReplayTimingEnv = "DSH_REPLAY_TIMING"
)

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
	for _, t := range cfg.Subagents.Tools {
		if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks,
			Events: rt.Events, Log: rt.Log}, t); err != nil {
			return err
		}
	}
	return nil
}

func (cfg Config) provider(rt *dsh.Runtime, p Provider, getenv func(string) string) (subagent.Provider, error) {
	k, ok := cfg.kindOf(p)
	if !ok {
		return nil, fmt.Errorf("unknown kind %q (want %s)", cmp.Or(p.Kind, p.Name), cfg.kindNames())
	}
	return k.New(BuildEnv{Runtime: rt, Config: cfg, Getenv: getenv}, p.Name, p.block)
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
	for _, k := range []string{ReplayEnv, ReplayTimingEnv} {
		if v := getenv(k); v != "" {
			ac.Env[k] = cmp.Or(ac.Env[k], v)
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
