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
	for _, t := range cfg.Subagents.Tools {
		if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks,
			Events: rt.Events, Log: rt.Log, OutputLimit: cfg.Tools.OutputLimit}, t); err != nil {
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
	// The credentials left this process's environment (internal/secret):
	// the child gets them explicitly, and takes them out of its own.
	ac.Env = passed(ac.Env, cfg.CredentialEnv(getenv), getenv)
	ac.DepthEnv = DepthEnv
	return nil
}

// passed returns a copy of env (never nil) with the value, through getenv,
// of every variable in pass that env does not set: dsh takes credentials
// out of its process environment, so a child's passEnv is resolved here.
func passed(env map[string]string, pass []string, getenv func(string) string) map[string]string {
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	for _, name := range pass {
		if _, ok := env[name]; !ok {
			if v := getenv(name); v != "" {
				env[name] = v
			}
		}
	}
	return env
}

// DepthFrom reads the delegation depth a parent gave this process.
func DepthFrom(getenv func(string) string) int {
	d, err := strconv.Atoi(getenv(DepthEnv))
	if err != nil || d < 0 {
		return 0
	}
	return d
}
