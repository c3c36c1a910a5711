package instructions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/trust"
)

// ErrExists is Init's error when the folder already has an AGENTS.md.
var ErrExists = errors.New("AGENTS.md exists")

// Init writes a first AGENTS.md into dir, drafted from what the folder
// holds (see Draft), and returns its path. It never overwrites: when an
// AGENTS.md is there (even a dangling symlink), it returns an error
// wrapping ErrExists. No model is asked.
func Init(dir string) (string, error) {
	path := filepath.Join(dir, AgentsFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return path, fmt.Errorf("%s: %w; not overwritten (edit it, or remove it first)", path, ErrExists)
	}
	if err != nil {
		return path, err
	}
	_, err = f.WriteString(Draft(dir))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return path, err
}

// InitReport runs Init in dir and says what happened in one line, for a
// person: the file written, or why not.
func InitReport(dir string) string {
	path, err := Init(dir)
	if err != nil {
		return "dsh init: " + err.Error()
	}
	return "wrote " + path + ": a first draft from the files found here (no model was asked); edit it: agents read it from dsh's next start"
}

// maxManifest bounds a manifest file read for Draft.
const maxManifest = 256 << 10

// Draft returns a first AGENTS.md for dir: the languages its manifests
// show (go.mod, package.json, Cargo.toml, pyproject.toml, …), the build,
// test and lint commands they and a Makefile define, its top folders, and
// an import of its CLAUDE.md when it has one (which an AGENTS.md would
// otherwise hide).
func Draft(dir string) string {
	var langs, cmds []string
	add := func(list *[]string, items ...string) {
		for _, it := range items {
			if !slices.Contains(*list, it) {
				*list = append(*list, it)
			}
		}
	}
	read := func(name string) ([]byte, bool) {
		data, err := trust.ReadFile(filepath.Join(dir, name), maxManifest)
		return data, err == nil
	}
	if _, ok := read("go.mod"); ok {
		add(&langs, "Go")
		add(&cmds, "Build: `go build ./...`", "Test: `go test ./...`", "Vet: `go vet ./...` (and `gofmt -l .` prints nothing)")
	}
	if data, ok := read("package.json"); ok {
		add(&langs, "JavaScript/TypeScript (Node.js)")
		runner := nodeRunner(dir)
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		if json.Unmarshal(data, &pkg) == nil {
			for _, s := range []string{"build", "test", "lint", "typecheck", "format"} {
				if _, ok := pkg.Scripts[s]; ok {
					add(&cmds, fmt.Sprintf("%s: `%s run %s`", upper(s), runner, s))
				}
			}
		}
	}
	if _, ok := read("Cargo.toml"); ok {
		add(&langs, "Rust")
		add(&cmds, "Build: `cargo build`", "Test: `cargo test`", "Lint: `cargo clippy`")
	}
	for _, name := range []string{"pyproject.toml", "setup.py", "requirements.txt"} {
		if data, ok := read(name); ok {
			add(&langs, "Python")
			if strings.Contains(string(data), "pytest") || isDir(filepath.Join(dir, "tests")) {
				add(&cmds, "Test: `pytest`")
			}
		}
	}
	if data, ok := read("Makefile"); ok {
		targets := makeTargets(string(data))
		for _, t := range []string{"build", "test", "check", "lint", "fmt"} {
			if slices.Contains(targets, t) {
				add(&cmds, fmt.Sprintf("%s: `make %s`", upper(t), t))
			}
		}
	}
	var b strings.Builder
	b.WriteString("# AGENTS.md\n\nInstructions for coding agents working in this repository (dsh, Codex, Claude Code and others read this file).\n" +
		"This first draft was written by `dsh init` from the files it found: correct it, and add what a newcomer should know.\n")
	if exists(filepath.Join(dir, ClaudeFile)) {
		b.WriteString("\nThe instructions of CLAUDE.md apply too: @CLAUDE.md\n")
	}
	b.WriteString("\n## Project\n\n")
	if len(langs) > 0 {
		fmt.Fprintf(&b, "- Languages: %s\n", strings.Join(langs, ", "))
	}
	if top := topFolders(dir); len(top) > 0 {
		fmt.Fprintf(&b, "- Top folders: %s\n", strings.Join(top, ", "))
	}
	if exists(filepath.Join(dir, "README.md")) {
		b.WriteString("- Read README.md for what the project is and how it is used.\n")
	}
	b.WriteString("\n## Commands\n\n")
	if len(cmds) == 0 {
		b.WriteString("- (How to build, test and lint: none found; add them here.)\n")
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	b.WriteString("\nRun the tests before you say a change is done.\n\n## Conventions\n\n" +
		"- (Style, naming, files not to edit, how to commit: add them here.)\n")
	return b.String()
}

// nodeRunner is the package manager the folder's lock file names.
func nodeRunner(dir string) string {
	for _, lm := range [][2]string{{"pnpm-lock.yaml", "pnpm"}, {"yarn.lock", "yarn"}, {"bun.lockb", "bun"}, {"bun.lock", "bun"}} {
		if exists(filepath.Join(dir, lm[0])) {
			return lm[1]
		}
	}
	return "npm"
}

var makeTarget = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+)\s*:([^=]|$)`) })

// makeTargets returns the targets a Makefile defines.
func makeTargets(text string) []string {
	var out []string
	for _, m := range makeTarget().FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// topFolders lists dir's folders that are not hidden, at most 12.
func topFolders(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "node_modules" && e.Name() != "vendor" {
			out = append(out, "`"+e.Name()+"/`")
		}
	}
	if len(out) > 12 {
		out = append(out[:12], "…")
	}
	return out
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func upper(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
