package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/tool"
)

// buffers is an editor's files: paths to their unsaved text.
type buffers struct {
	mu     sync.Mutex
	text   map[string]string
	fail   bool // every call fails, as a client that went away
	writes []string
}

func (b *buffers) ReadTextFile(_ context.Context, path string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.text[path]; ok && !b.fail {
		return t, nil
	}
	return "", errors.New("no buffer")
}

func (b *buffers) WriteTextFile(_ context.Context, path, content string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail {
		return errors.New("gone")
	}
	b.text[path] = content
	b.writes = append(b.writes, path)
	return nil
}

// fileScope is a scope whose file tools go through files.
func fileScope(t *testing.T, opts Options, files Files) *tool.Scope {
	t.Helper()
	r := tool.NewRegistry()
	for _, def := range FileTools(opts, files) {
		if _, err := r.Register(def); err != nil {
			t.Fatal(err)
		}
	}
	return r.NewScope()
}

// Through an editor's files, the file tools read and edit its buffers
// (unsaved text included) and write to them, after the disk's checks: a
// protected file is still refused, and nothing reaches the editor; an
// editor that fails leaves the disk to them.
func TestFileToolsThroughAnEditor(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("saved\n"), 0o644)
	ed := &buffers{text: map[string]string{notes: "saved\nunsaved\n"}}
	protected := filepath.Join(dir, "secret")
	os.Mkdir(protected, 0o755)
	s := fileScope(t, Options{Protected: []string{protected}}, ed)

	res, text := run(t, s, dir, "read_file", args("path", "notes.txt"))
	if wantOK(t, res, text); !strings.Contains(text, "unsaved") {
		t.Errorf("read_file: %q", text)
	}
	res, text = run(t, s, dir, "edit_file", args("path", "notes.txt", "old_string", "unsaved", "new_string", "edited"))
	wantOK(t, res, text)
	res, text = run(t, s, dir, "write_file", args("path", "new.txt", "content", "hi\n"))
	wantOK(t, res, text)
	if ed.text[notes] != "saved\nedited\n" || ed.text[filepath.Join(dir, "new.txt")] != "hi\n" {
		t.Errorf("the editor holds %q", ed.text)
	}
	if b, _ := os.ReadFile(notes); string(b) != "saved\n" {
		t.Errorf("the disk was written: %q", b)
	}
	res, text = run(t, s, dir, "write_file", args("path", "secret/x", "content", "no"))
	if !res.IsError || len(ed.writes) != 2 {
		t.Errorf("a protected write: %q, editor writes %v", text, ed.writes)
	}

	ed.fail = true
	res, text = run(t, s, dir, "edit_file", args("path", "notes.txt", "old_string", "saved", "new_string", "kept"))
	wantOK(t, res, text)
	if b, _ := os.ReadFile(notes); string(b) != "kept\n" {
		t.Errorf("with the editor gone, the disk holds %q", b)
	}
}
