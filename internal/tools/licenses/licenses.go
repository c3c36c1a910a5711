package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/licensecheck"
)

// minCoverage is the share of a licence file, in percent, that must be
// known licence text, as on pkg.go.dev: a file that adds conditions of its
// own to a known licence is not that licence.
const minCoverage = 75

// allowed reports whether a module may be under the licence id: the
// permissive licences anywhere, MPL-2.0 only in what tests alone use.
func allowed(id string, testOnly bool) bool {
	switch id {
	case "Apache-2.0", "MIT", "BSD-2-Clause", "BSD-3-Clause", "ISC":
		return true
	case "MPL-2.0":
		return testOnly
	}
	return false
}

// reviewed returns the licence files a person has read and classified where
// the scanner cannot, keyed by the SHA-256 of their exact text, so that a
// file that changes in any way is scanned again.
func reviewed() map[string][]string {
	return map[string][]string{
		// kernel.org/pub/linux/libs/security/libcap/psx (under
		// github.com/landlock-lsm/go-landlock): "SPDX-License-Identifier:
		// BSD-3-Clause OR GPL-2.0-only", the BSD text reworded, then the
		// GPL's. The scanner sees only the GPL; dsh takes the BSD option.
		"279fa656c62857d42952b86a0789b98669ca1cb4b324a8d9e91397c174af4c14": {"BSD-3-Clause"},
		// github.com/modelcontextprotocol/go-sdk v1.8.0: code under
		// Apache-2.0, or MIT where an author has not yet agreed to
		// relicense (both texts follow); "documentation contributions
		// (excluding specifications)" under CC-BY-4.0, and no document of
		// the module is linked into dsh or shipped with it.
		"af679003d933f045393a6a029f43da113f9ae364eac651d9ae268392985580f5": {"Apache-2.0", "MIT"},
		// github.com/alecthomas/chroma/v2 v2.27.0: the code under MIT; the
		// SIL Open Font License that follows covers only the font data of
		// formatters/svg (font_liberation_mono.go). dsh links chroma's core
		// package alone (the TUI's highlighter; cmd/dsh
		// TestInitTraceOfHighlighter keeps its registries out).
		"13654b052f885cb3fa47d7343e13975d9c8a64c3bcd84993c35d5eb01f22b23f": {"MIT"},
	}
}

// unlicensed lists the modules, as path@version, that carry no licence
// file and that a person has accepted anyway, with why; another version of
// one is checked again.
func unlicensed() map[string]string {
	return map[string]string{
		// Two generated files of protobuf options for Nexus, which
		// go.temporal.io/api (MIT) imports: every Temporal Go client links
		// them, and the temporal provider (subagent/temporal) is one. The
		// repository has no licence file either.
		"github.com/nexus-rpc/nexus-proto-annotations@v0.1.0": "no licence upstream; generated protobuf options that go.temporal.io/api imports",
	}
}

// Module is one module of the build list that the listed packages, or
// their tests, use.
type Module struct {
	Path, Version string
	// Dir holds the module's files (the module cache, or a replacement).
	Dir string
	// Main is the module being checked.
	Main bool
	// TestOnly reports that only tests of the listed packages use it.
	TestOnly bool
	// Files are the licence files of the module's used packages: in their
	// directories and those above them up to the module's root.
	Files []File
	// Notices are the NOTICE files in those directories, which the
	// Apache License asks a redistribution to carry; they are not classified.
	Notices []File
	// pkgDirs are the directories of those packages.
	pkgDirs []string
}

// File is one licence file and what it was recognised as.
type File struct {
	// Name is the file's path relative to the module's directory.
	Name string
	Text []byte
	// IDs are the SPDX identifiers of the licences found, in order.
	IDs []string
	// Percent is how much of the text is known licence text.
	Percent float64
	// Reviewed reports that the IDs come from reviewed, not the scanner.
	Reviewed bool
}

// String names the module as path@version, or path alone for the main
// module and directory replacements.
func (m *Module) String() string {
	if m.Version == "" {
		return m.Path
	}
	return m.Path + "@" + m.Version
}

// Problems returns why the module's licences are not acceptable; none
// when they are.
func (m *Module) Problems() []string {
	if len(m.Files) == 0 {
		if m.Accepted() != "" {
			return nil
		}
		return []string{"no licence file"}
	}
	var out []string
	for _, f := range m.Files {
		switch {
		case len(f.IDs) == 0:
			out = append(out, f.Name+": no known licence")
		case f.Percent < minCoverage:
			out = append(out, fmt.Sprintf("%s: only %.0f%% is known licence text (%s)", f.Name, f.Percent, strings.Join(f.IDs, ", ")))
		}
		for _, id := range f.IDs {
			if allowed(id, m.TestOnly) {
				continue
			}
			where := ""
			if allowed(id, true) {
				where = " outside tests"
			}
			out = append(out, fmt.Sprintf("%s: %s is not allowed%s", f.Name, id, where))
		}
	}
	return out
}

// Accepted returns why a module without a licence file was accepted (see
// unlicensed), or "".
func (m *Module) Accepted() string {
	if len(m.Files) > 0 {
		return ""
	}
	return unlicensed()[m.String()]
}

// Licences returns the distinct licence identifiers of the module's files.
func (m *Module) Licences() []string {
	var ids []string
	for _, f := range m.Files {
		ids = append(ids, f.IDs...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// listed is the part of `go list -json` output read here.
type listed struct {
	Dir      string
	Standard bool
	Module   *struct {
		Path, Version, Dir string
		Main               bool
		Replace            *struct{ Path, Version, Dir string }
	}
}

// Scan lists the packages matching patterns in the module at dir with
// their dependencies, with and without tests, for each platform
// ("GOOS/GOARCH"; none means the host's), and reads the licence files of
// every module they come from. Modules are sorted by path.
func Scan(ctx context.Context, dir string, patterns, platforms []string) ([]*Module, error) {
	if len(platforms) == 0 {
		platforms = []string{""}
	}
	var withTests []listed
	shipped := map[string]bool{}
	for _, platform := range platforms {
		env := os.Environ()
		if platform != "" {
			goos, goarch, ok := strings.Cut(platform, "/")
			if !ok {
				return nil, fmt.Errorf("platform %q is not GOOS/GOARCH", platform)
			}
			env = append(env, "GOOS="+goos, "GOARCH="+goarch)
		}
		all, err := goList(ctx, dir, env, append([]string{"-test"}, patterns...))
		if err != nil {
			return nil, err
		}
		built, err := goList(ctx, dir, env, patterns)
		if err != nil {
			return nil, err
		}
		withTests = append(withTests, all...)
		for _, p := range built {
			if p.Module != nil {
				shipped[p.Module.Path] = true
			}
		}
	}
	byPath := map[string]*Module{}
	for _, p := range withTests {
		if p.Standard || p.Module == nil {
			continue
		}
		m := byPath[p.Module.Path]
		if m == nil {
			m = &Module{Path: p.Module.Path, Version: p.Module.Version, Dir: p.Module.Dir, Main: p.Module.Main,
				TestOnly: !shipped[p.Module.Path]}
			if r := p.Module.Replace; r != nil {
				m.Version, m.Dir = r.Version, r.Dir
			}
			if m.Dir == "" {
				return nil, fmt.Errorf("module %s is not on disk (run go mod download)", m.Path)
			}
			byPath[m.Path] = m
		}
		if p.Dir != "" && !slices.Contains(m.pkgDirs, p.Dir) {
			m.pkgDirs = append(m.pkgDirs, p.Dir)
		}
	}
	mods := slices.Collect(maps.Values(byPath))
	slices.SortFunc(mods, func(a, b *Module) int { return strings.Compare(a.Path, b.Path) })
	for _, m := range mods {
		if err := m.readFiles(); err != nil {
			return nil, err
		}
	}
	return mods, nil
}

// goList runs go list -deps -json in dir with env.
func goList(ctx context.Context, dir string, env, args []string) ([]listed, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-deps", "-json=Dir,Standard,Module"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.Bytes())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// readFiles finds and classifies the licence files of m's packages.
func (m *Module) readFiles() error {
	seen := map[string]bool{}
	for _, pkgDir := range m.pkgDirs {
		rel, err := filepath.Rel(m.Dir, pkgDir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("package directory %s is outside module %s (%s)", pkgDir, m.Path, m.Dir)
		}
		for d := rel; ; d = filepath.Dir(d) {
			if !seen[d] {
				seen[d] = true
				if err := m.readDir(d); err != nil {
					return err
				}
			}
			if d == "." {
				break
			}
		}
	}
	byName := func(a, b File) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(m.Files, byName)
	slices.SortFunc(m.Notices, byName)
	return nil
}

// readDir classifies the licence files in the module directory rel.
func (m *Module) readDir(rel string) error {
	entries, err := os.ReadDir(filepath.Join(m.Dir, rel))
	if err != nil {
		return err
	}
	for _, e := range entries {
		licence, notice := isLicenceName(e.Name()), strings.HasPrefix(strings.ToUpper(e.Name()), "NOTICE")
		if !e.Type().IsRegular() || !licence && !notice {
			continue
		}
		name := filepath.Join(rel, e.Name())
		text, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil {
			return err
		}
		if licence {
			m.Files = append(m.Files, classify(filepath.ToSlash(name), text))
		} else {
			m.Notices = append(m.Notices, File{Name: filepath.ToSlash(name), Text: text})
		}
	}
	return nil
}

// classify recognises the licences in one file's text.
func classify(name string, text []byte) File {
	f := File{Name: name, Text: text}
	if ids, ok := reviewed()[fmt.Sprintf("%x", sha256.Sum256(text))]; ok {
		f.IDs, f.Percent, f.Reviewed = ids, 100, true
		return f
	}
	cov := licensecheck.Scan(text)
	f.Percent = cov.Percent
	for _, match := range cov.Match {
		f.IDs = append(f.IDs, match.ID)
	}
	return f
}

// isLicenceName reports whether a file name is one a licence goes by:
// LICENSE, LICENCE or COPYING with any suffix (LICENSE.txt, LICENSE-MIT),
// or a name ending in -LICENSE (MIT-LICENSE.md), in any case.
func isLicenceName(name string) bool {
	n := strings.ToUpper(name)
	base := strings.TrimSuffix(n, filepath.Ext(n))
	for _, prefix := range []string{"LICENSE", "LICENCE", "COPYING"} {
		if strings.HasPrefix(n, prefix) || strings.HasSuffix(base, "-"+prefix) {
			return true
		}
	}
	return false
}

// WriteNotices writes the licence and NOTICE texts of the modules the
// built packages use (neither the main module nor test-only ones), as a
// release ships them next to its binaries.
func WriteNotices(w io.Writer, mods []*Module) error {
	for _, m := range mods {
		if m.Main || m.TestOnly {
			continue
		}
		for _, f := range slices.Concat(m.Files, m.Notices) {
			if _, err := fmt.Fprintf(w, "==> %s: %s <==\n\n%s\n\n", m, f.Name, bytes.TrimRight(f.Text, "\n")); err != nil {
				return err
			}
		}
	}
	return nil
}
