//go:build !temporal

package main

import (
	"errors"
	"slices"

	"github.com/spf13/cobra"
)

// workerCmd is `dsh worker` in a build without the temporal provider: it
// says how to get one.
func (c *cli) workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the children of temporal providers (in dsh builds with the tag temporal)",
		Long: `dsh worker runs the children of temporal providers (kind: temporal) from a
Temporal task queue. This dsh was built without them: build it with the tag
temporal (go install -tags temporal github.com/dsh-go/dsh/cmd/dsh@latest).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.Contains(args, "--help") || slices.Contains(args, "-h") {
				return cmd.Help()
			}
			return errors.New("this dsh has no temporal provider: build it with the tag temporal " +
				"(go install -tags temporal github.com/dsh-go/dsh/cmd/dsh@latest)")
		},
		DisableFlagParsing: true,
	}
}
