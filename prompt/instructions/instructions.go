// Package instructions reads a project's instructions for agents: the
// AGENTS.md files (read by Codex and others) and Claude Code's CLAUDE.md,
// and puts them into every agent's system prompt as one section.
//
// Which files: $DSH_HOME/AGENTS.md (the user's own), then, from the
// repository root (the nearest folder above the working directory that
// holds .git; without one, the working directory alone) down to the
// working directory, each folder's AGENTS.md, or its CLAUDE.md when it has
// no AGENTS.md. A file may import others with @path (relative to the file,
// or ~/ for the home folder, or absolute), as Claude Code's memory files
// do: not inside code spans or code blocks, at most five imports deep, a
// file already read is not read again (so a cycle ends), and a path that
// names no regular file is left as text (an @mention).
//
// Trust: unlike agent definitions or .mcp.json, these files are not items
// of package trust. They only become text the model reads, as Claude Code
// and Codex read them without asking, and the model stays under the
// permission policy; asking to trust every repository with an AGENTS.md
// would teach users to say yes. What a repository cannot do is reach
// beyond itself: a project file, or an import of one, whose real path
// (symlinks resolved) is outside the repository is skipped with a warning,
// so that a hostile repository's "@~/.ssh/id_ed25519" or AGENTS.md symlink
// sends no file of the user's to the model provider. This holds in a
// trusted folder too: the trust record hashes a folder's agent definitions
// and .mcp.json, not its AGENTS.md, so trust given today would cover an
// import added by tomorrow's pull. Personal imports belong in the user's
// own $DSH_HOME/AGENTS.md, which may import any file.
//
// The section sits after the harness's identity and environment and before
// the persona (see Order): every agent of a tree, the parent and its spawn
// and fork children alike, gets the same text at the same place, so the
// prompt-cache prefix the children share with the parent is kept.
package instructions

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/trust"
)

// The section's name and order: after prompt.IdentitySection and the
// working directory (prompt.IdentityOrder+1), before prompt.PersonaSection.
const (
	Section = "project:instructions"
	Order   = -50
)

// The names of instruction files, in the order a folder's is chosen.
const (
	AgentsFile = "AGENTS.md"
	ClaudeFile = "CLAUDE.md"
)

// MaxBytes bounds the text of all files together; what is beyond is cut,
// with a warning. A file larger than trust.MaxItem is not read.
const MaxBytes = 64 << 10

// maxDepth bounds the chain of imports, as in Claude Code.
const maxDepth = 5

// Options say where to look.
type Options struct {
	// Cwd is the working directory.
	Cwd string
	// UserDir holds the user's own AGENTS.md ($DSH_HOME); "" for none.
	UserDir string
	// Home is the folder ~/ names in an import; "" leaves such imports out.
	Home string
	// MaxBytes bounds the text (0: MaxBytes).
	MaxBytes int
}

// File is one file read.
type File struct {
	// Path is the file as found (not symlink-resolved).
	Path string
	// ImportedBy is the file whose @path imported it; "" for a top-level one.
	ImportedBy string
	// Text is its content.
	Text string
}

// Instructions are the files read, in order, the section's text, and
// what went wrong.
type Instructions struct {
	Files []File
	// Text is the section's text: a heading, then each file under its
	// path; "" when no file was read. Beyond the byte bound it is cut, and
	// a line says so (and a warning).
	Text     string
	Warnings []string
}

// Load reads the instruction files opts names. It never fails: a file
// that cannot be read is a warning.
func Load(opts Options) Instructions {
	l := &loader{opts: opts, seen: map[string]bool{}}
	if opts.UserDir != "" {
		l.read(filepath.Join(opts.UserDir, AgentsFile), "", "", 0)
	}
	if opts.Cwd != "" {
		root := Root(opts.Cwd)
		l.root = root
		if real, err := filepath.EvalSymlinks(root); err == nil {
			l.root = real
		}
		for _, dir := range between(root, opts.Cwd) {
			path := filepath.Join(dir, AgentsFile)
			if !exists(path) {
				path = filepath.Join(dir, ClaudeFile)
			}
			l.read(path, l.root, "", 0)
		}
	}
	in := Instructions{Files: l.files, Warnings: l.warnings}
	in.Text = in.render(cmpOr(opts.MaxBytes, MaxBytes))
	return in
}

func cmpOr(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

// Root returns the repository root above dir: the nearest folder, dir
// included, that holds .git; else dir.
func Root(dir string) string {
	dir = filepath.Clean(dir)
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// between returns the folders from root down to dir, both included (dir
// alone when it is not below root).
func between(root, dir string) []string {
	dir = filepath.Clean(dir)
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return []string{dir}
	}
	out := []string{root}
	if rel == "." {
		return out
	}
	d := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		d = filepath.Join(d, part)
		out = append(out, d)
	}
	return out
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

type loader struct {
	opts     Options
	bytes    int    // bytes read so far
	full     bool   // the bound is reached: nothing more is read
	root     string // the repository, symlink-resolved
	seen     map[string]bool
	files    []File
	warnings []string
}

// read reads path and, after it, what it imports. within, when set, is
// the folder the file's real path must be in.
func (l *loader) read(path, within, importedBy string, depth int) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) && importedBy == "" {
		return
	}
	if err != nil {
		l.warn(path, importedBy, err.Error())
		return
	}
	if l.seen[real] {
		return
	}
	if within != "" && !inside(within, real) {
		l.warn(path, importedBy, fmt.Sprintf("it is %s, outside the repository %s (a file of your own goes in $DSH_HOME/AGENTS.md, which may import it)", real, within))
		return
	}
	if l.full {
		return
	}
	data, err := trust.ReadFile(real, trust.MaxItem)
	if err != nil {
		l.warn(path, importedBy, err.Error())
		return
	}
	l.seen[real] = true
	if l.bytes += len(data); l.bytes > cmpOr(l.opts.MaxBytes, MaxBytes) {
		l.full = true // the text is cut here: no file after this one is read
	}
	text := string(data)
	l.files = append(l.files, File{Path: path, ImportedBy: importedBy, Text: text})
	imports := importsOf(text)
	if len(imports) > 0 && depth >= maxDepth {
		l.warn(path, importedBy, fmt.Sprintf("its imports are more than %d deep; not read", maxDepth))
		return
	}
	for _, imp := range imports {
		target, ok := l.resolve(filepath.Dir(path), imp)
		if !ok {
			continue
		}
		if fi, err := os.Stat(target); err != nil || fi.IsDir() {
			continue // not a file: an @mention, left as text
		}
		l.read(target, within, path, depth+1)
	}
}

// resolve returns the path an import names, from a file in dir.
func (l *loader) resolve(dir, imp string) (string, bool) {
	switch {
	case strings.HasPrefix(imp, "~/"):
		if l.opts.Home == "" {
			return "", false
		}
		return filepath.Join(l.opts.Home, imp[2:]), true
	case filepath.IsAbs(imp):
		return filepath.Clean(imp), true
	}
	return filepath.Join(dir, imp), true
}

func (l *loader) warn(path, importedBy, why string) {
	what := path
	if importedBy != "" {
		what = fmt.Sprintf("%s (imported by %s)", path, importedBy)
	}
	l.warnings = append(l.warnings, fmt.Sprintf("project instructions: %s: %s; skipped", what, why))
}

// inside reports whether path is dir or below it.
func inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// importPattern is an @path after the start of a line or a space.
var importPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[ \t])@((?:~/|/|\./|\.\./)?[^\s@` + "`" + `]+)`)
})

// importsOf returns the @paths of text outside code blocks and code spans,
// without trailing punctuation.
func importsOf(text string) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range importPattern().FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			if p := strings.TrimRight(m[1], ".,;:!?)]}'\""); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// withoutCodeSpans blanks the `code spans` of a line.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		switch {
		case r == '`':
			in = !in
			b.WriteRune(' ')
		case in:
			b.WriteRune(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// render returns the section's text, at most max bytes and a line.
func (in *Instructions) render(max int) string {
	if len(in.Files) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Project instructions\n\nThe files below (AGENTS.md, CLAUDE.md and what they import) hold instructions " +
		"for agents working here, from the user and from the repository. Follow them; the user's requests in the " +
		"conversation come first.\n")
	for _, f := range in.Files {
		b.WriteString("\n## " + f.Path)
		if f.ImportedBy != "" {
			b.WriteString(" (imported by " + f.ImportedBy + ")")
		}
		b.WriteString("\n\n" + strings.TrimSpace(f.Text) + "\n")
	}
	text := b.String()
	if len(text) > max {
		cut := max
		for cut > 0 && text[cut]&0xC0 == 0x80 {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n\n[project instructions cut at %d bytes]\n", max)
		in.Warnings = append(in.Warnings, fmt.Sprintf("project instructions: more than %d bytes; the rest is cut", max))
	}
	return text
}

// Register puts text into reg as the project-instructions section (no
// section when text is ""). The text goes in through a variable, so that
// "{{" in a file is text, not a template.
func Register(reg *prompt.Registry, text string) (dispose func(), err error) {
	if text == "" {
		return func() {}, nil
	}
	undoVar, err := reg.Variable("project_instructions", func() (string, bool) { return text, true })
	if err != nil {
		return nil, err
	}
	undoSec, err := reg.Section(prompt.Section{Name: Section, Order: Order, Text: "{{project_instructions}}"})
	if err != nil {
		undoVar()
		return nil, err
	}
	return func() { undoSec(); undoVar() }, nil
}
