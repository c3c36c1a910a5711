package config

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/trust"
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

// WithProjectMCP adds the servers of dir/.mcp.json (Claude Code's project
// file) that cfg does not define itself, unless cfg sets projectMCP:
// false. It does not ask whether dir is trusted: Load does (see package
// trust). The file is another program's, and may hold keys dsh does not
// know: they are ignored, and a server block dsh cannot use, or that names
// a credential variable, is left out with a warning naming the file.
func (cfg Config) WithProjectMCP(dir string) Config {
	if cfg.ProjectMCP != nil && !*cfg.ProjectMCP {
		return cfg
	}
	path := filepath.Join(dir, ProjectMCPFile)
	data, err := trust.ReadFile(path, trust.MaxItem)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			cfg.warnings = append(slices.Clip(cfg.warnings), fmt.Sprintf("%s ignored: %v", path, err))
		}
		return cfg
	}
	return cfg.withProjectMCP(dir, data)
}

// withTrustedProjectMCP adds the servers of dir/.mcp.json when dir is a
// trusted folder (see package trust), from the content the trust was
// checked against.
func (cfg Config) withTrustedProjectMCP(dir string, getenv func(string) string) (Config, error) {
	if cfg.ProjectMCP != nil && !*cfg.ProjectMCP {
		return cfg, nil
	}
	store, err := TrustStore(getenv)
	if err != nil {
		return cfg, nil // no record: nothing is trusted
	}
	st, err := store.Check(dir)
	if err != nil || st.State != trust.Trusted {
		return cfg, err
	}
	if it, ok := st.Item(trust.MCPFile); ok && it.Problem == "" {
		return cfg.withProjectMCP(dir, it.Data), nil
	}
	return cfg, nil
}

// withProjectMCP adds the usable servers of data, dir's .mcp.json.
func (cfg Config) withProjectMCP(dir string, data []byte) Config {
	path := filepath.Join(dir, ProjectMCPFile)
	servers, warnings := cfg.parseProjectMCP(path, data)
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

// projectServer is the part of a .mcp.json server block dsh reads; other
// keys (oauth, …) are ignored.
type projectServer struct {
	Type          string            `json:"type"`
	Command       string            `json:"command"`
	Args          []string          `json:"args"`
	Env           map[string]string `json:"env"`
	PassEnv       []string          `json:"passEnv"`
	Cwd           string            `json:"cwd"`
	URL           string            `json:"url"`
	Headers       map[string]string `json:"headers"`
	HeadersHelper string            `json:"headersHelper"`
	StartTimeout  jsonDuration      `json:"startTimeout"`
	CallTimeout   jsonDuration      `json:"callTimeout"`
}

// jsonDuration is a duration written as a string such as "30s".
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %q", s)
	}
	*d = jsonDuration(v)
	return nil
}

func (p projectServer) config() mcptool.ServerConfig {
	return mcptool.ServerConfig{Type: p.Type, Command: p.Command, Args: p.Args, Env: p.Env, PassEnv: p.PassEnv, Cwd: p.Cwd,
		URL: p.URL, Headers: p.Headers, HeadersHelper: p.HeadersHelper, StartTimeout: time.Duration(p.StartTimeout), CallTimeout: time.Duration(p.CallTimeout)}
}

// parseProjectMCP reads a .mcp.json, a JSON file: the servers dsh can use,
// and a warning for each problem (the whole file's, or one server's, which
// is then left out). A server that names a credential variable (see
// credentialName) is left out: a repository must not hand a key to a
// program of its choosing.
func (cfg Config) parseProjectMCP(path string, data []byte) (map[string]mcptool.ServerConfig, []string) {
	var file struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, []string{fmt.Sprintf("%s ignored: %s", path, jsonError(data, err))}
	}
	lines := serverLines(data)
	var warnings []string
	leftOut := func(name, format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf("%s: MCP server %q left out: ", path, name)+fmt.Sprintf(format, args...))
	}
	out := map[string]mcptool.ServerConfig{}
	for _, name := range slices.Sorted(maps.Keys(file.MCPServers)) {
		var ps projectServer
		if err := json.Unmarshal(file.MCPServers[name], &ps); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				leftOut(name, "line %d: mcpServers.%s.%s: want %s, got %s", lines[name], name, te.Field, jsonType(te.Type.Kind().String()), te.Value)
			} else {
				leftOut(name, "line %d: mcpServers.%s: %v", lines[name], name, err)
			}
			continue
		}
		srv := ps.config()
		if err := srv.Validate(name); err != nil {
			var ce *mcptool.ConfigError
			if errors.As(err, &ce) && ce.Field != "" {
				leftOut(name, "line %d: mcpServers.%s.%s: %s", lines[name], name, ce.Field, ce.Msg)
			} else {
				leftOut(name, "line %d: %v", lines[name], err)
			}
			continue
		}
		if isDshMCP(srv) {
			leftOut(name, "it is dsh itself (dsh mcp), for other clients")
			continue
		}
		if v, where := cfg.credentialRef(srv); v != "" {
			leftOut(name, "its %s names the credential variable %s, which a project file may not use (declare the server in dsh.yaml to give it a credential)", where, v)
			continue
		}
		out[name] = srv
	}
	return out, warnings
}

// credentialRef returns the first credential variable srv names, and
// where: in ${VAR} references of its command, args, env, url or headers,
// or in its passEnv.
func (cfg Config) credentialRef(srv mcptool.ServerConfig) (name, where string) {
	for _, v := range srv.References() {
		if cfg.credentialName(v) {
			return v, "${" + v + "}"
		}
	}
	for _, v := range srv.PassEnv {
		if cfg.credentialName(v) {
			return v, "passEnv"
		}
	}
	return "", ""
}

// credentialName reports whether a variable holds a credential: a
// configured apiKeyEnv, DEEPSEEK_BASE_URL, or a name the environment scrub
// of child processes drops (see internal/proc.ScrubEnv).
func (cfg Config) credentialName(name string) bool {
	return name == baseURLEnv || slices.Contains(cfg.keyEnv(), name) || len(proc.ScrubEnv([]string{name + "=x"}, nil)) == 0
}

// serverLines returns the line of each server's key in a .mcp.json.
func serverLines(data []byte) map[string]int {
	lines := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return lines
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return lines
		}
		if key != "mcpServers" {
			if dec.Decode(new(json.RawMessage)) != nil {
				return lines
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return lines
		}
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return lines
			}
			if s, ok := name.(string); ok {
				lines[s] = lineAt(data, dec.InputOffset())
			}
			if dec.Decode(new(json.RawMessage)) != nil {
				return lines
			}
		}
		return lines
	}
	return lines
}

// lineAt returns the line of data's byte at offset.
func lineAt(data []byte, offset int64) int {
	return 1 + bytes.Count(data[:min(max(offset, 0), int64(len(data)))], []byte("\n"))
}

// jsonError says what is wrong with a JSON file, at its line when known.
func jsonError(data []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("line %d: not JSON: %v", lineAt(data, se.Offset), err)
	case errors.As(err, &te):
		return fmt.Sprintf("line %d: %s: want %s, got %s", lineAt(data, te.Offset), cmp.Or(te.Field, "the file"), jsonType(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

// jsonType names a Go kind as a JSON reader would.
func jsonType(kind string) string {
	switch kind {
	case "slice":
		return "a list"
	case "map", "struct":
		return "an object"
	case "string":
		return "a string"
	}
	return kind
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
	opts.OutputLimit = cmp.Or(opts.OutputLimit, cfg.Tools.OutputLimit)
	if opts.CacheDir == "" {
		getenv := opts.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		opts.CacheDir = MCPCacheDir(getenv)
	}
	return mcptool.New(cfg.MCPServers, opts)
}

// MCPCacheDir is the folder sandboxed stdio MCP servers use as their
// package managers' cache ($DSH_HOME/cache/mcp; see mcptool.Options), or
// "" when there is no home.
func MCPCacheDir(getenv func(string) string) string {
	home, err := Home(getenv)
	if err != nil {
		return ""
	}
	return filepath.Join(home, "cache", "mcp")
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
