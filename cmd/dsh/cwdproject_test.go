package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// A command's --cwd names the project whose files it uses: dsh run --cwd P
// from a folder W starts P's trusted .mcp.json server, not W's, and the
// one notice names P.
func TestCwdFlagChoosesTheProject(t *testing.T) {
	home, project, here, out := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	server := func(dir, mark string) {
		mcpJSON := fmt.Sprintf(`{"mcpServers": {"plain": {"command": "sh", "args": ["-c", "touch %s; exit 1"], "startTimeout": "5s"}}}`,
			filepath.Join(out, mark))
		if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(mcpJSON), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	server(project, "project-started")
	server(here, "here-started")
	trustFolder(t, home, project)
	model := llmtest.NewServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "hello"} })

	stdout, stderr, err := trustBinary(t, here, home, model.URL, "run", "--cwd", project, "hi")
	if err != nil || strings.TrimSpace(stdout) != "hello" {
		t.Fatalf("run --cwd: %v\n%s\n%s", err, stdout, stderr)
	}
	if !exists(filepath.Join(out, "project-started")) {
		t.Errorf("the trusted project's server did not start with --cwd %s:\n%s", project, stderr)
	}
	if exists(filepath.Join(out, "here-started")) {
		t.Errorf("the working directory's server started although --cwd names another project")
	}
	if strings.Contains(stderr, "this folder is not trusted") {
		t.Errorf("the notice is about the working directory, not the --cwd project:\n%s", stderr)
	}

	// The other way round: the working directory trusted, --cwd an
	// untrusted folder: nothing of either starts, and the notice names it.
	os.Remove(filepath.Join(out, "project-started"))
	trustFolder(t, home, here)
	untrusted := t.TempDir()
	server(untrusted, "untrusted-started")
	_, stderr, err = trustBinary(t, here, home, model.URL, "run", "--cwd", untrusted, "hi")
	if err != nil {
		t.Fatalf("run --cwd untrusted: %v\n%s", err, stderr)
	}
	if exists(filepath.Join(out, "here-started")) || exists(filepath.Join(out, "untrusted-started")) {
		t.Errorf("a server started for an untrusted --cwd project: here %v, untrusted %v",
			exists(filepath.Join(out, "here-started")), exists(filepath.Join(out, "untrusted-started")))
	}
	if want := "folder " + untrusted + " is not trusted"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}
