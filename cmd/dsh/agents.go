package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/trust"
)

func (c *cli) agentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Show the agent definitions the subagent tool offers as subagent_type"}
	var cwd string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the agent definitions and where each came from",
		Long: `List the agent definitions the subagent tool offers as subagent_type: the
built-in ones (explore, general), then those read from $HOME/.claude/agents,
$DSH_HOME/agents, and the project's .claude/agents and .dsh/agents, the later
winning on a name clash. The project's definitions are used only when the
folder is trusted (see dsh trust); otherwise they are listed as not trusted.
Files in subfolders of these folders are read too. What a Claude Code file
says that dsh does not use is a warning on stderr, and so is every bad file,
naming its file and line: it is left out, and the others are listed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig(cwd)
			if err != nil {
				return err
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			rt, err := cfg.Build(cmd.Context(), quiet, session.NewMemoryBackend(), c.getenv)
			if err != nil {
				return err
			}
			defer rt.Close(context.Background())
			catalog, warnings, err := cfg.LoadAgents(rt, c.getenv)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(c.stderr, "dsh: warning:", w)
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tPROVIDER\tFROM\tDESCRIPTION")
			for _, d := range catalog.List() {
				provider := d.Provider
				if provider == "" {
					provider = "(the tool's)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.Name, provider, d.Source, clip(d.Description, 72))
				for _, o := range d.Overrides {
					fmt.Fprintf(w, "\t\t  overrides %s\t\n", o)
				}
			}
			p, err := cfg.Project(cfg.ProjectDir, c.getenv)
			if err != nil {
				return err
			}
			if p.State == trust.Untrusted || p.State == trust.Changed {
				for _, d := range p.Definitions {
					fmt.Fprintf(w, "%s\t-\tproject %s (%s: run \"dsh trust\" to use it)\t\n", d.Name, d.Path, p.State)
				}
			}
			return w.Flush()
		},
	}
	list.Flags().StringVar(&cwd, "cwd", "", "project directory (default: the current directory)")
	cmd.AddCommand(list)
	return cmd
}
