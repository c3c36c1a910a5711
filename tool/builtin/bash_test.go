package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/internal/dshbin"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
)

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// A background process a command leaves behind dies with the call, even
// one that left the command's process group (while its output is
// redirected, so that nothing waits for it).
func TestBashBackgroundDiesWithTheCall(t *testing.T) {
	s := scope(t, Options{})
	for _, cmd := range []string{
		"sleep 100 > /dev/null 2>&1 & echo $!",
		"setsid sleep 100 > /dev/null 2>&1 & echo $!",
	} {
		t.Run(cmd, func(t *testing.T) {
			res, text := run(t, s, t.TempDir(), "bash", args("command", cmd))
			wantOK(t, res, text)
			pid, err := strconv.Atoi(strings.TrimSpace(text))
			if err != nil {
				t.Fatalf("no pid in %q", text)
			}
			// The supervisor kills the group, and what left it, before the
			// call returns; without a supervisor only the group dies.
			if alive(pid) && (strings.HasPrefix(cmd, "sleep") || os.Getenv(proc.SupervisorEnv) != "") {
				t.Fatalf("background process %d outlives the call", pid)
			}
			if err := proc.NoChildren(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// writes runs a bash call that writes each file and reports, per file,
// "ok" or "denied".
func writes(t *testing.T, ctx context.Context, opts Options, cwd string, files ...string) string {
	t.Helper()
	cmd := `for f in ` + strings.Join(files, " ") + `; do if { echo x > "$f"; } 2>/dev/null; then echo ok; else echo denied; fi; done`
	res, text := runCtx(ctx, scope(t, opts), cwd, "bash", args("command", cmd))
	wantOK(t, res, text)
	for _, f := range files {
		os.Remove(f)
	}
	return strings.Join(strings.Fields(text), " ")
}

func TestBashSandbox(t *testing.T) {
	sandboxtest.Require(t)
	cwd, out := t.TempDir(), sandboxtest.OutsideDir(t)
	in, sub, tmp, outside := filepath.Join(cwd, "f"), filepath.Join(cwd, "sub"), filepath.Join(os.TempDir(), "dsh-sandbox-test"), filepath.Join(out, "f")
	os.Mkdir(sub, 0o755)
	files := []string{in, filepath.Join(sub, "g"), tmp, outside}
	for _, tc := range []struct {
		mode sandbox.Mode
		want string
	}{
		{"", "ok ok ok denied"}, // the default, workspace-write
		{sandbox.WorkspaceWrite, "ok ok ok denied"},
		{sandbox.ReadOnly, "denied denied denied denied"},
		{sandbox.Full, "ok ok ok ok"},
	} {
		if got := writes(t, t.Context(), Options{Sandbox: tc.mode}, cwd, files...); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.mode, got, tc.want)
		}
	}
	// A call's context narrows the configured mode, and never widens it.
	for _, tc := range []struct {
		configured, asked sandbox.Mode
		want              string
	}{
		{sandbox.Full, sandbox.ReadOnly, "denied denied denied denied"},
		{sandbox.Full, sandbox.WorkspaceWrite, "ok ok ok denied"},
		{sandbox.ReadOnly, sandbox.Full, "denied denied denied denied"},
		{sandbox.WorkspaceWrite, sandbox.Full, "ok ok ok denied"},
	} {
		ctx := sandbox.WithMode(t.Context(), tc.asked)
		if got := writes(t, ctx, Options{Sandbox: tc.configured}, cwd, files...); got != tc.want {
			t.Errorf("configured %s, child asks %s: %s, want %s", tc.configured, tc.asked, got, tc.want)
		}
	}
}

func TestBashDescriptionNamesTheSandbox(t *testing.T) {
	for mode, want := range map[sandbox.Mode]string{
		"":                     "write only under the working directory",
		sandbox.ReadOnly:       "cannot write files",
		sandbox.WorkspaceWrite: "write only under the working directory",
	} {
		if d := Tools(Options{Sandbox: mode})[0].Description; !strings.Contains(d, want) {
			t.Errorf("%q: %s", mode, d)
		}
	}
	if d := Tools(Options{Sandbox: sandbox.Full})[0].Description; strings.Contains(d, "sandbox") {
		t.Errorf("full: %s", d)
	}
}

func TestResultsAreRedacted(t *testing.T) {
	const key = "sk-REDACT-ME-123"
	s := scope(t, Options{Redact: strings.NewReplacer(key, "[REDACTED]").Replace})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"env": "KEY=" + key + "\n"})
	for _, c := range []struct{ name, args string }{
		{"bash", args("command", "echo "+key)},
		{"bash", args("command", "echo "+key+"; exit 3")},
		{"read_file", args("path", "env")},
		{"grep", args("pattern", "KEY")},
		{"read_file", args("path", key)}, // an error naming it
	} {
		res, text := run(t, s, dir, c.name, c.args)
		if strings.Contains(text, key) || !strings.Contains(text, "[REDACTED]") {
			t.Errorf("%s %s: %q (error %v)", c.name, c.args, text, res.IsError)
		}
	}
}

// BenchmarkBash is the cost of one `bash -c true` call: started directly,
// supervised by this test binary, and supervised by a dsh binary (as in
// production).
func BenchmarkBash(b *testing.B) {
	for _, how := range []string{"direct", "supervised", "supervised-by-dsh"} {
		b.Run(how, func(b *testing.B) {
			switch how {
			case "direct":
				b.Setenv(proc.SupervisorEnv, "")
			case "supervised-by-dsh":
				dsh, err := dshbin.Build(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				b.Setenv(proc.SupervisorEnv, dsh)
			}
			dir := b.TempDir()
			r := tool.NewRegistry()
			if _, err := Register(r, Options{}); err != nil {
				b.Fatal(err)
			}
			s := r.NewScope()
			for b.Loop() {
				if res, text := runCtx(context.Background(), s, dir, "bash", args("command", "true")); res.IsError {
					b.Fatal(text)
				}
			}
		})
	}
}

// A command too long for the kernel fails cleanly, leaving nothing behind.
func TestBashHugeCommand(t *testing.T) {
	s := scope(t, Options{})
	res, text := run(t, s, t.TempDir(), "bash", args("command", "echo "+strings.Repeat("x", 300<<10)))
	wantErr(t, res, text, tool.CodeFailed, "argument list too long")
	if err := proc.NoChildren(); err != nil {
		t.Fatal(err)
	}
}

// A command that kills its supervisor: sandboxed, it may not signal it;
// unsandboxed (full), it can, and the call then ends at once with an error
// (what the command started may escape: see the README).
func TestBashKillingItsSupervisor(t *testing.T) {
	if os.Getenv(proc.SupervisorEnv) == "" {
		t.Skip("no supervisor")
	}
	t.Run("full", func(t *testing.T) {
		dir := t.TempDir()
		res, text := run(t, scope(t, Options{Sandbox: sandbox.Full}), dir, "bash",
			args("command", "echo $$ > pid; kill -9 $PPID; sleep 30"))
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(-pid, syscall.SIGKILL) // whatever escaped
			}
		}
		// Killed before or after it reported the command's PID.
		if !res.IsError || !strings.Contains(text, "supervisor ended without reporting") && !strings.Contains(text, "supervisor did not answer") {
			t.Fatalf("got (isError=%v) %q", res.IsError, text)
		}
		if err := proc.NoChildren(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("workspace-write", func(t *testing.T) {
		if err := sandbox.Check(sandbox.WorkspaceWrite); err != nil {
			t.Skip(err)
		}
		res, text := run(t, scope(t, Options{}), t.TempDir(), "bash", args("command", "kill -9 $PPID 2>&1; echo status $?"))
		wantOK(t, res, text)
		if !strings.Contains(text, "Operation not permitted") || !strings.Contains(text, "status 1") {
			t.Fatalf("a sandboxed command signalled its supervisor: %q", text)
		}
	})
}
