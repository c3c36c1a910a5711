package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dep is a dependency module example.com/NAME of a fixture.
type dep struct {
	name string
	// test: only the main package's test imports it.
	test bool
	// licences maps a file in the module to the testdata file it copies.
	licences map[string]string
	// pkgs are the imported package directories (default: the root); the
	// module also has an unused package "unused".
	pkgs []string
}

// fixture writes a main module example.com/app, under appLicence (a
// testdata file, or none), whose package imports the built deps and whose
// test imports the others; every dep is a directory replacement.
func fixture(t *testing.T, appLicence string, deps ...dep) string {
	t.Helper()
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gomod := "module example.com/app\n\ngo 1.26\n"
	var imports, testImports string
	for _, d := range deps {
		path := "example.com/" + d.name
		gomod += fmt.Sprintf("require %s v0.0.0\nreplace %s => ./mods/%s\n", path, path, d.name)
		dir := filepath.Join("mods", d.name)
		write(filepath.Join(dir, "go.mod"), "module "+path+"\n\ngo 1.26\n")
		for name, testdata := range d.licences {
			licence(t, root, filepath.Join(dir, name), testdata)
		}
		pkgs := d.pkgs
		if pkgs == nil {
			pkgs = []string{"."}
		}
		for _, p := range append([]string{"unused"}, pkgs...) {
			write(filepath.Join(dir, p, "p.go"), "package p\n")
		}
		for _, p := range pkgs {
			line := fmt.Sprintf("import _ %q\n", strings.TrimSuffix(path+"/"+p, "/."))
			if d.test {
				testImports += line
			} else {
				imports += line
			}
		}
	}
	write("go.mod", gomod)
	write("app.go", "package app\n"+imports)
	write("app_test.go", "package app\n"+testImports)
	if appLicence != "" {
		licence(t, root, "LICENSE", appLicence)
	}
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOWORK", "off")
	return root
}

func TestScan(t *testing.T) {
	mit := map[string]string{"LICENSE": "MIT"}
	for _, tc := range []struct {
		name       string
		appLicence string
		deps       []dep
		// want maps each module to its problems, joined by "; ".
		want map[string]string
	}{
		{"permissive, and MPL-2.0 in tests", "MIT",
			[]dep{{name: "a", licences: mit}, {name: "b", test: true, licences: map[string]string{"LICENSE.txt": "MPL-2.0"}}},
			map[string]string{"example.com/app": "", "example.com/a": "", "example.com/b": ""}},
		{"MPL-2.0 outside tests", "MIT",
			[]dep{{name: "b", licences: map[string]string{"LICENSE": "MPL-2.0"}}},
			map[string]string{"example.com/app": "", "example.com/b": "LICENSE: MPL-2.0 is not allowed outside tests"}},
		{"AGPL in tests", "MIT",
			[]dep{{name: "c", test: true, licences: map[string]string{"COPYING": "AGPL-3.0"}}},
			map[string]string{"example.com/app": "", "example.com/c": "COPYING: AGPL-3.0-or-later is not allowed"}},
		{"no licence file", "MIT",
			[]dep{{name: "d", licences: map[string]string{"NOTICE": "MIT"}}},
			map[string]string{"example.com/app": "", "example.com/d": "no licence file"}},
		{"a known licence with conditions added", "MIT",
			[]dep{{name: "e", licences: map[string]string{"LICENSE.md": "MIT-plus-restriction"}}},
			map[string]string{"example.com/app": "", "example.com/e": "LICENSE.md: only 58% is known licence text (MIT)"}},
		{"no known licence", "MIT",
			[]dep{{name: "f", licences: map[string]string{"license": "proprietary"}}},
			map[string]string{"example.com/app": "", "example.com/f": "license: no known licence"}},
		{"a package's own licence, not an unused one's", "MIT",
			[]dep{{name: "g", pkgs: []string{"inner"},
				licences: map[string]string{"LICENSE": "MIT", "inner/LICENSE-CODE": "AGPL-3.0", "unused/LICENSE": "AGPL-3.0"}}},
			map[string]string{"example.com/app": "", "example.com/g": "inner/LICENSE-CODE: AGPL-3.0-or-later is not allowed"}},
		{"the checked module without a licence", "", []dep{{name: "a", licences: mit}},
			map[string]string{"example.com/app": "no licence file", "example.com/a": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods, err := Scan(context.Background(), fixture(t, tc.appLicence, tc.deps...), []string{"./..."}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, m := range mods {
				got[m.Path] = strings.Join(m.Problems(), "; ")
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("problems\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestScanMarksTestOnlyModules(t *testing.T) {
	dir := fixture(t, "MIT", dep{name: "a", licences: map[string]string{"LICENSE": "MIT"}},
		dep{name: "b", test: true, licences: map[string]string{"LICENSE": "MPL-2.0"}})
	mods, err := Scan(context.Background(), dir, []string{"./..."}, []string{"linux/amd64", "darwin/arm64"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mods {
		got = append(got, fmt.Sprintf("%s main=%v test=%v %v", m.Path, m.Main, m.TestOnly, m.Licences()))
	}
	want := []string{"example.com/a main=false test=false [MIT]", "example.com/app main=true test=false [MIT]",
		"example.com/b main=false test=true [MPL-2.0]"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestCLI(t *testing.T) {
	t.Run("a disallowed licence fails naming the module", func(t *testing.T) {
		dir := fixture(t, "MIT", dep{name: "b", licences: map[string]string{"LICENSE": "MPL-2.0"}})
		var stdout, stderr bytes.Buffer
		if code := cli(context.Background(), []string{dir}, &stdout, &stderr); code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		want := "licenses: example.com/b: LICENSE: MPL-2.0 is not allowed outside tests\n" +
			"licenses: 1 of 2 modules have an unknown or disallowed licence\n"
		if stderr.String() != want {
			t.Errorf("stderr %q, want %q", stderr.String(), want)
		}
	})
	t.Run("notices carry the built dependencies' licences only", func(t *testing.T) {
		dir := fixture(t, "AGPL-3.0", dep{name: "a", licences: map[string]string{"LICENSE": "MIT", "NOTICE": "proprietary"}},
			dep{name: "b", test: true, licences: map[string]string{"LICENSE": "MPL-2.0"}})
		notices := filepath.Join(t.TempDir(), "notices")
		var stdout, stderr bytes.Buffer
		// The checked module is under the AGPL: no notices.
		if code := cli(context.Background(), []string{"-notices", notices, dir}, &stdout, &stderr); code != 1 {
			t.Fatalf("exit %d, want 1 (the checked module is AGPL)", code)
		}
		if _, err := os.Stat(notices); !os.IsNotExist(err) {
			t.Errorf("notices written although the check failed: %v", err)
		}
		licence(t, dir, "LICENSE", "MIT")
		stdout.Reset()
		stderr.Reset()
		if code := cli(context.Background(), []string{"-notices", notices, dir, "."}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		text, err := os.ReadFile(notices)
		if err != nil {
			t.Fatal(err)
		}
		mitText, _ := os.ReadFile("testdata/MIT")
		noticeText, _ := os.ReadFile("testdata/proprietary")
		if want := "==> example.com/a: LICENSE <==\n\n" + string(mitText) + "\n" +
			"==> example.com/a: NOTICE <==\n\n" + string(noticeText) + "\n"; string(text) != want {
			t.Errorf("notices\n%s\nwant\n%s", text, want)
		}
		for _, want := range []string{"example.com/a", "example.com/app", "example.com/b"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout lacks %s:\n%s", want, stdout.String())
			}
		}
	})
	t.Run("usage", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := cli(context.Background(), nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage:") {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
	})
}

// licence copies a testdata licence text to name under dir.
func licence(t *testing.T, dir, name, testdata string) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", testdata))
	if err == nil {
		err = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), text, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A reviewed licence text (libcap/psx's dual BSD-3-Clause OR GPL-2.0, of
// which the scanner sees only the GPL) is accepted as reviewed, and only
// while its text is exactly the reviewed one.
func TestReviewedTextIsPinned(t *testing.T) {
	dir := fixture(t, "MIT", dep{name: "psx", licences: map[string]string{"License": "libcap-psx"}})
	scan := func() *Module {
		t.Helper()
		mods, err := Scan(context.Background(), dir, []string{"./..."}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mods {
			if m.Path == "example.com/psx" {
				return m
			}
		}
		t.Fatalf("example.com/psx not listed")
		return nil
	}
	m := scan()
	if p := m.Problems(); len(p) != 0 || !m.Files[0].Reviewed || !slices.Equal(m.Licences(), []string{"BSD-3-Clause"}) {
		t.Fatalf("reviewed text: problems %q, file %+v", p, m.Files[0].IDs)
	}
	path := filepath.Join(dir, "mods", "psx", "License")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(text, []byte("one or the other"), []byte("both"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	m = scan()
	if got, want := strings.Join(m.Problems(), "; "), "License: GPL-2.0 is not allowed"; got != want || m.Files[0].Reviewed {
		t.Errorf("changed text: problems %q, want %q", got, want)
	}
}

// A module without a licence file passes only at the version a person
// accepted.
func TestUnlicensedIsPinned(t *testing.T) {
	m := &Module{Path: "github.com/nexus-rpc/nexus-proto-annotations", Version: "v0.1.0"}
	if p := m.Problems(); len(p) != 0 || m.Accepted() == "" {
		t.Errorf("the accepted version: problems %q", p)
	}
	m.Version = "v0.2.0"
	if p := m.Problems(); len(p) != 1 || p[0] != "no licence file" {
		t.Errorf("another version: problems %q", p)
	}
}
