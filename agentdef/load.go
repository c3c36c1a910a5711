package agentdef

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/trust"
)

// Dir is a folder of definition files.
type Dir struct {
	Path string
	// Scope is "project" or "user", for `dsh agents list`.
	Scope string
	// Claude marks a Claude Code folder: fields and tools of Claude Code
	// that dsh lacks are warnings there, not errors.
	Claude bool
}

// Dirs returns the folders definitions are read from, highest precedence
// first: the project's .dsh/agents and .claude/agents, then the user's
// $DSH_HOME/agents and ~/.claude/agents. An empty argument leaves its
// folders out.
func Dirs(project, dshHome, home string) []Dir {
	var dirs []Dir
	if project != "" {
		dirs = append(dirs, Dir{Path: filepath.Join(project, ".dsh", "agents"), Scope: "project"},
			Dir{Path: filepath.Join(project, ".claude", "agents"), Scope: "project", Claude: true})
	}
	if dshHome != "" {
		dirs = append(dirs, Dir{Path: filepath.Join(dshHome, "agents"), Scope: "user"})
	}
	if home != "" {
		dirs = append(dirs, Dir{Path: filepath.Join(home, ".claude", "agents"), Scope: "user", Claude: true})
	}
	return dirs
}

// Options say where definitions are and what they may name.
type Options struct {
	// Dirs are read highest precedence first: a definition shadows those
	// of the same name in later folders and the built-in ones.
	Dirs []Dir
	// Tools are the global tools a definition may name.
	Tools []string
	// MCPServers are the configured MCP servers: a definition's
	// mcp__SERVER__TOOL (or mcp__SERVER) names a tool of one of them.
	MCPServers []string
	// Routes are the model routes a definition may name.
	Routes []string
	// RouteModels are the model ids the routes serve, by route: a
	// definition's model that is such an id picks its route.
	RouteModels map[string]string
	// Providers are the subagent providers a definition may name, with
	// their capabilities.
	Providers map[string]subagent.Capabilities
	// Log receives what the definitions' hooks report (nil: slog.Default()).
	Log *slog.Logger
}

// maxFile bounds a definition file.
const maxFile = 1 << 20

// Load reads the built-in definitions and the files of opts.Dirs (*.md in
// each folder and its subfolders; a missing folder is skipped), as Claude
// Code does: a bad file never stops the others. It returns the catalog of
// every good file and the warnings: one per bad file (its path, line and
// why; the file is left out), one per Claude Code field or tool dsh does
// not use, one per duplicate name, and one for all the model names that
// are not dsh routes. The error, never about a file's content, joins the
// folders that could not be read; the catalog then holds all the others.
func Load(opts Options) (*Catalog, []string, error) {
	return collect(opts, true)
}

// Collect is Load without checking definitions against their providers'
// capabilities (opts.Providers is not read): for describing what a folder
// would add before anything is built.
func Collect(opts Options) (*Catalog, []string, error) {
	return collect(opts, false)
}

func collect(opts Options, checkProviders bool) (*Catalog, []string, error) {
	byName := map[string]*Definition{}
	for _, d := range builtins(opts.Tools) {
		byName[d.Name] = d
	}
	var warnings []string
	var errs []error
	var unresolved []*Definition
	for _, dir := range slices.Backward(opts.Dirs) {
		defs, warns, err := readDir(dir, &opts)
		errs = append(errs, err)
		warnings = append(warnings, warns...)
		for _, d := range defs {
			if checkProviders && d.Provider != "" {
				if err := d.Check(d.Provider, opts.Providers[d.Provider]); err != nil {
					warnings = append(warnings, err.Error()+"; the definition is left out")
					continue
				}
			}
			if d.askedModel != "" {
				unresolved = append(unresolved, d)
			}
			if old, ok := byName[d.Name]; ok {
				d.Overrides = append([]Source{old.Source}, old.Overrides...)
			}
			byName[d.Name] = d
		}
	}
	if w := modelWarning(unresolved, opts.Routes); w != "" {
		warnings = append(warnings, w)
	}
	c := &Catalog{}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		c.defs = append(c.defs, byName[name])
	}
	return c, warnings, errors.Join(errs...)
}

// modelWarning is the one warning, per load, for the definitions whose
// model is no configured route: each name once, with how many files name it.
func modelWarning(defs []*Definition, routes []string) string {
	if len(defs) == 0 {
		return ""
	}
	count := map[string]int{} // by the first spelling of each name, in any case
	spelling := map[string]string{}
	for _, d := range defs {
		key := strings.ToLower(d.askedModel)
		if _, ok := spelling[key]; !ok {
			spelling[key] = d.askedModel
		}
		count[spelling[key]]++
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(count)) {
		part := fmt.Sprintf("%q (%d %s)", m, count[m], plural(count[m], "file", "files"))
		if near := tool.Suggest(routes, m); near != "" {
			part += fmt.Sprintf(" (did you mean %q?)", near)
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("agent definitions: %s %s: not a configured model route (routes: %s); those agents use their parent's route",
		plural(len(parts), "model", "models"), strings.Join(parts, ", "), strings.Join(routes, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// readDir reads the definitions of one folder and its subfolders, in path
// order. A bad file is a warning and is left out; of two files with the
// same name, the first in path order wins, with a warning. The error is
// for the folder itself.
func readDir(dir Dir, opts *Options) ([]*Definition, []string, error) {
	paths, warnings, err := trust.AgentFiles(dir.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("agent definitions: %s: %w", dir.Path, err)
	}
	var defs []*Definition
	seen := map[string]string{}
	for _, path := range paths {
		data, err := readFile(path)
		if err != nil {
			warnings = append(warnings, (&Error{Path: path, Msg: err.Error()}).Error()+"; left out")
			continue
		}
		d, warns, err := parse(Source{Scope: dir.Scope, Path: path, Claude: dir.Claude}, data, opts)
		warnings = append(warnings, warns...)
		if err != nil {
			warnings = append(warnings, err.Error()+"; the file is left out")
			continue
		}
		if first, dup := seen[d.Name]; dup {
			warnings = append(warnings, d.errorf("name", "%q is also the name of %s, which is used; this file is left out", d.Name, first).Error())
			continue
		}
		seen[d.Name] = path
		defs = append(defs, d)
	}
	return defs, warnings, nil
}

// readFile reads at most maxFile bytes of a regular file (a FIFO or a
// device is an error, and never blocks).
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err == nil && len(data) > maxFile {
		err = fmt.Errorf("larger than %d bytes", maxFile)
	}
	return data, err
}

// Parse reads one definition file's content as if read from src, for tools
// and tests; the result is not checked against a provider's capabilities.
func Parse(src Source, data []byte, opts Options) (*Definition, []string, error) {
	return parse(src, data, &opts)
}
