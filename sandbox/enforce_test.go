package sandbox_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/sandbox"
)

// run runs script with bash in dir under p and returns its output and
// whether it exited with status 0.
func run(t testing.TB, p sandbox.Policy, dir, script string) (string, bool) {
	t.Helper()
	pr, err := proc.Start(proc.Spec{Path: "bash", Args: []string{"-c", script}, Dir: dir, MergeStderr: true, Sandbox: p})
	if err != nil {
		t.Fatal(err)
	}
	pr.Stdin().Close()
	out, _ := io.ReadAll(pr.Stdout())
	<-pr.Done()
	pr.Stop(0, 0)
	return string(out), pr.Err() == nil
}

// mkfile writes content to path, making its folders.
func mkfile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeHome makes a $HOME with credential stores and a $DSH_HOME with a
// session log, and sets HOME and DSH_HOME to them.
func fakeHome(t *testing.T) string {
	home := t.TempDir()
	for path, content := range map[string]string{
		".ssh/id_rsa": "SECRET-KEY", ".aws/credentials": "SECRET-AWS", ".config/gh/hosts.yml": "SECRET-GH", ".netrc": "SECRET-NETRC",
		".dsh/sessions/p/s/session.jsonl": "SECRET-SESSION",
		"notes.txt":                       "sibling", ".config/git/config": "sibling", ".dsh/dsh.yaml": "sibling", "project/f": "sibling",
	} {
		mkfile(t, filepath.Join(home, path), content)
	}
	if err := os.Symlink(".ssh", filepath.Join(home, "ssh-link")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("DSH_HOME", filepath.Join(home, ".dsh"))
	return home
}

// The credential stores of $HOME and dsh's session logs cannot be read
// under read-only and workspace-write, even when the working directory
// holds them (dsh run in $HOME); everything next to them can, and a
// workspace-write command still writes and reads back its own files.
func TestUnreadable(t *testing.T) {
	sandboxtest.Require(t)
	home := fakeHome(t)
	secrets := []string{".ssh/id_rsa", ".aws/credentials", ".config/gh/hosts.yml", ".netrc", ".dsh/sessions/p/s/session.jsonl", "ssh-link/id_rsa"}
	siblings := []string{"notes.txt", ".config/git/config", ".dsh/dsh.yaml", "project/f"}
	for _, tc := range []struct {
		mode sandbox.Mode
		cwd  string
	}{
		{sandbox.WorkspaceWrite, "project"},
		{sandbox.WorkspaceWrite, "."},
		{sandbox.ReadOnly, "project"},
	} {
		cwd := filepath.Join(home, tc.cwd)
		p := sandbox.For(tc.mode, cwd)
		for _, f := range secrets {
			if out, ok := run(t, p, cwd, "cat "+filepath.Join(home, f)); ok || strings.Contains(out, "SECRET") {
				t.Errorf("%s in %s: cat %s = %q, want refused", tc.mode, tc.cwd, f, out)
			}
		}
		for _, f := range siblings {
			if out, ok := run(t, p, cwd, "cat "+filepath.Join(home, f)); !ok || out != "sibling" {
				t.Errorf("%s in %s: cat %s = %q, want it read", tc.mode, tc.cwd, f, out)
			}
		}
		if tc.mode == sandbox.WorkspaceWrite {
			// (A file made right in a folder that holds a denied path
			// cannot be read back by the same command: see carver.)
			if out, ok := run(t, p, cwd, "cd "+filepath.Join(home, "project")+" && mkdir -p new && echo mine > new/f && cat new/f"); !ok || out != "mine\n" {
				t.Errorf("%s in %s: a new file: %q", tc.mode, tc.cwd, out)
			}
		}
	}
	p := sandbox.For(sandbox.WorkspaceWrite, home)
	for _, f := range secrets {
		if p.MayRead(filepath.Join(home, f)) {
			t.Errorf("MayRead(%s) = true", f)
		}
	}
	for _, f := range siblings {
		if !p.MayRead(filepath.Join(home, f)) {
			t.Errorf("MayRead(%s) = false", f)
		}
	}
	if !p.MayRead(filepath.Join(home, ".sshx")) {
		t.Error("MayRead(.sshx) = false")
	}
	p = sandbox.For(sandbox.Full, home)
	if !p.MayRead(filepath.Join(home, ".ssh/id_rsa")) {
		t.Error("full: MayRead(.ssh/id_rsa) = false")
	}
	if out, ok := run(t, p, home, "cat .ssh/id_rsa"); !ok || out != "SECRET-KEY" {
		t.Errorf("full: cat .ssh/id_rsa = %q, want it read", out)
	}
}

func TestUnreadableList(t *testing.T) {
	env := map[string]string{"HOME": "/h"}
	got := sandbox.Unreadable(func(k string) string { return env[k] })
	for _, want := range []string{"/h/.ssh", "/h/.aws", "/h/.config/gcloud", "/h/.azure", "/h/.kube", "/h/.gnupg", "/h/.docker",
		"/h/.netrc", "/h/.git-credentials", "/h/.npmrc", "/h/.pypirc", "/h/.config/gh", "/h/.dsh/sessions"} {
		if !slices.Contains(got, want) {
			t.Errorf("Unreadable lacks %s: %v", want, got)
		}
	}
	env["DSH_HOME"] = "/d"
	if got := sandbox.Unreadable(func(k string) string { return env[k] }); !slices.Contains(got, "/d/sessions") || slices.Contains(got, "/h/.dsh/sessions") {
		t.Errorf("with DSH_HOME: %v", got)
	}
	if p := sandbox.For(sandbox.Full, "/w"); len(p.Unreadable) != 0 {
		t.Errorf("full has a deny-list: %v", p.Unreadable)
	}
}

// With network deny, a command can neither connect to a TCP port nor
// listen on one, whatever the mode; allowed, it can.
func TestNetworkDeny(t *testing.T) {
	sandboxtest.Require(t)
	if err := sandbox.CheckNetwork(sandbox.NetworkDeny); err != nil {
		t.Skip(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	connect := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", ln.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	for _, m := range []sandbox.Mode{sandbox.WorkspaceWrite, sandbox.ReadOnly, sandbox.Full} {
		p := sandbox.For(m, dir)
		if out, ok := run(t, p, dir, connect); !ok || out != "connected\n" {
			t.Errorf("%s, network allowed: %q", m, out)
		}
		p.Network = sandbox.NetworkDeny
		if out, ok := run(t, p, dir, connect); ok || strings.Contains(out, "connected\n") {
			t.Errorf("%s, network denied: %q, want refused", m, out)
		}
		if py, err := exec.LookPath("python3"); err == nil {
			listen := py + ` -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print("listening")'`
			if out, ok := run(t, p, dir, listen); ok || strings.Contains(out, "listening") {
				t.Errorf("%s, network denied: %q, want the bind refused", m, out)
			}
		}
	}
	if err := (sandbox.Policy{Network: "off"}).RestrictThread(); err == nil {
		t.Error("an unknown network setting passed")
	}
}

// git runs git in dir.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// A command in a linked worktree can commit: its git folder and the
// repository's objects, refs and logs are writable, its hooks and config
// are not. A .git file pointing anywhere else adds nothing.
func TestGitDirs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	root := t.TempDir()
	if sandbox.Check(sandbox.WorkspaceWrite) == nil {
		root = sandboxtest.OutsideDir(t) // not writable by itself
	}
	repo, wt := filepath.Join(root, "repo"), filepath.Join(root, "wt")
	mkfile(t, filepath.Join(repo, "a"), "a")
	git(t, repo, "init", "-q")
	git(t, repo, "add", "a")
	git(t, repo, "commit", "-qm", "a")
	git(t, repo, "worktree", "add", "-q", "-b", "child", wt)
	common, _ := filepath.EvalSymlinks(filepath.Join(repo, ".git"))
	got := sandbox.GitDirs(filepath.Join(wt))
	want := []string{filepath.Join(common, "worktrees", "wt"), filepath.Join(common, "objects"), filepath.Join(common, "refs"), filepath.Join(common, "logs")}
	if !slices.Equal(got, want) {
		t.Fatalf("GitDirs = %v, want %v", got, want)
	}
	os.Mkdir(filepath.Join(wt, "sub"), 0o755)
	if got := sandbox.GitDirs(filepath.Join(wt, "sub")); !slices.Equal(got, want) {
		t.Errorf("GitDirs of a subfolder = %v", got)
	}
	if got := sandbox.GitDirs(repo); got != nil {
		t.Errorf("GitDirs of the main worktree = %v", got)
	}
	if p := sandbox.For(sandbox.WorkspaceWrite, wt); !slices.Contains(p.Writable, want[0]) {
		t.Errorf("For(workspace-write) in a worktree: %v", p.Writable)
	}

	if sandbox.Check(sandbox.WorkspaceWrite) == nil {
		p := sandbox.For(sandbox.WorkspaceWrite, wt)
		commit := "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; echo b > b && git add -A && git commit -qm b && echo committed"
		if out, ok := run(t, p, wt, commit); !ok || out != "committed\n" {
			t.Errorf("commit in a worktree: %q", out)
		}
		for _, f := range []string{filepath.Join(common, "hooks", "post-commit"), filepath.Join(common, "config")} {
			if out, ok := run(t, p, wt, "echo x >> "+f); ok {
				t.Errorf("a worktree command wrote %s: %q", f, out)
			}
		}
	}

	// Forged pointers: another folder, a gitdir whose back link names
	// another worktree, a commondir that is not the gitdir's parent.
	forged := filepath.Join(root, "forged")
	mkfile(t, filepath.Join(forged, ".git"), "gitdir: "+root+"\n")
	if got := sandbox.GitDirs(forged); got != nil {
		t.Errorf("GitDirs with .git naming %s = %v", root, got)
	}
	os.WriteFile(filepath.Join(forged, ".git"), []byte("gitdir: "+want[0]+"\n"), 0o644)
	if got := sandbox.GitDirs(forged); got != nil {
		t.Errorf("GitDirs with another worktree's gitdir = %v", got)
	}
	fake := filepath.Join(root, "fake")
	mkfile(t, filepath.Join(fake, "commondir"), repo+"/.git")
	mkfile(t, filepath.Join(fake, "gitdir"), filepath.Join(forged, ".git"))
	os.WriteFile(filepath.Join(forged, ".git"), []byte("gitdir: "+fake+"\n"), 0o644)
	if got := sandbox.GitDirs(forged); got != nil {
		t.Errorf("GitDirs with a forged commondir = %v", got)
	}
}

// BenchmarkStart measures starting `true` under workspace-write with and
// without the deny-list, which costs a walk along the denied paths.
func BenchmarkStart(b *testing.B) {
	sandboxtest.Require(b)
	dir := b.TempDir()
	p := sandbox.For(sandbox.WorkspaceWrite, dir)
	for _, bc := range []struct {
		name       string
		unreadable []string
	}{{"no-deny-list", nil}, {"deny-list", p.Unreadable}} {
		p.Unreadable = bc.unreadable
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if out, ok := run(b, p, dir, "true"); !ok {
					b.Fatal(out)
				}
			}
		})
	}
}
