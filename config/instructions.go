package config

import (
	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/prompt/instructions"
)

// mountInstructions puts the project's instructions (AGENTS.md, CLAUDE.md,
// $DSH_HOME/AGENTS.md; see package prompt/instructions) into every agent's
// system prompt, read from ProjectDir (default: the working directory).
// What goes wrong is a warning in the log, never an error.
func (cfg Config) mountInstructions(rt *dsh.Runtime, getenv func(string) string, redact func(string) string) error {
	dir, err := cfg.projectDir()
	if err != nil {
		return err
	}
	home, err := Home(getenv)
	if err != nil {
		return err
	}
	in := instructions.Load(instructions.Options{Cwd: dir, UserDir: home, Home: getenv("HOME")})
	for _, w := range in.Warnings {
		rt.Log.Warn(w)
	}
	_, err = instructions.Register(rt.Prompt, redact(in.Text))
	return err
}
