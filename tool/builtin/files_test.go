package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
)

// fifo makes a named pipe at p that nobody writes: opening it for reading
// in blocking mode would wait forever.
func fifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

func TestNonRegularFilesAreRefused(t *testing.T) {
	s := scope(t, Options{Sandbox: sandbox.Full}) // edit_file may try /dev/null
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "needle\n"})
	fifo(t, filepath.Join(dir, "pipe"))
	if err := os.Symlink("pipe", filepath.Join(dir, "to-pipe")); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{"pipe": "named pipe", "to-pipe": "named pipe", "/dev/null": "character device"}
	// Under dsh acp, stdin carries the protocol's frames.
	if fi, err := os.Stat("/dev/stdin"); err == nil && !fi.Mode().IsRegular() {
		paths["/dev/stdin"] = "is not a regular file"
	}
	for p, kind := range paths {
		res, text := run(t, s, dir, "read_file", args("path", p))
		wantErr(t, res, text, tool.CodeFailed, kind)
		res, text = run(t, s, dir, "edit_file", args("path", p, "old_string", "a", "new_string", "b"))
		wantErr(t, res, text, tool.CodeFailed, kind)
		res, text = run(t, s, dir, "grep", args("pattern", "x", "path", p))
		wantErr(t, res, text, tool.CodeFailed, kind)
	}
	// A directory search skips them and says how many it skipped.
	res, text := run(t, s, dir, "grep", args("pattern", "needle"))
	wantOK(t, res, text)
	if want := "a.txt:1:needle\n[skipped 2 file(s) that are not regular files (pipes, devices, sockets)]\n"; text != want {
		t.Fatalf("grep = %q, want %q", text, want)
	}
	res, text = run(t, s, dir, "grep", args("pattern", "absent"))
	wantOK(t, res, text)
	if want := "no matches for absent\n[skipped 2 file(s) that are not regular files (pipes, devices, sockets)]"; text != want {
		t.Fatalf("grep = %q, want %q", text, want)
	}
}

// execute runs the built-in tool name directly, returning the body's error.
func execute(ctx context.Context, name, dir, arguments string) (tool.Result, error) {
	for _, def := range Tools(Options{}) {
		if def.Name == name {
			return def.Execute(ctx, tool.Call{Name: name, Arguments: json.RawMessage(arguments), Cwd: dir})
		}
	}
	panic("no tool " + name)
}

func TestFileToolsHonourCancel(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "x\n"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for name, a := range map[string]string{
		"read_file": args("path", "a.txt"),
		"edit_file": args("path", "a.txt", "old_string", "x", "new_string", "y"),
		"grep":      args("pattern", "x", "path", "a.txt"),
	} {
		if _, err := execute(ctx, name, dir, a); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx: %v", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "x\n" {
		t.Fatalf("a cancelled edit changed the file: %q", b)
	}
}

// cancelAfter is a reader that cancels its context after n reads.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n--; c.n < 0 {
		c.cancel()
	}
	return c.r.Read(p)
}

// A read stops at the first read after a cancellation, in the middle of a
// line too.
func TestReadersStopOnCancelMidway(t *testing.T) {
	long := strings.Repeat("a", 4*readBufSize) + "\nnext\n"
	ctx, cancel := context.WithCancel(t.Context())
	lr := newLineReader(ctx, &cancelAfter{r: strings.NewReader(long), n: 1, cancel: cancel}, 10)
	if _, err := lr.next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("lineReader after cancel: %v", err)
	}
}

// allocated returns the bytes the process allocated while fn ran: an upper
// bound of how much its peak heap grew.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const memBound = 16 << 20

// sparse makes a 2 GiB file holding head and then zeros, without using the
// disk space.
func sparse(t *testing.T, p, head string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 2<<30); err != nil {
		t.Skipf("truncate: %v", err)
	}
}

// oneLine writes a file of one size-byte line of 'a' ending in "needle".
func oneLine(t *testing.T, p string, size int) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for range size >> 20 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WriteString("needle\n"); err != nil {
		t.Fatal(err)
	}
}

func TestHugeFilesInBoundedMemory(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	head := strings.Repeat("text line\n", 819) + "needle\n" // about 8 KiB
	sparse(t, filepath.Join(dir, "sparse"), head)
	oneLine(t, filepath.Join(dir, "line"), 64<<20)
	for _, c := range []struct {
		name, tool, args string
		ok               bool
		want             string
	}{
		{"read the head of a 2 GiB file", "read_file", args("path", "sparse"), true,
			"   820\tneedle\n[line 821 holds NUL bytes: binary data from there on; stopping]\n"},
		{"grep a 2 GiB file", "grep", args("pattern", "needle", "path", "sparse"), true, "sparse:820:needle\n"},
		{"edit a 2 GiB file", "edit_file", args("path", "sparse", "old_string", "needle", "new_string", "pin"), false,
			"over edit_file's limit of 10485760 bytes (10 MiB)"},
		{"read a 64 MiB line", "read_file", args("path", "line"), true, "     1\t" + strings.Repeat("a", maxLineLen) + "…\n"},
		{"grep a 64 MiB line", "grep", args("pattern", "^a+", "path", "line"), true, "line:1:" + strings.Repeat("a", maxGrepLineLen) +
			"…\n[1 line(s) longer than 1 MiB were searched in their first MiB only]\n"},
		{"grep past the first MiB of a 64 MiB line", "grep", args("pattern", "needle", "path", "line"), true,
			"no matches for needle\n[1 line(s) longer than 1 MiB were searched in their first MiB only]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var res tool.Result
			var text string
			n := allocated(func() { res, text = run(t, s, dir, c.tool, c.args) })
			if c.ok {
				wantOK(t, res, text)
				if !strings.HasSuffix(text, c.want) {
					t.Fatalf("got %q…, want it to end with %q", clipEnd(text), c.want)
				}
			} else {
				wantErr(t, res, text, tool.CodeFailed, c.want)
			}
			if n > memBound {
				t.Fatalf("allocated %d bytes, more than %d", n, memBound)
			}
		})
	}
}

func clipEnd(s string) string { return s[max(0, len(s)-300):] }

func TestEditFileSizeLimits(t *testing.T) {
	s := scope(t, Options{})
	dir := t.TempDir()
	// One MB of "x;" and a 100 KB replacement of each ";" would be 50 GB.
	writeFiles(t, dir, map[string]string{"f": strings.Repeat("x;", 500_000)})
	var res tool.Result
	var text string
	n := allocated(func() {
		res, text = run(t, s, dir, "edit_file", args("path", "f", "old_string", ";", "new_string", strings.Repeat("y", 100_000), "replace_all", true))
	})
	wantErr(t, res, text, tool.CodeFailed, "replacing 500000 occurrence(s) would make")
	if !strings.Contains(text, "over edit_file's limit of 10485760 bytes (10 MiB)") {
		t.Fatalf("the error does not name the limit: %q", text)
	}
	if n > memBound {
		t.Fatalf("allocated %d bytes, more than %d", n, memBound)
	}
	// Just under the limit is fine.
	writeFiles(t, dir, map[string]string{"g": "a" + strings.Repeat("b", MaxEditBytes-2)})
	res, text = run(t, s, dir, "edit_file", args("path", "g", "old_string", "a", "new_string", "cc"))
	wantOK(t, res, text)
	if fi, err := os.Stat(filepath.Join(dir, "g")); err != nil || fi.Size() != MaxEditBytes {
		t.Fatalf("edited file: %v, %v", fi, err)
	}
	res, text = run(t, s, dir, "edit_file", args("path", "g", "old_string", "cc", "new_string", "ddd"))
	wantErr(t, res, text, tool.CodeFailed, fmt.Sprintf("would make %s %d bytes", filepath.Join(dir, "g"), MaxEditBytes+1))
}

func TestWritesThroughSymbolicLinks(t *testing.T) {
	s := scope(t, Options{})
	dir, outside := t.TempDir(), t.TempDir()
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, dir, map[string]string{"real.txt": "old"})
	writeFiles(t, outside, map[string]string{"bashrc": "safe"})
	link("real.txt", "inner")                                   // to an existing file inside
	link("sub/new.txt", "dangling-inner")                       // to a missing file inside
	link(filepath.Join(outside, "bashrc"), "outer")             // to an existing file outside
	link(filepath.Join(outside, "authorized_keys"), "dangling") // to a missing file outside
	link(outside, "docs")                                       // a directory outside
	link("loop-b", "loop-a")
	link("loop-a", "loop-b")

	res, text := run(t, s, dir, "write_file", args("path", "inner", "content", "new"))
	wantOK(t, res, text)
	if want := fmt.Sprintf("wrote 3 bytes to %s (→ %s)", filepath.Join(dir, "inner"), filepath.Join(dir, "real.txt")); text != want {
		t.Fatalf("got %q, want %q", text, want)
	}
	res, text = run(t, s, dir, "edit_file", args("path", "inner", "old_string", "new", "new_string", "newer"))
	wantOK(t, res, text)
	res, text = run(t, s, dir, "write_file", args("path", "dangling-inner", "content", "made"))
	wantOK(t, res, text)
	for name, want := range map[string]string{"real.txt": "newer", "sub/new.txt": "made"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Fatalf("%s holds %q, %v; want %q", name, b, err, want)
		}
	}

	for _, c := range []struct{ tool, path string }{
		{"write_file", "outer"}, {"edit_file", "outer"}, {"write_file", "dangling"}, {"write_file", "docs/bashrc"}, {"write_file", "docs/new"},
	} {
		a := args("path", c.path, "content", "pwned")
		if c.tool == "edit_file" {
			a = args("path", c.path, "old_string", "safe", "new_string", "pwned")
		}
		res, text := run(t, s, dir, c.tool, a)
		wantErr(t, res, text, tool.CodeFailed, "outside the working directory")
	}
	res, text = run(t, s, dir, "write_file", args("path", "loop-a", "content", "x"))
	wantErr(t, res, text, tool.CodeFailed, "too many levels of symbolic links")

	// Nothing outside changed, no file appeared there, and the links are
	// still links.
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("outside holds %d entries", len(entries))
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "bashrc")); string(b) != "safe" {
		t.Fatalf("bashrc holds %q", b)
	}
	for _, name := range []string{"inner", "dangling-inner", "outer", "dangling", "docs"} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s is no longer a link: %v, %v", name, fi, err)
		}
	}

	// A path outside the working directory was named on purpose: its link
	// is followed.
	if err := os.Symlink("bashrc", filepath.Join(outside, "rc")); err != nil {
		t.Fatal(err)
	}
	res, text = run(t, s, dir, "write_file", args("path", filepath.Join(outside, "rc"), "content", "meant"))
	wantOK(t, res, text)
	if b, _ := os.ReadFile(filepath.Join(outside, "bashrc")); string(b) != "meant" {
		t.Fatalf("bashrc holds %q", b)
	}
}

// A write removes the temporary files a killed writer left for the same
// file (N18), and nothing else.
func TestWriteRemovesStaleTemporaryFiles(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	stale := tempPrefix("f.txt", dead.Process.Pid) + "123"
	kept := []string{
		tempPrefix("f.txt", os.Getpid()) + "1",      // a write of this process, under way
		tempPrefix("g.txt", dead.Process.Pid) + "1", // another file's
		".f.txt.tmp999", // not dsh's
	}
	writeFiles(t, dir, map[string]string{stale: "half", kept[0]: "x", kept[1]: "x", kept[2]: "x"})
	for _, name := range []string{"write_file", "edit_file"} {
		writeFiles(t, dir, map[string]string{stale: "half", "f.txt": "old"})
		res, text := run(t, scope(t, Options{}), dir, name, writeOrEdit(name, "f.txt", "new"))
		wantOK(t, res, text)
		if _, err := os.Lstat(filepath.Join(dir, stale)); err == nil {
			t.Fatalf("%s: %s is still there", name, stale)
		}
		for _, k := range kept {
			if _, err := os.Lstat(filepath.Join(dir, k)); err != nil {
				t.Fatalf("%s: %s was removed", name, k)
			}
		}
	}
}
