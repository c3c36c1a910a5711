package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/trust"
)

func (c *cli) configCmd() *cobra.Command {
	var rf routeFlags
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the configuration files dsh reads here, and the merged result",
		Long: `Print which configuration files dsh reads in this folder, in the order each
is laid over the ones before it: the user's $DSH_HOME/dsh.yaml, the
project's .dsh/dsh.yaml when the folder is trusted (dsh trust), then the
file --config or $DSH_CONFIG names; the model route dsh run would use and
why; and the merged configuration as YAML, with the values that may be
secrets hidden (an MCP server's env and headers, a URL's user-info or key;
keys themselves are never in a file, only the names of their variables).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig("")
			if err != nil {
				return err
			}
			if err := rf.apply(&cfg); err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, "# files read, each over the ones before it:")
			files := cfg.Files()
			if len(files) == 0 {
				fmt.Fprintln(c.stdout, "#   none: the built-in defaults")
			}
			for _, f := range files {
				fmt.Fprintf(c.stdout, "#   %-10s %s\n", f.Layer, f.Path)
			}
			if wd, err := os.Getwd(); err == nil {
				if p, err := cfg.Project(wd, c.getenv); err == nil {
					if _, ok := p.Item(trust.ConfigFile); ok && p.State != trust.Trusted {
						fmt.Fprintf(c.stdout, "#   skipped    %s: this folder is %s (run \"dsh trust\" to use it)\n", p.Dir+"/"+trust.ConfigFile, p.State)
					}
				}
			}
			route := cfg.RouteChoice()
			if route == "" {
				route = fmt.Sprintf("model route %s, model %s", cfg.Agent.Provider, cfg.Agent.Model)
			}
			fmt.Fprintf(c.stdout, "# %s\n", route)
			out, err := cfg.Render(c.getenv)
			if err != nil {
				return err
			}
			_, err = c.stdout.Write(out)
			return err
		},
	}
	rf.add(cmd)
	return cmd
}
