package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/prompt/instructions"
)

func (c *cli) initCmd() *cobra.Command {
	var cwd string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a first AGENTS.md for this folder (never overwrites one)",
		Long: `Write a first AGENTS.md into the folder (default: the current directory),
drafted from what the folder holds: its languages (go.mod, package.json,
Cargo.toml, pyproject.toml, …), the build, test and lint commands those and a
Makefile define, its top folders, and an import of its CLAUDE.md when it has
one. No model is asked. An existing AGENTS.md is never overwritten: the
command then fails, naming it. Every agent reads AGENTS.md (see "Project
instructions" in the README); edit the draft.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := cwd
			if dir == "" {
				var err error
				if dir, err = os.Getwd(); err != nil {
					return err
				}
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return fmt.Errorf("init: %s is not a folder", dir)
			}
			path, err := instructions.Init(dir)
			if errors.Is(err, instructions.ErrExists) {
				return err
			}
			if err != nil {
				return fmt.Errorf("init: %w", err)
			}
			fmt.Fprintf(c.stdout, "wrote %s: a first draft from the files found here (no model was asked); edit it: agents read it from dsh's next start\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "the folder (default: the current directory)")
	return cmd
}
