package config

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/goccy/go-yaml"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/mcptool"
)

// ProjectMCPFile is the name of Claude Code's project file of MCP servers.
const ProjectMCPFile = ".mcp.json"

// mcpError places a server block's validation error at its YAML path
// under at ("$.mcpServers").
func mcpError(at string, err error) error {
	var ce *mcptool.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	path := at + "." + ce.Server
	if ce.Field != "" {
		path += "." + ce.Field
	}
	return bad(path, "%s", ce.Msg)
}

// projectFile is the part of .mcp.json dsh reads.
type projectFile struct {
	MCPServers map[string]mcptool.ServerConfig `yaml:"mcpServers"`
}

// WithProjectMCP adds the servers of dir/.mcp.json (Claude Code's project
// file) that cfg does not define itself, unless cfg sets projectMCP:
// false. The file is another program's, and may hold keys dsh does not
// know: they are ignored, and a server block dsh cannot use is left out
// with a warning naming the file and the line.
func (cfg Config) WithProjectMCP(dir string) Config {
	if cfg.ProjectMCP != nil && !*cfg.ProjectMCP {
		return cfg
	}
	path := filepath.Join(dir, ProjectMCPFile)
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			cfg.warnings = append(slices.Clip(cfg.warnings), fmt.Sprintf("%s ignored: %v", path, err))
		}
		return cfg
	}
	servers, warnings := parseProjectMCP(path, data)
	cfg.warnings = append(slices.Clip(cfg.warnings), warnings...)
	merged, sources := maps.Clone(cfg.MCPServers), maps.Clone(cfg.mcpSources)
	for name, srv := range servers {
		if _, own := cfg.MCPServers[name]; own {
			continue
		}
		if merged == nil {
			merged = map[string]mcptool.ServerConfig{}
		}
		if sources == nil {
			sources = map[string]string{}
		}
		srv.Sandbox = "" // only the user's own configuration may loosen a server's sandbox
		if srv.Transport() == mcptool.TypeStdio && srv.Cwd == "" {
			srv.Cwd = dir // the project's servers run in the project
		}
		merged[name], sources[name] = srv, path
	}
	cfg.MCPServers, cfg.mcpSources = merged, sources
	return cfg
}

// parseProjectMCP reads a .mcp.json: the servers dsh can use, and a
// warning for each problem (the whole file's, or one server's, which is
// then left out).
func parseProjectMCP(path string, data []byte) (map[string]mcptool.ServerConfig, []string) {
	if err := checkNodeTypes(data, reflect.TypeFor[projectFile]()); err != nil {
		return nil, []string{fmt.Sprintf("%s ignored: %v", path, err)}
	}
	var file projectFile
	if err := yaml.NewDecoder(bytes.NewReader(data), yaml.CustomUnmarshaler(decodeDuration)).Decode(&file); err != nil {
		return nil, []string{fmt.Sprintf("%s ignored: %s", path, withSourceLine(data, yaml.FormatError(err, false, false)))}
	}
	var warnings []string
	out := map[string]mcptool.ServerConfig{}
	for _, name := range slices.Sorted(maps.Keys(file.MCPServers)) {
		srv := file.MCPServers[name]
		if err := mcpError("$.mcpServers", srv.Validate(name)); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: MCP server %q left out: %v", path, name, locate(data, err)))
			continue
		}
		if isDshMCP(srv) {
			warnings = append(warnings, fmt.Sprintf("%s: MCP server %q left out: it is dsh itself (dsh mcp), for other clients", path, name))
			continue
		}
		out[name] = srv
	}
	return out, warnings
}

// isDshMCP reports whether a server block runs `dsh mcp`, which a
// project's .mcp.json declares for Claude Code and other clients: dsh
// does not take its own tools.
func isDshMCP(srv mcptool.ServerConfig) bool {
	if len(srv.Args) == 0 || srv.Args[0] != "mcp" {
		return false
	}
	if filepath.Base(srv.Command) == "dsh" {
		return true
	}
	self, err := os.Executable()
	return err == nil && srv.Command == self
}

// MCPSource names where an MCP server was configured: the .mcp.json it
// came from, or "" for the configuration file.
func (cfg Config) MCPSource(name string) string { return cfg.mcpSources[name] }

// MCPSet returns the configured MCP servers as a Set that has started
// nothing (nil when there are none). Unless opts says otherwise, stdio
// servers run under tools.sandbox and tools.network.
func (cfg Config) MCPSet(opts mcptool.Options) (*mcptool.Set, error) {
	if len(cfg.MCPServers) == 0 {
		return nil, nil
	}
	opts.Sandbox = cmp.Or(opts.Sandbox, cfg.Tools.Sandbox)
	opts.Network = cmp.Or(opts.Network, cfg.Tools.Network)
	return mcptool.New(cfg.MCPServers, opts)
}

// mountMCP makes the configured MCP servers' tools global tools of rt:
// their servers start when the first top-level agent is created (see
// mcptool.MountGlobal) and stop when rt closes. Without servers it does
// nothing.
func (cfg Config) mountMCP(rt *dsh.Runtime, getenv func(string) string) error {
	set, err := cfg.MCPSet(mcptool.Options{Log: rt.Log, Events: rt.Events, Getenv: getenv})
	if err != nil || set == nil {
		return err
	}
	unmount := mcptool.MountGlobal(set, rt.Tools, rt.Events)
	rt.OnClose(func(ctx context.Context) error {
		unmount()
		return set.Close(ctx)
	})
	return nil
}
