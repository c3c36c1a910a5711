package config

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/trust"
	"github.com/dsh-go/dsh/worktree"
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
	types, warnings, err := cfg.LoadAgents(rt, getenv)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		rt.Log.Warn(w)
	}
	home, err := Home(getenv)
	if err != nil {
		return err
	}
	worktrees, err := worktree.New(filepath.Join(home, "worktrees"), cfg.Tools.Sandbox, cfg.Tools.Network)
	if err != nil {
		return err
	}
	deps := subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events, Log: rt.Log,
		OutputLimit: cfg.Tools.OutputLimit, Types: types, Worktrees: worktrees}
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

// LoadAgents reads the agent definitions: built-in, then those of
// $HOME/.claude/agents, $DSH_HOME/agents, and, when the user trusts the
// project (ProjectDir, default the current directory; see package trust),
// its .claude/agents and .dsh/agents, the later winning on a name clash.
// They are checked against the configured tools and model routes and rt's
// subagent providers. It also returns the warnings: one for each project
// definition that shadows a built-in or a user one, and those for what dsh
// ignores in Claude Code's files, and those of the files left out: a bad
// file is never an error.
func (cfg Config) LoadAgents(rt *dsh.Runtime, getenv func(string) string) (*agentdef.Catalog, []string, error) {
	opts, trusted, err := cfg.agentOptions(getenv, true)
	if err != nil {
		return nil, nil, err
	}
	store, err := TrustStore(getenv)
	if err != nil {
		return nil, nil, err
	}
	opts.Log = rt.Log
	for _, name := range rt.Subagents.Names() {
		if p, ok := rt.Subagents.Provider(name); ok {
			opts.Providers[name] = p.Capabilities()
		}
	}
	c, warnings := loadAgents(opts)
	if trusted != nil {
		// The files were read after the check: a change meanwhile
		// (something running in the project) makes them untrusted.
		if again, err := store.Scan(trusted.Dir); err != nil || again.Hash() != trusted.Hash() {
			opts.Dirs = slices.DeleteFunc(opts.Dirs, func(d agentdef.Dir) bool { return d.Scope == "project" })
			c, warnings = loadAgents(opts)
			warnings = append(warnings, fmt.Sprintf("the agent definitions of %s changed while dsh read them: skipped (run \"dsh trust\" to use them)", trusted.Dir))
		}
	}
	return c, append(shadowings(c), warnings...), nil
}

// AgentWarnings reads the agent definitions LoadAgents would, without
// building a runtime (their providers' capabilities are not checked), and
// returns the warnings: for `dsh doctor`.
func (cfg Config) AgentWarnings(getenv func(string) string) ([]string, error) {
	opts, _, err := cfg.agentOptions(getenv, true)
	if err != nil {
		return nil, err
	}
	if cfg.Subagents != nil {
		for _, p := range cfg.Subagents.Providers {
			opts.Providers[p.Name] = subagent.Capabilities{}
		}
	}
	_, warnings, err := agentdef.Collect(opts)
	if err != nil {
		warnings = append(warnings, err.Error())
	}
	return warnings, nil
}

// loadAgents loads the definitions; a folder that cannot be read is one
// more warning: no definition file, good or bad, stops dsh.
func loadAgents(opts agentdef.Options) (*agentdef.Catalog, []string) {
	c, warnings, err := agentdef.Load(opts)
	if err != nil {
		warnings = append(warnings, err.Error())
	}
	return c, warnings
}

// projectDir returns ProjectDir, else the working directory.
func (cfg Config) projectDir() (string, error) {
	if cfg.ProjectDir != "" {
		return cfg.ProjectDir, nil
	}
	return os.Getwd()
}

// agentOptions says where definitions are read and what they may name;
// the project's folders are among them when withProject is set and the
// user trusts the project, whose trusted items it then returns too.
func (cfg Config) agentOptions(getenv func(string) string, withProject bool) (agentdef.Options, *trust.Inventory, error) {
	home, err := Home(getenv)
	if err != nil {
		return agentdef.Options{}, nil, err
	}
	project := ""
	var trusted *trust.Inventory
	if withProject {
		dir, err := cfg.projectDir()
		if err != nil {
			return agentdef.Options{}, nil, err
		}
		store, err := TrustStore(getenv)
		if err != nil {
			return agentdef.Options{}, nil, err
		}
		st, err := store.Check(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist): // no project folder, no project definitions
		case err != nil:
			return agentdef.Options{}, nil, err
		case st.State == trust.Trusted:
			project, trusted = dir, &st.Inventory
		}
	}
	opts := agentdef.Options{Dirs: agentdef.Dirs(project, home, getenv("HOME")), Tools: cfg.knownTools(),
		Providers: map[string]subagent.Capabilities{}}
	opts.RouteModels = map[string]string{}
	for _, m := range cfg.Models {
		opts.Routes = append(opts.Routes, m.Name)
		opts.RouteModels[m.Name] = m.Model
	}
	opts.MCPServers = slices.Collect(maps.Keys(cfg.MCPServers))
	if trusted != nil && (cfg.ProjectMCP == nil || *cfg.ProjectMCP) { // the project's .mcp.json servers run too
		if it, ok := trusted.Item(trust.MCPFile); ok && it.Problem == "" {
			project, _ := cfg.parseProjectMCP(filepath.Join(trusted.Dir, trust.MCPFile), it.Data)
			opts.MCPServers = append(opts.MCPServers, slices.Collect(maps.Keys(project))...)
		}
	}
	slices.Sort(opts.MCPServers)
	opts.MCPServers = slices.Compact(opts.MCPServers)
	return opts, trusted, nil
}

// shadowings returns a warning for each project definition of c that
// shadows a built-in or a user one.
func shadowings(c *agentdef.Catalog) []string {
	var out []string
	for _, d := range c.List() {
		if o, ok := shadowed(d); ok {
			out = append(out, fmt.Sprintf("the project's agent definition %s (%s) replaces %s", d.Name, d.Source.Path, describeSource(d.Name, o)))
		}
	}
	return out
}

// describeSource names the definition name read from src: "the built-in
// explore", "the user's ~/.dsh/agents/explore.md".
func describeSource(name string, src agentdef.Source) string {
	if src.Path == "" {
		return "the " + src.Scope + " " + name
	}
	return "the " + src.Scope + "'s " + src.Path
}

// shadowed returns the built-in or user definition a project definition
// replaces, if any.
func shadowed(d *agentdef.Definition) (agentdef.Source, bool) {
	if d.Source.Scope != "project" {
		return agentdef.Source{}, false
	}
	for _, o := range d.Overrides {
		if o.Scope != "project" {
			return o, true
		}
	}
	return agentdef.Source{}, false
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
	if c := cmp.Or(cfg.explicitFile(), getenv("DSH_CONFIG")); c != "" { // the --config file this dsh read (the child reads the user's and the project's itself)
		ac.Env["DSH_CONFIG"] = cmp.Or(ac.Env["DSH_CONFIG"], c)
	}
	// The credentials left this process's environment (internal/secret):
	// the child gets them explicitly, and takes them out of its own.
	ac.Env = passed(ac.Env, cfg.CredentialEnv(getenv), getenv)
	for _, k := range []string{ReplayEnv, ReplayTimingEnv} {
		if v := getenv(k); v != "" {
			ac.Env[k] = cmp.Or(ac.Env[k], v)
		}
	}
	ac.DepthEnv, ac.Dsh = DepthEnv, true
	// A warm `dsh acp` reads this configuration too, and holds at most
	// acp.maxSessions sessions: its pool gives it no more children at once.
	if most := cfg.ACP.MaxSessions; most > 0 {
		pool := acpchild.DefaultSelfPool()
		if ac.Pool != nil {
			*pool = *ac.Pool
		}
		if pool.Sessions == 0 || pool.Sessions > most {
			pool.Sessions = most
		}
		ac.Pool = pool
	}
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
