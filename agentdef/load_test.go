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
