package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dsh-go/dsh/tool"
)

// flagError is the error of a bad flag: cobra's, with the closest flag
// the command has when it is a likely typo, else where the flags are
// listed. Its code is USAGE.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var known []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				known = append(known, f.Name)
			}
		})
		cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { known = append(known, f.Name) })
		if near := tool.Suggest(known, name); near != "" {
			return withCode(codeUsage, fmt.Errorf("%s (did you mean --%s?)", msg, near))
		}
	}
	return withCode(codeUsage, fmt.Errorf("%s (%s --help lists the flags)", msg, cmd.CommandPath()))
}

// unknownCommand is the error of a word that names no subcommand of cmd:
// the closest command when it is a likely typo, else where they are listed.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own path
	}
	if near := cmd.SuggestionsFor(name); len(near) > 0 {
		return withCode(codeUsage, fmt.Errorf("%s (did you mean %q?)", msg, near[0]))
	}
	return withCode(codeUsage, errors.New(msg+" ("+cmd.CommandPath()+" --help lists the commands)"))
}

// noArgs is cobra.NoArgs with a did-you-mean for a command that has
// subcommands.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return unknownCommand(cmd, args[0])
	}
	return withCode(codeUsage, fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args[0]))
}
