package agentdef_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agentdef"
)

// A FIFO named like a definition is a warning naming it, at once: reading
// never blocks on it.
func TestFIFODefinition(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "explore.md")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() {
		_, warns, err := agentdef.Load(agentdef.Options{Dirs: []agentdef.Dir{{Path: dir, Scope: "user"}}})
		if err == nil && len(warns) == 1 {
			err = errors.New(warns[0])
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("warning %v", err)
		}
	case <-time.After(5 * time.Second):
		os.Remove(path)
		t.Fatal("reading a FIFO definition blocks")
	}
}

// A folder that cannot be read is the error, and every other folder's
// definitions load all the same.
func TestUnreadableFolderKeepsTheOthers(t *testing.T) {
	base := t.TempDir()
	loop := filepath.Join(base, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Skip(err)
	}
	good := filepath.Join(base, "good")
	os.MkdirAll(good, 0o755)
	os.WriteFile(filepath.Join(good, "a.md"), []byte("---\nname: a\ndescription: d\n---\n"), 0o644)
	c, _, err := agentdef.Load(agentdef.Options{Dirs: []agentdef.Dir{{Path: loop, Scope: "project"}, {Path: good, Scope: "user"}}})
	if err == nil || !strings.Contains(err.Error(), loop) {
		t.Errorf("err = %v, want one naming %s", err, loop)
	}
	if _, ok := c.Get("a"); !ok {
		t.Errorf("the good folder's definition did not load: %v", c.Names())
	}
}
