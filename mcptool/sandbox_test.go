package mcptool_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/sandbox"
)

// A stdio server runs under the sandbox of the commands dsh runs: it may
// write its working directory, not outside it; a server block of dsh's own
// configuration can opt out with sandbox: full (N3).
func TestStdioServerSandboxed(t *testing.T) {
	sandboxtest.Require(t)
	out := sandboxtest.OutsideDir(t)
	for _, tc := range []struct {
		name           string
		configured     sandbox.Mode // Options.Sandbox
		server         sandbox.Mode // the block's
		inside, escape bool
	}{
		{"default", "", "", true, false},
		{"read-only", sandbox.ReadOnly, "", false, false},
		{"server opts out", sandbox.WorkspaceWrite, sandbox.Full, true, true},
		{"full", sandbox.Full, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(out, "srv")
			if err != nil {
				t.Fatal(err)
			}
			inside, outside := filepath.Join(dir, "inside"), filepath.Join(out, filepath.Base(dir)+"-outside")
			srv := fake("serve")
			srv.Command, srv.Args = "/bin/sh", []string{"-c", `echo x > "$1" 2>/dev/null; echo x > "$2" 2>/dev/null; exec "$0"`, os.Args[0], inside, outside}
			srv.Sandbox = tc.server
			s := newSet(t, map[string]mcptool.ServerConfig{"w": srv}, mcptool.Options{Dir: dir, Sandbox: tc.configured})
			s.Ready(context.Background())
			if st := s.Status(); st[0].Err != nil {
				t.Fatalf("the server did not start: %v", st[0].Err)
			}
			_, errIn := os.Stat(inside)
			_, errOut := os.Stat(outside)
			if (errIn == nil) != tc.inside || (errOut == nil) != tc.escape {
				t.Errorf("wrote its folder: %v (want %v), outside: %v (want %v)", errIn == nil, tc.inside, errOut == nil, tc.escape)
			}
		})
	}
	bad := fake("serve")
	bad.Sandbox = "wide"
	if err := bad.Validate("x"); err == nil {
		t.Error("an unknown sandbox mode passed")
	}
}

// A sandboxed stdio server writes its package managers' cache in
// Options.CacheDir (npx and uvx servers need one), not in the user's
// caches, unless its block names one itself.
func TestStdioServerCacheDir(t *testing.T) {
	sandboxtest.Require(t)
	out := sandboxtest.OutsideDir(t)
	cache := filepath.Join(out, "cache")
	dir, err := os.MkdirTemp(out, "srv")
	if err != nil {
		t.Fatal(err)
	}
	srv := fake("serve")
	srv.Command, srv.Args = "/bin/sh", []string{"-c",
		`mkdir -p "$npm_config_cache/_npx" && echo x > "$npm_config_cache/_npx/pkg" && echo "$XDG_CACHE_HOME" > "$1"; exec "$0"`, os.Args[0], filepath.Join(dir, "xdg")}
	s := newSet(t, map[string]mcptool.ServerConfig{"w": srv}, mcptool.Options{Dir: dir, CacheDir: cache})
	s.Ready(context.Background())
	if st := s.Status(); st[0].Err != nil {
		t.Fatalf("the server did not start: %v", st[0].Err)
	}
	if _, err := os.Stat(filepath.Join(cache, "npm_config_cache", "_npx", "pkg")); err != nil {
		t.Fatalf("the server could not write its npm cache in the cache folder: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "xdg")); strings.TrimSpace(string(b)) != filepath.Join(cache, "XDG_CACHE_HOME") {
		t.Fatalf("XDG_CACHE_HOME = %q", b)
	}
}
