package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/trust"
)

// TrustStore returns the record of trusted folders of $DSH_HOME (see
// package trust), which knows the user's own folders of definitions
// ($DSH_HOME/agents, ~/.claude/agents), settings (~/.claude/settings.json)
// and configuration file ($DSH_HOME/dsh.yaml) from the project's.
func TrustStore(getenv func(string) string) (*trust.Store, error) {
	home, err := Home(getenv)
	if err != nil {
		return nil, err
	}
	user := []string{filepath.Join(home, "agents"), filepath.Join(home, "dsh.yaml")}
	if h := getenv("HOME"); h != "" {
		user = append(user, filepath.Join(h, ".claude", "agents"), filepath.Join(h, filepath.FromSlash(trust.SettingsFile)))
	}
	return trust.Open(home, user...), nil
}

// Project is what a folder's project items would add to dsh (see package
// trust), for the user to decide whether to trust it.
type Project struct {
	trust.Status
	// Servers are the MCP servers of its .mcp.json that dsh would start.
	Servers []ProjectServer
	// Definitions are its agent definitions.
	Definitions []ProjectDefinition
	// Hooks are the hooks of its Claude Code settings files that dsh would
	// run.
	Hooks []ProjectHook
	// Warnings say what of its items dsh would leave out, and why.
	Warnings []string

	mcpOff bool // the configuration sets projectMCP: false
}

// ProjectServer is an MCP server of a project's .mcp.json.
type ProjectServer struct {
	Name string
	// Describe is its transport and command or URL, unexpanded.
	Describe string
}

// ProjectDefinition is an agent definition of a project.
type ProjectDefinition struct {
	Name string
	Path string
	// Replaces names the built-in or user definition it shadows ("" for
	// none).
	Replaces string
	// Hooks is set when it carries hooks, commands run on the host.
	Hooks bool
}

// ProjectHook is a hook of a project's Claude Code settings file.
type ProjectHook struct {
	// Path is the settings file, relative to the project.
	Path    string
	Event   hook.Event
	Matcher string
	Command string
}

// Project reads what dir's project items would add: its .mcp.json servers
// (cfg's own of the same name win) and its agent definitions, marking those
// that replace a built-in or a user one, and whether the record of
// $DSH_HOME says dir is trusted. Nothing is started.
func (cfg Config) Project(dir string, getenv func(string) string) (Project, error) {
	store, err := TrustStore(getenv)
	if err != nil {
		return Project{}, err
	}
	st, err := store.Check(dir)
	if err != nil {
		return Project{}, err
	}
	p := Project{Status: st, mcpOff: cfg.ProjectMCP != nil && !*cfg.ProjectMCP}
	for _, it := range st.Items {
		if it.Problem != "" {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: %s", filepath.Join(st.Dir, it.Path), it.Problem))
		}
	}
	if it, ok := st.Item(trust.MCPFile); ok && it.Problem == "" && !p.mcpOff {
		servers, warnings := cfg.parseProjectMCP(filepath.Join(st.Dir, trust.MCPFile), it.Data)
		p.Warnings = append(p.Warnings, warnings...)
		for _, name := range slices.Sorted(maps.Keys(servers)) {
			if _, own := cfg.MCPServers[name]; !own {
				p.Servers = append(p.Servers, ProjectServer{Name: name, Describe: servers[name].Describe()})
			}
		}
	}
	for _, f := range []string{trust.SettingsFile, trust.LocalSettingsFile} {
		if it, ok := st.Item(f); ok && it.Problem == "" {
			c, warnings := settingsHooks(filepath.Join(st.Dir, filepath.FromSlash(f)), it.Data)
			p.Warnings = append(p.Warnings, warnings...)
			for _, ev := range slices.Sorted(maps.Keys(c)) {
				for _, g := range c[ev] {
					for _, h := range g.Hooks {
						p.Hooks = append(p.Hooks, ProjectHook{Path: f, Event: ev, Matcher: g.Matcher, Command: h.Command})
					}
				}
			}
		}
	}
	if st.Count(trust.KindAgent) == 0 {
		return p, nil
	}
	opts, _, err := cfg.agentOptions(getenv, false)
	if err != nil {
		return p, err
	}
	opts.Dirs = append(agentdef.Dirs(st.Dir, "", ""), opts.Dirs...)
	c, _, err := agentdef.Collect(opts)
	if err != nil {
		p.Warnings = append(p.Warnings, err.Error())
	}
	for _, d := range c.List() {
		if d.Source.Scope != "project" {
			continue
		}
		pd := ProjectDefinition{Name: d.Name, Path: d.Source.Path, Hooks: d.Hooks != nil}
		if o, ok := shadowed(d); ok {
			pd.Replaces = describeSource(d.Name, o)
		}
		p.Definitions = append(p.Definitions, pd)
	}
	return p, nil
}

// Describe lists what the project would add, one line each, indented by
// indent: "MCP server NAME (stdio: …)", "agent definition NAME (PATH),
// replaces the built-in NAME, runs hooks", then the warnings.
func (p Project) Describe(indent string) string {
	var b strings.Builder
	if it, ok := p.Item(trust.ConfigFile); ok {
		fmt.Fprintf(&b, "%sdsh configuration %s (laid over yours: models, agent, permissions, hooks, subagents, …)\n", indent, filepath.Join(p.Dir, it.Path))
	}
	for _, s := range p.Servers {
		fmt.Fprintf(&b, "%sMCP server %s (%s)\n", indent, s.Name, s.Describe)
	}
	for _, d := range p.Definitions {
		fmt.Fprintf(&b, "%sagent definition %s (%s)", indent, d.Name, d.Path)
		if d.Replaces != "" {
			fmt.Fprintf(&b, ", replaces %s", d.Replaces)
		}
		if d.Hooks {
			b.WriteString(", runs hooks (commands on this machine)")
		}
		b.WriteString("\n")
	}
	for _, h := range p.Hooks {
		on := string(h.Event)
		if h.Matcher != "" {
			on += " " + h.Matcher
		}
		fmt.Fprintf(&b, "%shook (%s, %s), a command on this machine: %s\n", indent, h.Path, on, h.Command)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "%swarning: %s\n", indent, w)
	}
	return b.String()
}

// Skipped says in a few words what an untrusted project's items that dsh
// would use are: ".dsh/dsh.yaml and .mcp.json (2 MCP servers) and 1 agent
// definition"; ""
// for none (a .mcp.json under projectMCP: false).
func (p Project) Skipped() string {
	var parts []string
	if _, ok := p.Item(trust.ConfigFile); ok {
		parts = append(parts, trust.ConfigFile)
	}
	if _, ok := p.Item(trust.MCPFile); ok && !p.mcpOff {
		parts = append(parts, fmt.Sprintf("%s (%s)", trust.MCPFile, plural(len(p.Servers), "MCP server")))
	}
	if n := p.Count(trust.KindAgent); n > 0 {
		parts = append(parts, plural(n, "agent definition"))
	}
	if len(p.Hooks) > 0 {
		parts = append(parts, plural(len(p.Hooks), "hook")+" of Claude Code's settings")
	}
	return strings.Join(parts, " and ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
