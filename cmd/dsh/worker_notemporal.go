//go:build !temporal

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// workerCmd is `dsh worker` in a build without the temporal provider: it
// says how to get one.
func (c *cli) workerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the children of temporal providers (in dsh builds with the tag temporal)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("this dsh has no temporal provider: build it with the tag temporal " +
				"(go install -tags temporal github.com/dsh-go/dsh/cmd/dsh@latest)")
		},
		DisableFlagParsing: true,
	}
}
