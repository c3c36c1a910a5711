package agentdef

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/dsh-go/dsh/subagent"
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
	// Routes are the model routes a definition may name.
	Routes []string
	// Providers are the subagent providers a definition may name, with
	// their capabilities.
	Providers map[string]subagent.Capabilities
	// Log receives what the definitions' hooks report (nil: slog.Default()).
	Log *slog.Logger
}

// maxFile bounds a definition file.
const maxFile = 1 << 20

// Load reads the built-in definitions and the files of opts.Dirs (*.md
// directly in each folder; a missing folder is skipped). It returns the
// catalog and the warnings (one per Claude Code field or tool dsh does not
// use), or the first error, naming the file, the line and the field.
func Load(opts Options) (*Catalog, []string, error) {
	c, warnings, err := Collect(opts)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range c.defs {
		if d.Provider != "" {
			if err := d.Check(d.Provider, opts.Providers[d.Provider]); err != nil {
				return nil, nil, err
			}
		}
	}
	return c, warnings, nil
}

// Collect is Load without checking definitions against their providers'
// capabilities (opts.Providers is not read): for describing what a folder
// would add before anything is built.
func Collect(opts Options) (*Catalog, []string, error) {
	byName := map[string]*Definition{}
	for _, d := range builtins(opts.Tools) {
		byName[d.Name] = d
	}
	var warnings []string
	for _, dir := range slices.Backward(opts.Dirs) {
		defs, warns, err := readDir(dir, &opts)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, warns...)
		for _, d := range defs {
			if old, ok := byName[d.Name]; ok {
				d.Overrides = append([]Source{old.Source}, old.Overrides...)
			}
			byName[d.Name] = d
		}
	}
	c := &Catalog{}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		c.defs = append(c.defs, byName[name])
	}
	return c, warnings, nil
}

// readDir reads the definitions of one folder; two of the same name are
// an error.
func readDir(dir Dir, opts *Options) ([]*Definition, []string, error) {
	entries, err := os.ReadDir(dir.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("agent definitions: %w", err)
	}
	var defs []*Definition
	var warnings []string
	seen := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		path := filepath.Join(dir.Path, e.Name())
		data, err := readFile(path)
		if err != nil {
			return nil, nil, &Error{Path: path, Msg: err.Error()}
		}
		d, warns, err := parse(Source{Scope: dir.Scope, Path: path, Claude: dir.Claude}, data, opts)
		if err != nil {
			return nil, nil, err
		}
		if first, dup := seen[d.Name]; dup {
			return nil, nil, d.errorf("name", "%q is also the name of %s", d.Name, first)
		}
		seen[d.Name] = path
		defs = append(defs, d)
		warnings = append(warnings, warns...)
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
