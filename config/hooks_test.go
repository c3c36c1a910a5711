package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/trust"
)

// A hooks block pasted from Claude Code's settings, as real ones are
// written (events dsh does not run, fields it does not know, hooks of
// other types), makes a valid dsh.yaml: what dsh does not run is a
// warning each, never an error.
func TestPastedClaudeHooksParse(t *testing.T) {
	yaml := `hooks: {
  "SessionStart": [{"matcher": "startup|clear|compact", "hooks": [{"type": "command", "command": "cat notes.md", "statusMessage": "reading"}]}],
  "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "python3 check.py", "timeout": 10}]}],
  "PreToolUse": [{"matcher": "^Task$", "hooks": [{"type": "command", "command": "log.sh", "once": true, "async": true}]}],
  "PostToolUse": [{"matcher": "Edit|Write|MultiEdit", "hooks": [{"type": "command", "command": "fmt.sh", "if": "Write(*.ts)",
                   "asyncRewake": true, "rewakeMessage": "m", "rewakeSummary": "s"}]}],
  "PreCompact": [{"hooks": [{"type": "command", "command": "save.sh"}]}],
  "SessionEnd": [{"hooks": [{"type": "command", "command": "bye.sh"}]}],
  "SubagentStop": [{"hooks": [{"type": "command", "command": "sub.sh"}]}],
  "Stop": [{"hooks": [{"type": "agent", "prompt": "verify"}, {"type": "command", "command": "stop.sh"}]}],
  "UserPromptExpansion": [{"hooks": [{"type": "http", "url": "http://127.0.0.1:1"}]}]
}
`
	cfg, err := config.Parse("dsh.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cfg.Hooks); got != 8 {
		t.Errorf("%d events kept: %v", got, cfg.Hooks)
	}
	if stop := cfg.Hooks["Stop"]; len(stop) != 1 || len(stop[0].Hooks) != 1 || stop[0].Hooks[0].Command != "stop.sh" {
		t.Errorf("Stop %+v", stop)
	}
	if cfg.Hooks["UserPromptSubmit"][0].Hooks[0].Timeout != 10 {
		t.Errorf("timeout not honoured: %+v", cfg.Hooks["UserPromptSubmit"])
	}
	w := strings.Join(cfg.Warnings(), "\n")
	for _, want := range []string{"hooks.UserPromptExpansion: dsh runs no UserPromptExpansion hooks", "a hook of type agent is ignored"} {
		if !strings.Contains(w, want) {
			t.Errorf("no warning %q in %q", want, w)
		}
	}
	// A bad value is still an error naming its place.
	_, err = config.Parse("dsh.yaml", []byte("hooks:\n  Stop: [{hooks: [{command: x, timeout: soon}]}]\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a bad timeout: %v", err)
	}
}

// Load runs the hooks of the user's ~/.claude/settings.json, and those of
// a project's .claude/settings.json and .claude/settings.local.json only
// when the folder is trusted, and not once one of them changed.
func TestLoadReadsClaudeSettings(t *testing.T) {
	home, dsh, dir := t.TempDir(), t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.MkdirAll(filepath.Join(dir, ".claude"), 0o755)
	write := func(path, cmd string) {
		t.Helper()
		data := `{"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "` + cmd + `"}]}],
		  "Elicitation": [{"hooks": [{"type": "command", "command": "x"}]}]}}`
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	userFile := filepath.Join(home, filepath.FromSlash(trust.SettingsFile))
	projectFile := filepath.Join(dir, filepath.FromSlash(trust.SettingsFile))
	localFile := filepath.Join(dir, filepath.FromSlash(trust.LocalSettingsFile))
	write(userFile, "user.sh")
	write(projectFile, "project.sh")
	write(localFile, "local.sh")
	t.Chdir(dir)
	getenv := env(map[string]string{"DSH_HOME": dsh, "HOME": home})
	load := func() config.Config {
		t.Helper()
		cfg, err := config.Load("", getenv)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := load()
	if got := cfg.HookFiles(); !slices.Equal(got, []string{userFile}) {
		t.Fatalf("untrusted: hook files %v", got)
	}
	if w := strings.Join(cfg.Warnings(), "\n"); !strings.Contains(w, userFile+": hooks.Elicitation: dsh runs no Elicitation hooks") {
		t.Errorf("warnings %q", w)
	}
	p, err := cfg.Project(dir, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Skipped(); s != "2 hooks of Claude Code's settings" {
		t.Errorf("Skipped() = %q", s)
	}
	if d := p.Describe(""); !strings.Contains(d, "hook (.claude/settings.json, PreToolUse Bash), a command on this machine: project.sh") ||
		!strings.Contains(d, "local.sh") {
		t.Errorf("Describe:\n%s", d)
	}
	if _, err := trust.Open(dsh).Trust(dir); err != nil {
		t.Fatal(err)
	}
	if got := load().HookFiles(); !slices.Equal(got, []string{userFile, projectFile, localFile}) {
		t.Fatalf("trusted: hook files %v", got)
	}
	write(localFile, "planted.sh")
	if got := load().HookFiles(); !slices.Equal(got, []string{userFile}) {
		t.Fatalf("changed: hook files %v", got)
	}
	// A broken settings file is a warning naming it, not a failure.
	os.WriteFile(userFile, []byte("{not json"), 0o600)
	if w := strings.Join(load().Warnings(), "\n"); !strings.Contains(w, userFile+" ignored") {
		t.Errorf("warnings %q", w)
	}
}

// In the home folder, ~/.claude/settings.json is the user's, not a project
// item to trust.
func TestHomeSettingsAreTheUsers(t *testing.T) {
	home, dsh := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}}`), 0o600)
	t.Chdir(home)
	getenv := env(map[string]string{"DSH_HOME": dsh, "HOME": home})
	cfg, err := config.Load("", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.HookFiles(); len(got) != 1 {
		t.Errorf("hook files %v", got)
	}
	p, err := cfg.Project(home, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Skipped(); s != "" {
		t.Errorf("Skipped() = %q", s)
	}
}
