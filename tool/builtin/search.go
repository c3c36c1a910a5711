package builtin

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/toolname"
)

const (
	maxGlobResults    = 1000
	defaultGrepResult = 200
	maxGrepLineLen    = 500
	maxGrepScan       = 1 << 20 // bytes of a line grep searches
)

type globArgs struct {
	Pattern string `json:"pattern" jsonschema:"the glob pattern, e.g. **/*.go; ** matches any number of directories"`
	Path    string `json:"path,omitempty" jsonschema:"the directory to search (default: the working directory)"`
}

func globTool(opts Options) tool.Definition {
	const desc = "Find files whose path matches a glob pattern (filepath.Match syntax per path segment, ** for any depth) " +
		"under a directory, skipping .git; returns up to 1000 paths relative to that directory, newest first."
	return tool.Func(toolname.Glob, desc, true, func(ctx context.Context, call tool.Call, args globArgs) (tool.Result, error) {
		root := resolve(call.Cwd, args.Path)
		pat := filepath.ToSlash(args.Pattern)
		abs := path.IsAbs(pat)
		if abs {
			root, pat = "/", strings.TrimPrefix(pat, "/")
		}
		segs := strings.Split(path.Clean(pat), "/")
		if err := checkPattern(segs); err != nil {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid glob pattern %q: %v", args.Pattern, err)
		}
		// Walk from the pattern's literal leading directories only.
		base := root
		for len(segs) > 1 && !hasMeta(segs[0]) {
			base, segs = filepath.Join(base, segs[0]), segs[1:]
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return tool.Result{}, dirErr(root, err)
		}
		pol := opts.readPolicy(ctx, call.Cwd)
		if err := checkRead(pol, "glob", base); err != nil {
			return tool.Result{}, err
		}
		if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
			return tool.TextResult(fmt.Sprintf("no files match %s", args.Pattern)), nil
		}
		type match struct {
			path string
			mod  time.Time
		}
		var found []match
		err := walk(ctx, pol, base, func(p string, d fs.DirEntry) error {
			parts := splitRel(base, p)
			if d.IsDir() {
				if len(parts) > 0 && !matchSegs(segs, parts, true) {
					return filepath.SkipDir
				}
				return nil
			}
			if !matchSegs(segs, parts, false) {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			shown := p
			if !abs {
				shown, _ = filepath.Rel(root, p)
			}
			found = append(found, match{shown, fi.ModTime()})
			return nil
		})
		if err != nil {
			return tool.Result{}, err
		}
		if len(found) == 0 {
			return tool.TextResult(fmt.Sprintf("no files match %s", args.Pattern)), nil
		}
		slices.SortFunc(found, func(a, b match) int {
			return cmp.Or(b.mod.Compare(a.mod), strings.Compare(a.path, b.path))
		})
		out := lines{limit: opts.OutputLimit}
		shown := 0
		for _, m := range found[:min(len(found), maxGlobResults)] {
			if !out.add(m.path) {
				break
			}
			shown++
		}
		if shown < len(found) {
			fmt.Fprintf(&out, "[showing %d of %d matches; narrow the pattern]\n", shown, len(found))
		}
		return tool.TextResult(out.String()), nil
	})
}

type grepArgs struct {
	Pattern    string `json:"pattern" jsonschema:"the regular expression to search for (Go RE2 syntax)"`
	Path       string `json:"path,omitempty" jsonschema:"the file or directory to search (default: the working directory)"`
	Glob       string `json:"glob,omitempty" jsonschema:"only search files whose name matches this glob, e.g. *.go (a pattern with / matches the relative path)"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match case-insensitively"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"the maximum number of matching lines to return (default 200)"`
}

func grepTool(opts Options) tool.Definition {
	const desc = "Search file contents for a regular expression (Go RE2 syntax) under a directory or in one file, skipping .git, " +
		"binary files and anything that is not a regular file (pipes, devices, sockets); prints path:line:text per matching " +
		"line, up to max_results (default 200) lines cut at 500 bytes. Lines longer than 1 MiB are searched in their first MiB."
	return tool.Func(toolname.Grep, desc, true, func(ctx context.Context, call tool.Call, args grepArgs) (tool.Result, error) {
		expr := args.Pattern
		if args.IgnoreCase {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid regular expression %q: %v", args.Pattern, err)
		}
		var globSegs []string
		if args.Glob != "" {
			globSegs = strings.Split(path.Clean(filepath.ToSlash(args.Glob)), "/")
			if err := checkPattern(globSegs); err != nil {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid glob %q: %v", args.Glob, err)
			}
		}
		if args.MaxResults < 0 {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "max_results must not be negative")
		}
		maxResults := cmp.Or(args.MaxResults, defaultGrepResult)
		root := resolve(call.Cwd, args.Path)
		fi, err := os.Stat(root)
		if err != nil {
			return tool.Result{}, statErr(root, err)
		}
		pol := opts.readPolicy(ctx, call.Cwd)
		if err := checkRead(pol, "grep", root); err != nil {
			return tool.Result{}, err
		}
		g := &grepper{ctx: ctx, re: re, max: maxResults, out: lines{limit: opts.OutputLimit}}
		if !fi.IsDir() {
			if err := checkRegular(root, fi); err != nil {
				return tool.Result{}, err
			}
			err = g.file(root, filepath.Base(root))
		} else {
			err = walk(ctx, pol, root, func(p string, d fs.DirEntry) error {
				if d.IsDir() {
					return nil
				}
				parts := splitRel(root, p)
				if len(globSegs) == 1 {
					parts = parts[len(parts)-1:] // a pattern without / matches the name
				}
				if globSegs != nil && !matchSegs(globSegs, parts, false) {
					return nil
				}
				rel, _ := filepath.Rel(root, p)
				return g.file(p, filepath.ToSlash(rel))
			})
		}
		if err != nil && err != io.EOF {
			return tool.Result{}, err
		}
		var notes strings.Builder
		if g.skipped > 0 {
			fmt.Fprintf(&notes, "[skipped %d file(s) that are not regular files (pipes, devices, sockets)]\n", g.skipped)
		}
		if g.long > 0 {
			fmt.Fprintf(&notes, "[%d line(s) longer than 1 MiB were searched in their first MiB only]\n", g.long)
		}
		switch {
		case g.full:
			fmt.Fprintf(&g.out, "[stopped after %d matches; narrow the search or raise max_results]\n", g.count)
		case g.count == 0:
			return tool.TextResult(strings.TrimSpace("no matches for " + args.Pattern + "\n" + notes.String())), nil
		}
		g.out.WriteString(notes.String())
		return tool.TextResult(g.out.String()), nil
	})
}

// walk calls fn for every entry under root except root itself, skipping .git
// directories, unreadable entries and those pol keeps from reads, and stops
// when ctx is done.
func walk(ctx context.Context, pol sandbox.Policy, root string, fn func(path string, d fs.DirEntry) error) error {
	// Only a directory, a link or a file named as a denied one can be (or
	// lead to) a denied path: the walk does not follow links.
	denied := map[string]bool{}
	for _, u := range pol.Unreadable {
		denied[filepath.Base(u)] = true
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || p == root {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if (d.IsDir() || d.Type()&fs.ModeSymlink != 0 || denied[d.Name()]) && !pol.MayRead(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(p, d)
	})
}

// splitRel returns the segments of p relative to root.
func splitRel(root, p string) []string {
	rel, _ := filepath.Rel(root, p)
	return strings.Split(filepath.ToSlash(rel), "/")
}

func hasMeta(seg string) bool { return strings.ContainsAny(seg, `*?[\`) }

// checkPattern reports a malformed segment of a glob pattern.
func checkPattern(segs []string) error {
	for _, s := range segs {
		if _, err := path.Match(s, ""); err != nil {
			return err
		}
	}
	return nil
}

// matchSegs reports whether the path parts match the pattern segments, where
// a "**" segment matches any number of parts. With prefix it reports whether
// some path below parts could match.
func matchSegs(segs, parts []string, prefix bool) bool {
	for len(segs) > 0 && len(parts) > 0 {
		if segs[0] == "**" {
			return matchSegs(segs[1:], parts, prefix) || matchSegs(segs, parts[1:], prefix)
		}
		if ok, _ := path.Match(segs[0], parts[0]); !ok {
			return false
		}
		segs, parts = segs[1:], parts[1:]
	}
	if len(parts) > 0 {
		return false
	}
	return prefix || !slices.ContainsFunc(segs, func(s string) bool { return s != "**" })
}

// dirErr explains why root cannot be searched.
func dirErr(root string, err error) error {
	if err != nil {
		return statErr(root, err)
	}
	return tool.Errorf(tool.CodeFailed, "%s is not a directory", root)
}

// grepper searches files for a pattern, collecting matching lines.
type grepper struct {
	ctx     context.Context
	re      *regexp.Regexp
	max     int // matching lines to collect
	out     lines
	count   int
	full    bool // max or the output limit was reached
	skipped int  // files that are not regular
	long    int  // lines searched in their first maxGrepScan bytes only
}

// file searches the file at p, shown as shown; it returns io.EOF once the
// results are full. A file that is not regular is counted and skipped, a
// binary or unreadable one skipped; a NUL byte past the sniffed head ends
// the search of that file.
func (g *grepper) file(p, shown string) error {
	if err := g.ctx.Err(); err != nil {
		return err
	}
	switch fi, err := os.Stat(p); {
	case err != nil || fi.IsDir(): // unreadable, or a link to a directory
		return nil
	case !fi.Mode().IsRegular():
		g.skipped++
		return nil
	}
	f, _, err := openRegular(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	lr := newLineReader(g.ctx, f, maxGrepScan)
	if head, _ := lr.r.Peek(sniffLen); bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	for n := 1; ; n++ {
		line, err := lr.next()
		switch {
		case g.ctx.Err() != nil:
			return g.ctx.Err()
		case err != nil: // the end, a NUL byte or a read error
			return nil
		case lr.cut:
			g.long++
		}
		if !g.re.Match(line) {
			continue
		}
		if g.count == g.max || !g.out.add(fmt.Sprintf("%s:%d:%s", shown, n, truncLine(string(line[:min(len(line), maxGrepLineLen+utf8.UTFMax)]), maxGrepLineLen))) {
			g.full = true
			return io.EOF
		}
		g.count++
	}
}
