package builtin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/sandbox"
)

// writeOrEdit is a write_file call writing content to p, or an edit_file
// call replacing "old" by content in it.
func writeOrEdit(name, p, content string) string {
	if name == "edit_file" {
		return args("path", p, "old_string", "old", "new_string", content)
	}
	return args("path", p, "content", content)
}

// unchanged fails t unless p holds want ("" for a missing file).
func unchanged(t *testing.T, p, want string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if want == "" && !os.IsNotExist(err) || want != "" && string(b) != want {
		t.Fatalf("%s holds %q (%v), want %q", p, b, err, want)
	}
}

func TestFileToolsFollowTheSandbox(t *testing.T) {
	out := sandboxtest.OutsideDir(t) // neither a temporary directory nor the working directory
	cwd := filepath.Join(out, "ws", "child")
	writeFiles(t, out, map[string]string{"ws/child/in.txt": "old", "outside.txt": "old"})
	elsewhere := t.TempDir()
	if err := os.Symlink(out, filepath.Join(elsewhere, "link")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"write_file", "edit_file"} {
		t.Run(name, func(t *testing.T) {
			// read-only refuses every write, inside the working directory too.
			res, text := run(t, scope(t, Options{Sandbox: sandbox.ReadOnly}), cwd, name, writeOrEdit(name, "in.txt", "new"))
			wantErr(t, res, text, CodeSandbox, "under tools.sandbox: read-only no file may be written")
			unchanged(t, filepath.Join(cwd, "in.txt"), "old")

			// workspace-write refuses paths outside the working directory and
			// the temporary directories, however they are spelled.
			ws := scope(t, Options{})
			for _, p := range []string{
				filepath.Join(out, "outside.txt"),               // absolute
				"../../outside.txt",                             // ..
				filepath.Join(elsewhere, "link", "outside.txt"), // through a linked folder outside
			} {
				res, text := run(t, ws, cwd, name, writeOrEdit(name, p, "new"))
				wantErr(t, res, text, CodeSandbox, "outside the sandbox")
				if !strings.Contains(text, filepath.Join(out, "outside.txt")) || !strings.Contains(text, "tools.sandbox: full") {
					t.Fatalf("the refusal names neither the file nor the setting: %s", text)
				}
				unchanged(t, filepath.Join(out, "outside.txt"), "old")
			}
			res, text = run(t, ws, cwd, name, writeOrEdit(name, "in.txt", "new"))
			wantOK(t, res, text)
			unchanged(t, filepath.Join(cwd, "in.txt"), "new")
			os.WriteFile(filepath.Join(cwd, "in.txt"), []byte("old"), 0o644)

			// A child's policy narrows the configured mode, and the refusal
			// says so.
			res, text = runCtx(sandbox.WithMode(t.Context(), sandbox.ReadOnly), scope(t, Options{Sandbox: sandbox.Full}), cwd, name,
				writeOrEdit(name, "in.txt", "new"))
			wantErr(t, res, text, CodeSandbox, "this agent's sandbox policy (read-only, narrower than tools.sandbox: full)")
			unchanged(t, filepath.Join(cwd, "in.txt"), "old")

			// full writes anywhere that is not protected.
			res, text = run(t, scope(t, Options{Sandbox: sandbox.Full}), cwd, name, writeOrEdit(name, "../../outside.txt", "new"))
			wantOK(t, res, text)
			unchanged(t, filepath.Join(out, "outside.txt"), "new")
			os.WriteFile(filepath.Join(out, "outside.txt"), []byte("old"), 0o644)
		})
	}
}

func TestFileToolDescriptionsNameTheRule(t *testing.T) {
	for mode, want := range map[sandbox.Mode]string{
		sandbox.ReadOnly:       "Writing is refused everywhere",
		sandbox.WorkspaceWrite: "only under the working directory and the temporary directories",
		sandbox.Full:           "git hooks and git configuration",
	} {
		for _, def := range Tools(Options{Sandbox: mode}) {
			if (def.Name == "write_file" || def.Name == "edit_file") && !strings.Contains(def.Description, want) {
				t.Errorf("%s under %s: %s", def.Name, mode, def.Description)
			}
		}
	}
}

// git runs git in dir, failing t on an error.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// repo makes a git repository with one commit and a linked worktree of it;
// it returns the repository's and the worktree's folders.
func repo(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	top, wt := filepath.Join(dir, "repo"), filepath.Join(dir, "wt")
	os.Mkdir(top, 0o755)
	git(t, top, "init", "-q")
	writeFiles(t, top, map[string]string{"seed.txt": "old"})
	git(t, top, "add", ".")
	git(t, top, "commit", "-qm", "seed")
	git(t, top, "worktree", "add", "-q", "-b", "wt", wt)
	return top, wt
}

// Protected files are refused whatever the mode, full included: dsh's
// configuration file and home, and git hooks and configuration.
func TestProtectedPaths(t *testing.T) {
	home, other := t.TempDir(), t.TempDir()
	top, wt := repo(t)
	sep := filepath.Join(t.TempDir(), "sep.git") // a git directory outside its work tree
	git(t, other, "init", "-q", "--separate-git-dir", sep)
	cfg := filepath.Join(t.TempDir(), "my-dsh.yaml")
	writeFiles(t, home, map[string]string{"dsh.yaml": "old", "agents/a.md": "old"})
	writeFiles(t, filepath.Dir(cfg), map[string]string{filepath.Base(cfg): "old"})
	if err := os.Symlink(home, filepath.Join(other, "home-link")); err != nil {
		t.Fatal(err)
	}
	opts := Options{Sandbox: sandbox.Full, Protected: []string{cfg, home}}
	for _, c := range []struct{ path, why string }{
		{cfg, "dsh's configuration file"},
		{filepath.Join(home, "dsh.yaml"), "which holds dsh's own files"},
		{filepath.Join(home, "agents", "a.md"), "which holds dsh's own files"},
		{filepath.Join(home, "new"), "which holds dsh's own files"},
		{filepath.Join(other, "home-link", "dsh.yaml"), "which holds dsh's own files"},
		{filepath.Join(top, ".git", "hooks", "post-checkout"), "a git hook"},
		{filepath.Join(top, ".git", "hooks", "deep", "x"), "a git hook"},
		{filepath.Join(top, ".git", "config"), "git configuration"},
		{filepath.Join(top, "sub", ".git", "config"), "git configuration"}, // a repository yet to be made
		{filepath.Join(top, ".git", "worktrees", "wt", "config.worktree"), "git configuration"},
		{filepath.Join(top, ".git", "worktrees", "wt", "hooks", "x"), "a git hook"},
		{filepath.Join(wt, ".git"), "a repository's .git"},
		{filepath.Join(sep, "config"), "git configuration"},
		{filepath.Join(sep, "hooks", "pre-commit"), "a git hook"},
		{filepath.Join(other, ".git"), "a repository's .git"},
	} {
		for _, name := range []string{"write_file", "edit_file"} {
			before, _ := os.ReadFile(c.path)
			res, text := run(t, scope(t, opts), top, name, writeOrEdit(name, c.path, "pwned"))
			wantErr(t, res, text, CodeProtected, c.why)
			if !strings.Contains(text, "whatever tools.sandbox says") {
				t.Fatalf("%s: %s", c.path, text)
			}
			unchanged(t, c.path, string(before))
		}
	}
	// Files that merely look alike are not protected.
	for _, p := range []string{"src/config", "hooks/x", ".github/hooks/config", ".git/info/exclude"} {
		res, text := run(t, scope(t, opts), top, "write_file", args("path", p, "content", "ok"))
		wantOK(t, res, text)
	}
}

// A worktree child, working in a worktree dsh made under $DSH_HOME, writes
// its own tree, and neither its parent's tree nor dsh's files.
func TestWorktreeChildWritesOnlyItsTree(t *testing.T) {
	out := sandboxtest.OutsideDir(t)
	home, parent := filepath.Join(out, "home"), filepath.Join(out, "parent")
	child := filepath.Join(home, "worktrees", "parent-0123", "child-1")
	writeFiles(t, out, map[string]string{"home/dsh.yaml": "old", "parent/seed.txt": "old", "home/worktrees/parent-0123/child-1/seed.txt": "old"})
	s := scope(t, Options{Protected: []string{home, filepath.Join(home, "dsh.yaml")}, Worktrees: filepath.Join(home, "worktrees")})

	res, text := run(t, s, child, "edit_file", writeOrEdit("edit_file", "seed.txt", "new"))
	wantOK(t, res, text)
	res, text = run(t, s, child, "write_file", writeOrEdit("write_file", "sub/new.txt", "new"))
	wantOK(t, res, text)

	res, text = run(t, s, child, "edit_file", writeOrEdit("edit_file", filepath.Join(parent, "seed.txt"), "new"))
	wantErr(t, res, text, CodeSandbox, "outside the sandbox")
	unchanged(t, filepath.Join(parent, "seed.txt"), "old")
	for _, p := range []string{"../../../x", "../../../dsh.yaml", "../../other/x", "../x"} {
		res, text = run(t, s, child, "write_file", writeOrEdit("write_file", p, "new"))
		wantErr(t, res, text, CodeProtected, "no tool may write it")
	}
	res, text = run(t, s, child, "write_file", writeOrEdit("write_file", "../../../dsh.yaml", "new"))
	wantErr(t, res, text, CodeProtected, "is dsh's configuration file") // the most precise reason
	unchanged(t, filepath.Join(home, "dsh.yaml"), "old")
	unchanged(t, filepath.Join(home, "x"), "")
}

// TestFileToolsKeepOutOfCredentialStores: read_file, grep and glob refuse
// what the sandbox keeps from commands (sandbox.Unreadable), directly, by
// a link, and on the way of a walk; full reads them.
func TestFileToolsKeepOutOfCredentialStores(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DSH_HOME", filepath.Join(home, ".dsh"))
	writeFiles(t, home, map[string]string{
		".ssh/id_rsa":                 "PRIVATE-KEY-SENTINEL",
		".netrc":                      "machine x password NETRC-SENTINEL",
		".dsh/sessions/p/s/a.jsonl":   "SESSION-SENTINEL",
		"project/notes.txt":           "an ordinary SENTINEL",
		"project/.config/app/ok.conf": "readable SENTINEL",
	})
	if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "project", "keys")); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(home, "project")
	ws := scope(t, Options{})
	for _, args := range []struct{ name, args string }{
		{"read_file", `{"path":"` + filepath.Join(home, ".ssh", "id_rsa") + `"}`},
		{"read_file", `{"path":"keys/id_rsa"}`},
		{"read_file", `{"path":"../.netrc"}`},
		{"read_file", `{"path":"` + filepath.Join(home, ".dsh", "sessions", "p", "s", "a.jsonl") + `"}`},
		{"grep", `{"pattern":"SENTINEL","path":"` + filepath.Join(home, ".ssh") + `"}`},
		{"glob", `{"pattern":"*","path":"` + filepath.Join(home, ".ssh") + `"}`},
	} {
		res, text := run(t, ws, cwd, args.name, args.args)
		wantErr(t, res, text, CodeSandbox, "unreadable under tools.sandbox: workspace-write")
	}
	// A walk from $HOME skips the denied folders and files, and keeps the rest.
	res, text := run(t, ws, cwd, "grep", `{"pattern":"SENTINEL","path":"`+home+`"}`)
	wantOK(t, res, text)
	for _, leak := range []string{"PRIVATE-KEY", "NETRC-", "SESSION-"} {
		if strings.Contains(text, leak) {
			t.Fatalf("grep from $HOME read a denied file (%s): %s", leak, text)
		}
	}
	if !strings.Contains(text, "an ordinary SENTINEL") || !strings.Contains(text, "readable SENTINEL") {
		t.Fatalf("grep skipped readable files: %s", text)
	}
	res, text = run(t, ws, cwd, "glob", `{"pattern":"**/*","path":"`+home+`"}`)
	wantOK(t, res, text)
	if strings.Contains(text, "id_rsa") || strings.Contains(text, ".netrc") || strings.Contains(text, "a.jsonl") {
		t.Fatalf("glob listed denied files: %s", text)
	}
	// Under full nothing is kept.
	res, text = run(t, scope(t, Options{Sandbox: sandbox.Full}), cwd, "read_file", `{"path":"keys/id_rsa"}`)
	wantOK(t, res, text)
}
