package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/session/jsonl"
)

// Sessions stored by an earlier build, one directory per session
// (<project>/<id>/session.jsonl), still list, show, resume and continue
// after the store moved to one file per session (issue 33); the resumed
// session grows where it is.
func TestSessionsOfAnEarlierBuild(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			return llmtest.Reply{Text: "the child's report"}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"c","prompt":"report"}`}}
		}
		return llmtest.Reply{Text: "thanks"}
	})
	home, cwd := t.TempDir(), t.TempDir()
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	_, errOut, err := runCLI(t, env, "run", "--cwd", cwd, "delegate")
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, errOut)
	}
	root := regexp.MustCompile(`\[session ([0-9a-f-]{36})`).FindStringSubmatch(errOut)[1]

	// Lay the tree out as the previous build did.
	files, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "*"+jsonl.Ext))
	if len(files) != 2 {
		t.Fatalf("session files %v, want the root's and the child's", files)
	}
	var child string
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), jsonl.Ext)
		if id != root {
			child = id
		}
		dir := filepath.Join(filepath.Dir(f), id)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f, filepath.Join(dir, jsonl.FileName)); err != nil {
			t.Fatal(err)
		}
	}
	old := filepath.Join(home, "sessions", jsonl.ProjectKey(cwd), root, jsonl.FileName)
	before, err := os.Stat(old)
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, err := runCLI(t, env, "sessions", "list", "--all")
	if err != nil || !strings.Contains(out, root[:8]) || !strings.Contains(out, child[:8]) {
		t.Fatalf("sessions list: %v\n%s\n%s", err, out, errOut)
	}
	out, _, err = runCLI(t, env, "sessions", "show", child)
	if err != nil || !strings.Contains(out, "the child's report") || !strings.Contains(out, "parent "+root) {
		t.Fatalf("sessions show: %v\n%s", err, out)
	}
	out, errOut, err = runCLI(t, env, "run", "--resume", root, "again")
	if err != nil || !strings.Contains(errOut, "[session "+root) {
		t.Fatalf("resume: %v\n%s\n%s", err, out, errOut)
	}
	if after, err := os.Stat(old); err != nil || after.Size() <= before.Size() {
		t.Errorf("the resumed session did not grow its file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "sessions", jsonl.ProjectKey(cwd), root+jsonl.Ext)); err == nil {
		t.Error("resuming an earlier build's session made a second file for it")
	}
	if _, errOut, err = runCLI(t, env, "run", "--cwd", cwd, "--continue", "more"); err != nil || !strings.Contains(errOut, "[session "+root) {
		t.Fatalf("continue: %v\n%s", err, errOut)
	}
}
