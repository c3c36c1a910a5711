package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/trust"
)

// hookSource is a file of hooks besides dsh.yaml: one of Claude Code's
// settings files.
type hookSource struct {
	path string
	cfg  hook.Config // what dsh runs of it (hook.Config.Usable)
}

// HookFiles returns the files of hooks besides dsh.yaml that the
// configuration runs (Claude Code's settings files), in the order their
// hooks run, after dsh.yaml's.
func (cfg Config) HookFiles() []string {
	var out []string
	for _, s := range cfg.hookSources {
		out = append(out, s.path)
	}
	return out
}

// settingsHooks reads the hooks of a Claude Code settings file at path:
// what dsh runs of them, and a warning for each part it leaves out (or for
// the whole file when it cannot be read).
func settingsHooks(path string, data []byte) (hook.Config, []string) {
	c, err := hook.ParseSettings(data)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s ignored: %v", path, err)}
	}
	usable, warnings, err := c.Usable(false)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s ignored: hooks.%v", path, err)}
	}
	for i, w := range warnings {
		warnings[i] = path + ": " + w
	}
	return usable, warnings
}

// withClaudeSettings adds the hooks of Claude Code's settings files: the
// user's ~/.claude/settings.json, and dir's .claude/settings.json and
// .claude/settings.local.json when dir is a trusted folder (see package
// trust), from the content the trust was checked against.
func (cfg Config) withClaudeSettings(dir string, getenv func(string) string) (Config, error) {
	add := func(path string, data []byte) {
		c, warnings := settingsHooks(path, data)
		cfg.warnings = append(slices.Clip(cfg.warnings), warnings...)
		if len(c) > 0 {
			cfg.hookSources = append(slices.Clip(cfg.hookSources), hookSource{path: path, cfg: c})
		}
	}
	if h := getenv("HOME"); h != "" {
		path := filepath.Join(h, filepath.FromSlash(trust.SettingsFile))
		data, err := trust.ReadFile(path, trust.MaxItem)
		switch {
		case err == nil:
			add(path, data)
		case !errors.Is(err, os.ErrNotExist):
			cfg.warnings = append(slices.Clip(cfg.warnings), fmt.Sprintf("%s ignored: %v", path, err))
		}
	}
	store, err := TrustStore(getenv)
	if err != nil {
		return cfg, nil // no record: nothing is trusted
	}
	st, err := store.Check(dir)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil || st.State != trust.Trusted {
		return cfg, err
	}
	for _, f := range []string{trust.SettingsFile, trust.LocalSettingsFile} {
		if it, ok := st.Item(f); ok && it.Problem == "" {
			add(filepath.Join(st.Dir, filepath.FromSlash(f)), it.Data)
		}
	}
	return cfg, nil
}

// hooks compiles the hooks of dsh.yaml and of the settings files, run
// under the sandbox of commands.
func (cfg Config) hooks(log *slog.Logger) (*hook.Set, error) {
	set, _, err := hook.NewSettings(cfg.Hooks, cmp.Or(cfg.path, "dsh.yaml"), log)
	if err != nil {
		return nil, err
	}
	for _, src := range cfg.hookSources {
		s, _, err := hook.NewSettings(src.cfg, src.path, log)
		if err != nil {
			return nil, err
		}
		set = set.With(s)
	}
	return set.WithSandbox(cfg.Tools.Sandbox.Or(sandbox.Default), cfg.Tools.Network), nil
}
