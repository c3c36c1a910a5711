// Package trust records the folders whose project items the user trusts.
// Project items are what a repository supplies that can run code or change
// what dsh does (a .mcp.json, a .dsh/dsh.yaml, agent definitions, Claude
// Code's settings files with their hooks): they take effect only in a
// trusted folder. The record, $DSH_HOME/trust.json, keys each folder by
// its absolute, symlink-resolved path and holds a SHA-256 of its items, so
// a changed item makes the folder untrusted again.
//
// A repository's instructions for agents (AGENTS.md, CLAUDE.md) are no
// project items: they only become text the model reads, which Claude Code
// and Codex read without asking, and asking to trust every repository that
// has one would teach users to say yes. They may not reach outside the
// repository (a symlink, an @import of ~/.ssh/…), trusted or not: see
// package prompt/instructions.
package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The kinds of project item.
const (
	// KindMCP is a file of MCP servers (Claude Code's .mcp.json).
	KindMCP = "mcp"
	// KindAgent is an agent definition (a *.md file of an agents folder).
	KindAgent = "agent"
	// KindConfig is the project's dsh configuration file.
	KindConfig = "config"
	// KindSettings is one of Claude Code's project settings files, whose
	// hooks dsh runs.
	KindSettings = "settings"
)

// The project's settings files of Claude Code (KindSettings), in the
// order their hooks run.
const (
	SettingsFile      = ".claude/settings.json"
	LocalSettingsFile = ".claude/settings.local.json"
)

// MCPFile is the project's file of MCP servers.
const MCPFile = ".mcp.json"

// ConfigFile is the project's dsh configuration, slash-separated.
const ConfigFile = ".dsh/dsh.yaml"

// MaxItem bounds the bytes of one item that are read.
const MaxItem = 1 << 20

// source is one place a folder may hold project items.
type source struct {
	path string // relative to the folder, slash-separated
	dir  bool   // a folder whose *.md files (see AgentFiles) are items
	kind string
}

// sources is the table of project items: add a row to make a new file
// (hook settings, a project dsh.yaml) something a folder must be trusted
// for.
func sources() []source {
	return []source{
		{path: MCPFile, kind: KindMCP},
		{path: ConfigFile, kind: KindConfig},
		{path: ".dsh/agents", dir: true, kind: KindAgent},
		{path: ".claude/agents", dir: true, kind: KindAgent},
		{path: SettingsFile, kind: KindSettings},
		{path: LocalSettingsFile, kind: KindSettings},
	}
}

// AgentDirs are the project folders of agent definitions, relative to the
// project, highest precedence first.
func AgentDirs() []string {
	var dirs []string
	for _, s := range sources() {
		if s.kind == KindAgent {
			dirs = append(dirs, filepath.FromSlash(s.path))
		}
	}
	return dirs
}

// Item is one project item of a folder.
type Item struct {
	// Path is the item's path relative to the folder, slash-separated
	// (".mcp.json", ".claude/agents/explore.md").
	Path string
	// Kind is KindMCP, KindConfig, KindAgent or KindSettings.
	Kind string
	// Data is the item's content; nil when Problem is set.
	Data []byte
	// Problem says why the item was not read ("not a regular file",
	// "larger than 1048576 bytes"); "" when it was.
	Problem string
}

// Inventory is what a folder holds of project items.
type Inventory struct {
	// Dir is the folder, absolute and symlink-resolved.
	Dir string
	// Items are sorted by Path.
	Items []Item
}

// Hash is a SHA-256 of the items' paths, problems and contents, in hex.
func (inv Inventory) Hash() string {
	h := sha256.New()
	for _, it := range inv.Items {
		for _, s := range []string{it.Path, it.Problem, strconv.Itoa(len(it.Data))} {
			io.WriteString(h, s)
			h.Write([]byte{0})
		}
		h.Write(it.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Item returns the item at path (slash-separated, relative to the folder).
func (inv Inventory) Item(path string) (Item, bool) {
	i := slices.IndexFunc(inv.Items, func(it Item) bool { return it.Path == path })
	if i < 0 {
		return Item{}, false
	}
	return inv.Items[i], true
}

// Count returns how many items are of kind.
func (inv Inventory) Count(kind string) int {
	n := 0
	for _, it := range inv.Items {
		if it.Kind == kind {
			n++
		}
	}
	return n
}

// Resolve returns dir absolute and with its symlinks resolved, or an error
// naming it when it is not a folder.
func Resolve(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("trust: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("trust: %w", err)
	}
	if fi, err := os.Stat(real); err != nil {
		return "", fmt.Errorf("trust: %w", err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("trust: %s is not a folder", dir)
	}
	return real, nil
}

// Scan returns the project items of dir. Items are read bounded, and only
// regular files (a symlink is followed; a FIFO or a device is an item with
// a Problem, never opened for long). A folder of items or an item that is
// one of user, the user's own folders and files (as .dsh/agents is
// $DSH_HOME/agents, .dsh/dsh.yaml $DSH_HOME/dsh.yaml and
// .claude/settings.json the user's settings, when dir is the home
// directory), holds none or is none.
func Scan(dir string, user ...string) (Inventory, error) {
	real, err := Resolve(dir)
	if err != nil {
		return Inventory{}, err
	}
	inv := Inventory{Dir: real}
	for _, s := range sources() {
		path := filepath.Join(real, filepath.FromSlash(s.path))
		if isUserDir(path, user) {
			continue
		}
		if !s.dir {
			if it, ok, err := readItem(path, s.path, s.kind); err != nil {
				return Inventory{}, err
			} else if ok {
				inv.Items = append(inv.Items, it)
			}
			continue
		}
		files, _, err := AgentFiles(path)
		if err != nil {
			return Inventory{}, fmt.Errorf("trust: %w", err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(path, f)
			it, ok, err := readItem(f, s.path+"/"+filepath.ToSlash(rel), s.kind)
			if err != nil {
				return Inventory{}, err
			}
			if ok {
				inv.Items = append(inv.Items, it)
			}
		}
	}
	slices.SortFunc(inv.Items, func(a, b Item) int { return strings.Compare(a.Path, b.Path) })
	return inv, nil
}

// Bounds on a folder of agent definitions: how deep its subfolders are
// read, and how many files in all.
const (
	maxAgentDepth = 8
	maxAgentFiles = 2000
)

// AgentFiles lists the *.md files of a folder of agent definitions and of
// its subfolders, as Claude Code reads them, in path order: subfolders
// whose name starts with "." and symlinked subfolders are not entered (the
// folder itself may be a symlink), at most 8 deep and 2000 files in all
// (the warnings say what was skipped). A missing folder has none. Package
// agentdef reads the same files, so that what is trusted is what loads.
func AgentFiles(root string) (paths, warnings []string, err error) {
	real, err := filepath.EvalSymlinks(root)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	err = filepath.WalkDir(real, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if path == real {
				return err
			}
			warnings = append(warnings, fmt.Sprintf("agent definitions: %v; skipped", err))
			return nil
		}
		rel, _ := filepath.Rel(real, path)
		if e.IsDir() {
			if path != real && (strings.Count(rel, string(filepath.Separator)) >= maxAgentDepth || strings.HasPrefix(e.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(e.Name(), ".md") {
			return nil
		}
		if len(paths) == maxAgentFiles {
			warnings = append(warnings, fmt.Sprintf("agent definitions: %s holds more than %d files; the rest are skipped", root, maxAgentFiles))
			return filepath.SkipAll
		}
		paths = append(paths, filepath.Join(root, rel))
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil, nil
	}
	return paths, warnings, err
}

// isUserDir reports whether path is one of the folders or files user.
func isUserDir(path string, user []string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	for _, u := range user {
		if r, err := filepath.EvalSymlinks(u); err == nil && r == real {
			return true
		}
	}
	return false
}

// readItem reads the item at path, if there is one.
func readItem(path, rel, kind string) (Item, bool, error) {
	it := Item{Path: rel, Kind: kind}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		if _, lerr := os.Lstat(path); lerr == nil { // a dangling symlink
			it.Problem = "a broken symbolic link"
			return it, true, nil
		}
		return it, false, nil
	case err != nil:
		return it, false, fmt.Errorf("trust: %w", err)
	case fi.IsDir():
		return it, false, nil
	case !fi.Mode().IsRegular():
		it.Problem = "not a regular file"
		return it, true, nil
	}
	data, err := ReadFile(path, MaxItem)
	if err != nil {
		it.Problem = err.Error()
		return it, true, nil
	}
	it.Data = data
	return it, true, nil
}

// ReadFile reads at most limit bytes of the regular file at path: a
// larger file, or one that is not regular (a FIFO, a device), is an error,
// and opening never blocks.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	return data, err
}
