package hook_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/sandbox"
)

// A hook runs under the configured sandbox, narrowed by the run's: it can
// write its working directory but nothing outside it and the temporary
// directories, and cannot read the user's credential stores (N3, N11).
func TestHookRunsSandboxed(t *testing.T) {
	sandboxtest.Require(t)
	home := sandboxtest.OutsideDir(t)
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o755)
	os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("SECRET"), 0o600)
	t.Setenv("HOME", home)
	cwd := filepath.Join(home, "project")
	os.Mkdir(cwd, 0o755)
	outside := filepath.Join(home, "outside")
	line := fmt.Sprintf("echo in > inside; echo out > %s; cat %s > copied; exit 0", outside, filepath.Join(home, ".ssh", "id_rsa"))
	for _, tc := range []struct {
		configured, ctx sandbox.Mode
		want            string // inside outside copied
	}{
		{"", "", "yes no no"}, // the default, workspace-write
		{sandbox.WorkspaceWrite, "", "yes no no"},
		{sandbox.Full, "", "yes yes yes"},
		{sandbox.Full, sandbox.ReadOnly, "no no no"},
		{sandbox.ReadOnly, sandbox.Full, "no no no"},
	} {
		for _, f := range []string{"inside", "copied"} {
			os.Remove(filepath.Join(cwd, f))
		}
		os.Remove(outside)
		s := set(t, hook.Stop, "", cmd(line)).WithSandbox(tc.configured, "")
		ctx := context.Background()
		if tc.ctx != "" {
			ctx = sandbox.WithMode(ctx, tc.ctx)
		}
		if err := s.Run(ctx, hook.Input{Event: hook.Stop, Cwd: cwd}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range []string{filepath.Join(cwd, "inside"), outside, filepath.Join(cwd, "copied")} {
			b, err := os.ReadFile(f)
			got = append(got, map[bool]string{true: "yes", false: "no"}[err == nil && len(b) > 0])
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("configured %q, run %q: %s, want %s", tc.configured, tc.ctx, g, tc.want)
		}
	}
	// The sandbox travels with the hooks a definition adds.
	def := set(t, hook.Stop, "", cmd("echo out > "+outside+"; exit 0"))
	os.Remove(outside)
	if err := (*hook.Set)(nil).WithSandbox(sandbox.WorkspaceWrite, "").With(def).Run(t.Context(), hook.Input{Event: hook.Stop, Cwd: cwd}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("a definition's hook wrote outside its sandbox")
	}
	noChildren(t)
}
