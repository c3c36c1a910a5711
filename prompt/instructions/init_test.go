package instructions_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/prompt/instructions"
)

// Init drafts AGENTS.md from the folder's manifests (no model), imports
// the CLAUDE.md it would otherwise hide, and never overwrites one.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module example.com/x\n")
	write(t, filepath.Join(dir, "package.json"), `{"scripts":{"build":"tsc","test":"vitest","dev":"vite"}}`)
	write(t, filepath.Join(dir, "pnpm-lock.yaml"), "")
	write(t, filepath.Join(dir, "Makefile"), ".PHONY: test\nCC := gcc\ntest: build\n\tgo test ./...\nbuild:\n\tgo build\n%.o: %.c\n")
	write(t, filepath.Join(dir, "CLAUDE.md"), "CLAUDE-RULE")
	write(t, filepath.Join(dir, "cmd", "x", "main.go"), "package main")
	path, err := instructions.Init(dir)
	if err != nil || path != filepath.Join(dir, "AGENTS.md") {
		t.Fatalf("Init = %q, %v", path, err)
	}
	data, _ := os.ReadFile(path)
	text := string(data)
	for _, want := range []string{"- Languages: Go, JavaScript/TypeScript (Node.js)\n", "- Top folders: `cmd/`\n",
		"- Build: `go build ./...`\n", "- Test: `go test ./...`\n", "- Build: `pnpm run build`\n", "- Test: `pnpm run test`\n",
		"- Test: `make test`\n", "- Build: `make build`\n", "@CLAUDE.md"} {
		if !strings.Contains(text, want) {
			t.Errorf("AGENTS.md lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "run dev") || strings.Contains(text, "make CC") {
		t.Errorf("AGENTS.md names what is no build or test command:\n%s", text)
	}
	if in := instructions.Load(instructions.Options{Cwd: dir}); !strings.Contains(in.Text, "CLAUDE-RULE") {
		t.Errorf("the draft does not bring CLAUDE.md along:\n%s", in.Text)
	}

	os.WriteFile(path, []byte("mine"), 0o644)
	if _, err := instructions.Init(dir); !errors.Is(err, instructions.ErrExists) {
		t.Errorf("second Init: %v", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "mine" {
		t.Errorf("Init overwrote AGENTS.md: %q", data)
	}
	other := t.TempDir()
	os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), filepath.Join(other, "AGENTS.md")) // dangling
	if _, err := instructions.Init(other); !errors.Is(err, instructions.ErrExists) {
		t.Errorf("Init through a dangling symlink: %v", err)
	}

	// An empty folder gets a draft that says what to add.
	empty := t.TempDir()
	if _, err := instructions.Init(empty); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(empty, "AGENTS.md")); !strings.Contains(string(data), "none found") {
		t.Errorf("empty folder's draft:\n%s", data)
	}
}
