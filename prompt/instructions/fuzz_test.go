package instructions_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/prompt/instructions"
)

// FuzzLoad reads arbitrary AGENTS.md files that import each other: never
// a panic, and the text stays within its bound.
func FuzzLoad(f *testing.F) {
	f.Add("See @b.md and `@c.md`\n```\n@b.md\n```\n", "back to @AGENTS.md @~/x @/etc/hostname @../../x")
	f.Add("@", "@@b.md`")
	f.Fuzz(func(t *testing.T, a, b string) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte(a), 0o644)
		os.WriteFile(filepath.Join(dir, "b.md"), []byte(b), 0o644)
		in := instructions.Load(instructions.Options{Cwd: dir, Home: dir, MaxBytes: 4096})
		if len(in.Text) > 4096+100 {
			t.Fatalf("text of %d bytes", len(in.Text))
		}
	})
}
