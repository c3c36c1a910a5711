package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/toolname"
)

func TestMain(m *testing.M) {
	proc.Main() // bash commands run supervised, as in dsh
	goleak.VerifyTestMain(m)
}

// scope returns a scope over a registry holding the built-in tools.
func scope(t *testing.T, opts Options) *tool.Scope {
	t.Helper()
	r := tool.NewRegistry()
	dispose, err := Register(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dispose)
	return r.NewScope()
}

// run runs one call of name with JSON args in dir.
func run(t *testing.T, s *tool.Scope, dir, name, args string) (tool.Result, string) {
	t.Helper()
	return runCtx(t.Context(), s, dir, name, args)
}

func runCtx(ctx context.Context, s *tool.Scope, dir, name, args string) (tool.Result, string) {
	res := s.Execute(ctx, tool.Call{ID: "c1", Name: name, Arguments: json.RawMessage(args), Cwd: dir})
	return res, content.JoinText(res.Content)
}

func args(kv ...any) string {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func wantOK(t *testing.T, res tool.Result, text string) {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected error result %s: %s", res.Code, text)
	}
}

func wantErr(t *testing.T, res tool.Result, text, code, substr string) {
	t.Helper()
	if !res.IsError || res.Code != code || !strings.Contains(text, substr) {
		t.Fatalf("got (isError=%v, code=%q, %q), want error %s containing %q", res.IsError, res.Code, text, code, substr)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRegister(t *testing.T) {
	r := tool.NewRegistry()
	dispose, err := Register(r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bash", "edit_file", "glob", "grep", "read_file", "write_file"}
	if diff := cmp.Diff(want, r.Names()); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	for _, spec := range r.NewScope().Specs() {
		var schema struct {
			Properties map[string]struct{ Description string }
			Required   []string
		}
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
			t.Fatal(err)
		}
		if spec.Description == "" || len(schema.Required) == 0 {
			t.Errorf("%s: description %q, required %q", spec.Name, spec.Description, schema.Required)
		}
		for name, p := range schema.Properties {
			if p.Description == "" {
				t.Errorf("%s.%s has no description", spec.Name, name)
			}
		}
	}
	dispose()
	if len(r.Names()) != 0 {
		t.Fatalf("after dispose: %q", r.Names())
	}

	// All-or-nothing: a clash on the fourth tool leaves only the clashing one.
	if _, err := r.Register(tool.Definition{Name: "glob", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.Result{}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(r, Options{}); !errors.Is(err, &tool.Error{Code: tool.CodeDuplicate}) {
		t.Fatalf("Register over a clash: %v", err)
	}
	if diff := cmp.Diff([]string{"glob"}, r.Names()); diff != "" {
		t.Fatalf("names after failed Register (-want +got):\n%s", diff)
	}
}

func TestMissingArgument(t *testing.T) {
	s := scope(t, Options{})
	for _, c := range []struct{ name, args string }{
		{"bash", `{}`},
		{"read_file", `{}`},
		{"write_file", `{"path":"x"}`},
		{"edit_file", `{"path":"x","old_string":"a"}`},
		{"glob", `{"path":"."}`},
		{"grep", `{"pattern":1}`},
	} {
		res, text := run(t, s, t.TempDir(), c.name, c.args)
		wantErr(t, res, text, tool.CodeInvalidArgs, "invalid arguments")
	}
}

func TestBash(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	res, text := run(t, s, dir, "bash", args("command", "echo out; echo err >&2; pwd; echo hi > made.txt"))
	wantOK(t, res, text)
	if want := "out\nerr\n" + dir + "\n"; text != want {
		t.Fatalf("got %q, want %q", text, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "made.txt")); err != nil {
		t.Fatalf("command did not run in Cwd: %v", err)
	}

	res, text = run(t, s, dir, "bash", args("command", "true"))
	if wantOK(t, res, text); text != "(no output)" {
		t.Fatalf("got %q", text)
	}
	res, text = run(t, s, dir, "bash", args("command", "cat; echo done")) // stdin is empty
	if wantOK(t, res, text); text != "done\n" {
		t.Fatalf("got %q", text)
	}
}

func TestBashExitStatus(t *testing.T) {
	s := scope(t, Options{})
	res, text := run(t, s, t.TempDir(), "bash", args("command", "echo partial; exit 3"))
	wantErr(t, res, text, CodeExitStatus, "partial\nexit code 3")
	if strings.HasPrefix(text, "Error:") {
		t.Fatalf("output should be shown as is: %q", text)
	}
}

func TestBashOutputCap(t *testing.T) {
	s := scope(t, Options{OutputLimit: 1000})
	res, text := run(t, s, t.TempDir(), "bash",
		args("command", "printf START; head -c 100000 /dev/zero | tr '\\0' a; printf END"))
	wantOK(t, res, text)
	if !strings.HasPrefix(text, "START") || !strings.HasSuffix(text, "END") ||
		!strings.Contains(text, "[… 99008 bytes omitted …]") || len(text) > 1100 {
		t.Fatalf("got %d bytes: %.80q … %.80q", len(text), text, text[max(0, len(text)-80):])
	}
}

func TestHeadTailUTF8(t *testing.T) {
	w := &headTail{limit: 11}
	for range 20 {
		w.Write([]byte("é")) // 2 bytes each, written one rune at a time
	}
	got := w.String()
	if !utf8.ValidString(got) || got != "éé\n[… 30 bytes omitted …]\nééé" {
		t.Fatalf("got %q", got)
	}
	small := &headTail{limit: 100}
	small.Write([]byte("abc"))
	small.Write([]byte("def"))
	if small.String() != "abcdef" {
		t.Fatalf("got %q", small.String())
	}
}

func TestBashTimeout(t *testing.T) {
	s := scope(t, Options{})
	start := time.Now()
	res, text := run(t, s, t.TempDir(), "bash", args("command", "echo $$; sleep 30 & sleep 30", "timeout_ms", 300))
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	wantErr(t, res, text, CodeTimeout, "timed out after 300ms")
	pgid, err := strconv.Atoi(strings.SplitN(text, "\n", 2)[0])
	if err != nil {
		t.Fatalf("no pgid in %q", text)
	}
	waitGroupGone(t, pgid)
}

func TestBashDefaultTimeout(t *testing.T) {
	s := scope(t, Options{BashTimeout: 200 * time.Millisecond})
	res, text := run(t, s, t.TempDir(), "bash", args("command", "sleep 30"))
	wantErr(t, res, text, CodeTimeout, "timed out after 200ms")
}

func TestBashCancelKillsGroup(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type outcome struct {
		res  tool.Result
		text string
	}
	done := make(chan outcome, 1)
	go func() {
		res, text := runCtx(ctx, s, dir, "bash", args("command", "sleep 30 & echo $$ > pgid; sleep 30"))
		done <- outcome{res, text}
	}()
	var pgid int
	for deadline := time.Now().Add(10 * time.Second); pgid == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
		if b, err := os.ReadFile(filepath.Join(dir, "pgid")); err == nil && strings.HasSuffix(string(b), "\n") {
			pgid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if members := groupMembers(pgid); members < 2 {
		t.Fatalf("expected the shell and a background sleep in group %d, found %d", pgid, members)
	}
	cancel()
	select {
	case o := <-done:
		wantErr(t, o.res, o.text, tool.CodeFailed, "command aborted: context canceled")
	case <-time.After(5 * time.Second):
		t.Fatal("bash did not return promptly after cancellation")
	}
	waitGroupGone(t, pgid)
}

func TestBashBackgroundDoesNotHang(t *testing.T) {
	s := scope(t, Options{})
	start := time.Now()
	res, text := run(t, s, t.TempDir(), "bash", args("command", "echo $$; sleep 20 &"))
	wantOK(t, res, text)
	if pgid, err := strconv.Atoi(strings.TrimSpace(text)); err == nil {
		defer syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a background process holding the output kept bash for %v", d)
	}
}

// groupMembers counts the live (non-zombie) processes of a process group.
func groupMembers(pgid int) int {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return 0
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 1 // no /proc: the group still answers signals
	}
	n := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); groupMembers(pgid) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(-pgid, syscall.SIGKILL)
			t.Fatalf("process group %d still has live processes", pgid)
		}
	}
}

func TestReadFile(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"five.txt":  "one\ntwo\r\nthree\nfour\nfive",
		"empty.txt": "",
		"bin.dat":   "text\x00more",
		"sub/x":     "x",
	})
	for _, c := range []struct{ args, want string }{
		{args("path", "five.txt"), "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\tfive\n"},
		{args("path", "five.txt", "offset", 2, "limit", 2), "     2\ttwo\n     3\tthree\n[more lines follow; continue with offset=4]\n"},
		{args("path", "five.txt", "offset", 5), "     5\tfive\n"},
		{args("path", filepath.Join(dir, "five.txt"), "limit", 1), "     1\tone\n[more lines follow; continue with offset=2]\n"},
		{args("path", "five.txt", "offset", 9), "(" + filepath.Join(dir, "five.txt") + " has only 5 lines; offset 9 is past the end)"},
		{args("path", "empty.txt"), "(" + filepath.Join(dir, "empty.txt") + " is empty)"},
	} {
		res, text := run(t, s, dir, "read_file", c.args)
		wantOK(t, res, text)
		if text != c.want {
			t.Errorf("read_file %s = %q, want %q", c.args, text, c.want)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"sub", "sub is a directory"},
		{"bin.dat", "bin.dat appears to be a binary file"},
		{"missing.txt", "missing.txt does not exist"},
	} {
		res, text := run(t, s, dir, "read_file", args("path", c.path))
		wantErr(t, res, text, tool.CodeFailed, c.want)
	}
	res, text := run(t, s, dir, "read_file", args("path", "five.txt", "offset", -1))
	wantErr(t, res, text, tool.CodeInvalidArgs, "must not be negative")
}

func TestReadFileOutputLimit(t *testing.T) {
	s := scope(t, Options{OutputLimit: 40})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"f": "aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\n", "long": strings.Repeat("z", 100)})
	res, text := run(t, s, dir, "read_file", args("path", "f"))
	wantOK(t, res, text)
	if want := "     1\taaaaaaaaaa\n     2\tbbbbbbbbbb\n[output limit reached; continue with offset=3]\n"; text != want {
		t.Fatalf("got %q, want %q", text, want)
	}
	res, text = run(t, s, dir, "read_file", args("path", "long"))
	wantOK(t, res, text)
	if want := "     1\tzzzzzzzzzzzzz…\n[output limit reached; continue with offset=2]\n"; text != want {
		t.Fatalf("got %q, want %q", text, want)
	}
}

func TestWriteFile(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	res, text := run(t, s, dir, "write_file", args("path", "a/b/c.txt", "content", "hello"))
	wantOK(t, res, text)
	p := filepath.Join(dir, "a", "b", "c.txt")
	if want := "wrote 5 bytes to " + p; text != want {
		t.Fatalf("got %q, want %q", text, want)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "hello" {
		t.Fatalf("file holds %q, %v", b, err)
	}

	// Overwriting keeps the mode and leaves no temporary file behind.
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	res, text = run(t, s, dir, "write_file", args("path", p, "content", "bye"))
	wantOK(t, res, text)
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after overwrite: %v, %v", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(p)); len(entries) != 1 {
		t.Fatalf("directory holds %d entries", len(entries))
	}

	res, text = run(t, s, dir, "write_file", args("path", "a", "content", "x"))
	wantErr(t, res, text, tool.CodeFailed, "is a directory")
}

func TestEditFile(t *testing.T) {
	s := scope(t, Options{})
	for _, c := range []struct {
		name, args, code, text, file string
	}{
		{"unique", args("path", "f.go", "old_string", "beta", "new_string", "BETA"), "", "replaced 1 occurrence(s)", "alpha BETA gamma alpha"},
		{"ambiguous", args("path", "f.go", "old_string", "alpha", "new_string", "A"), tool.CodeFailed, "occurs 2 times", ""},
		{"replace all", args("path", "f.go", "old_string", "alpha", "new_string", "A", "replace_all", true), "", "replaced 2 occurrence(s)", "A beta gamma A"},
		{"not found", args("path", "f.go", "old_string", "delta", "new_string", "x"), tool.CodeFailed, "old_string not found in ", ""},
		{"empty", args("path", "f.go", "old_string", "", "new_string", "x"), tool.CodeInvalidArgs, "must not be empty", ""},
		{"identical", args("path", "f.go", "old_string", "beta", "new_string", "beta"), tool.CodeInvalidArgs, "identical", ""},
		{"missing file", args("path", "nope.go", "old_string", "a", "new_string", "b"), tool.CodeFailed, "does not exist", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			const orig = "alpha beta gamma alpha"
			writeFiles(t, dir, map[string]string{"f.go": orig})
			res, text := run(t, s, dir, "edit_file", c.args)
			if c.code != "" {
				wantErr(t, res, text, c.code, c.text)
				c.file = orig
			} else if wantOK(t, res, text); !strings.Contains(text, c.text) {
				t.Fatalf("got %q, want %q", text, c.text)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "f.go")); string(b) != c.file {
				t.Fatalf("file holds %q, want %q", b, c.file)
			}
		})
	}
}

func TestGlob(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	files := []string{"a.go", "sub/b.go", "sub/deep/c.go", "sub/x.txt", ".git/d.go", "other/e.go"}
	for i, f := range files {
		writeFiles(t, dir, map[string]string{f: "x"})
		mod := time.Now().Add(time.Duration(i-len(files)) * time.Hour) // later files are newer
		if err := os.Chtimes(filepath.Join(dir, f), mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ args, want string }{
		{args("pattern", "**/*.go"), "other/e.go\nsub/deep/c.go\nsub/b.go\na.go\n"},
		{args("pattern", "*.go"), "a.go\n"},
		{args("pattern", "sub/**/*.go"), "sub/deep/c.go\nsub/b.go\n"},
		{args("pattern", "s?b/*.{go}"), "no files match s?b/*.{go}"},
		{args("pattern", "s?b/[bx].*"), "sub/x.txt\nsub/b.go\n"},
		{args("pattern", "**/*.go", "path", "sub"), "deep/c.go\nb.go\n"},
		{args("pattern", filepath.Join(dir, "sub", "*.txt")), filepath.Join(dir, "sub", "x.txt") + "\n"},
		{args("pattern", "nothere/*.go"), "no files match nothere/*.go"},
	} {
		res, text := run(t, s, dir, "glob", c.args)
		wantOK(t, res, text)
		if text != c.want {
			t.Errorf("glob %s = %q, want %q", c.args, text, c.want)
		}
	}
	res, text := run(t, s, dir, "glob", args("pattern", "[a-"))
	wantErr(t, res, text, tool.CodeInvalidArgs, "invalid glob pattern")
	res, text = run(t, s, dir, "glob", args("pattern", "*", "path", "missing"))
	wantErr(t, res, text, tool.CodeFailed, "does not exist")
}

func TestGlobTruncates(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	files := map[string]string{}
	for i := range maxGlobResults + 5 {
		files[fmt.Sprintf("f%04d", i)] = ""
	}
	writeFiles(t, dir, files)
	res, text := run(t, s, dir, "glob", args("pattern", "**"))
	wantOK(t, res, text)
	if n := strings.Count(text, "\n"); n != maxGlobResults+1 || !strings.HasSuffix(text, "[showing 1000 of 1005 matches; narrow the pattern]\n") {
		t.Fatalf("got %d lines ending %q", n, text[len(text)-60:])
	}
}

func TestGrep(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.go":         "package a\n// Hello world\nfunc hello() {}\n",
		"b.txt":        "hello from text\n",
		"sub/c.go":     "x := \"hello\"\n" + strings.Repeat("hello ", 100) + "\n",
		".git/config":  "hello\n",
		"sub/blob.bin": "hello\x00\n",
	})
	long := strings.Repeat("hello ", 100)[:500] + "…"
	for _, c := range []struct{ args, want string }{
		{args("pattern", "hello", "glob", "*.go"), "a.go:3:func hello() {}\nsub/c.go:1:x := \"hello\"\nsub/c.go:2:" + long + "\n"},
		{args("pattern", "^hello", "ignore_case", true), "b.txt:1:hello from text\nsub/c.go:2:" + long + "\n"},
		{args("pattern", "hello wor", "ignore_case", true), "a.go:2:// Hello world\n"},
		{args("pattern", "hello", "path", "sub/c.go", "max_results", 1), "c.go:1:x := \"hello\"\n[stopped after 1 matches; narrow the search or raise max_results]\n"},
		{args("pattern", "hello", "path", "sub", "glob", "**/c.go"), "c.go:1:x := \"hello\"\nc.go:2:" + long + "\n"},
		{args("pattern", "absent"), "no matches for absent"},
	} {
		res, text := run(t, s, dir, "grep", c.args)
		wantOK(t, res, text)
		if text != c.want {
			t.Errorf("grep %s = %q, want %q", c.args, text, c.want)
		}
	}
	res, text := run(t, s, dir, "grep", args("pattern", "a("))
	wantErr(t, res, text, tool.CodeInvalidArgs, "invalid regular expression")
	res, text = run(t, s, dir, "grep", args("pattern", "a", "path", "missing"))
	wantErr(t, res, text, tool.CodeFailed, "does not exist")
}

func TestGrepHonoursCancel(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "x\n"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, def := range Tools(Options{}) {
		if def.Name != "grep" {
			continue
		}
		_, err := def.Execute(ctx, tool.Call{Name: "grep", Arguments: json.RawMessage(`{"pattern":"x"}`), Cwd: dir})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("grep with a cancelled ctx: %v", err)
		}
	}
}

func TestConcurrencySafe(t *testing.T) {
	s := scope(t, Options{})
	for name, want := range map[string]bool{"bash": false, "read_file": true, "write_file": false, "edit_file": false, "glob": true, "grep": true} {
		if got := s.ConcurrencySafe(name); got != want {
			t.Errorf("%s: ConcurrencySafe = %v, want %v", name, got, want)
		}
	}
}

// The built-in tools are the ones package toolname names, in its order.
func TestNamesAreToolnames(t *testing.T) {
	var names []string
	for _, d := range Tools(Options{}) {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff(toolname.Builtin(), names); diff != "" {
		t.Fatalf("built-in tool names (-toolname +builtin):\n%s", diff)
	}
}
