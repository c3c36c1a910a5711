package config_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/builtin"
)

// The file tools never write the loaded configuration file, $DSH_HOME or
// the session store, even under tools.sandbox: full.
func TestFileToolsNeverWriteDshFiles(t *testing.T) {
	home, dir, work, sessions := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "dsh.yaml")
	yaml := "tools:\n  sandbox: full\nsessionsDir: " + sessions + "\n"
	os.WriteFile(path, []byte(yaml), 0o644)
	getenv := env(map[string]string{"DSH_CONFIG": path, "DSH_HOME": home})
	cfg, err := config.Load("", getenv)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cfg.Build(context.Background(), nil, session.NewMemoryBackend(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	s := rt.Tools.NewScope()
	for _, p := range []string{path, filepath.Join(home, "dsh.yaml"), filepath.Join(home, "agents", "x.md"), filepath.Join(sessions, "s.jsonl")} {
		args, _ := json.Marshal(map[string]string{"path": p, "content": "tools: {sandbox: full}\n"})
		res := s.Execute(t.Context(), tool.Call{ID: "c1", Name: "write_file", Arguments: args, Cwd: work})
		if !res.IsError || res.Code != builtin.CodeProtected {
			t.Fatalf("write_file %s: %s %s", p, res.Code, content.JoinText(res.Content))
		}
	}
	if b, _ := os.ReadFile(path); string(b) != yaml {
		t.Fatalf("the configuration file holds %q", b)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Fatalf("$DSH_HOME holds %d entries", len(entries))
	}
	args, _ := json.Marshal(map[string]string{"path": "ok.txt", "content": "ok"})
	if res := s.Execute(t.Context(), tool.Call{ID: "c2", Name: "write_file", Arguments: args, Cwd: work}); res.IsError {
		t.Fatal(content.JoinText(res.Content))
	}
}
