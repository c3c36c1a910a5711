package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/trust"
)

func (c *cli) trustCmd() *cobra.Command {
	var revoke, list bool
	cmd := &cobra.Command{
		Use:   "trust [PATH]",
		Short: "Trust a folder's .mcp.json and agent definitions (default: the working directory)",
		Long: `A folder's project items (its .mcp.json, and the agent definitions of its
.dsh/agents and .claude/agents) can run commands on this machine, so dsh uses
them only in a folder you trust. dsh trust prints what the folder adds (each
MCP server with its command or URL, each definition, marking those that
replace a built-in or a user one and those that run hooks) and records the
trust in $DSH_HOME/trust.json with a hash of the items: when one changes,
the folder is not trusted again until you run dsh trust once more.

--revoke forgets the folder; --list prints the trusted folders.`,
		Example: `  dsh trust                 # trust the working directory
  dsh trust ~/src/project
  dsh trust --revoke
  dsh trust --list`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := config.TrustStore(c.getenv)
			if err != nil {
				return err
			}
			if list {
				if len(args) > 0 || revoke {
					return errors.New("trust: --list takes no folder and no --revoke")
				}
				return c.listTrusted(store)
			}
			dir := "."
			if len(args) > 0 {
				dir = args[0]
			}
			if _, err := os.Stat(dir); err != nil && !revoke {
				return fmt.Errorf("trust: %w", err)
			}
			if revoke {
				ok, err := store.Revoke(dir)
				if err != nil {
					return err
				}
				abs, _ := filepath.Abs(dir)
				if !ok {
					fmt.Fprintf(c.stdout, "%s was not trusted\n", abs)
					return nil
				}
				fmt.Fprintf(c.stdout, "%s is no longer trusted\n", abs)
				return nil
			}
			cfg, _ := config.Load(c.configPath, c.getenv) // for what the folder's items would replace
			p, err := cfg.Project(dir, c.getenv)
			if err != nil {
				return err
			}
			if p.State == trust.Nothing {
				fmt.Fprintf(c.stdout, "%s has no .mcp.json and no agent definitions: nothing to trust\n", p.Dir)
				return nil
			}
			fmt.Fprintf(c.stdout, "%s adds:\n%s", p.Dir, p.Describe("  "))
			if _, err := store.Trust(p.Dir); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "%s is trusted (%s)\n", p.Dir, store.Path())
			return nil
		},
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "forget the folder: its project items no longer take effect")
	cmd.Flags().BoolVar(&list, "list", false, "list the trusted folders")
	return cmd
}

// listTrusted prints the trusted folders and whether each still has the
// items it was trusted with.
func (c *cli) listTrusted(store *trust.Store) error {
	entries, err := store.List()
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintln(c.stdout, "No folder is trusted.")
		return nil
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FOLDER\tTRUSTED\tSTATE")
	for _, e := range entries {
		state := "missing"
		if st, err := store.Check(e.Dir); err == nil {
			state = st.State.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", e.Dir, e.Trusted.Local().Format(time.DateTime), state)
	}
	return w.Flush()
}

// reportProject says on stderr, once, what the project items of
// cfg.ProjectDir (the working directory when unset) are to this command:
// skipped when the folder is not trusted (with how to trust it), and, when
// it is, which of its definitions replace a built-in or a user one.
func (c *cli) reportProject(cfg config.Config) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	dir := cmp.Or(cfg.ProjectDir, wd)
	p, err := cfg.Project(dir, c.getenv)
	if err != nil {
		return err
	}
	if line := skippedNotice(p, resolved(dir) == resolved(wd)); line != "" {
		fmt.Fprintln(c.stderr, "dsh:", line)
	}
	if p.State == trust.Trusted {
		for _, d := range p.Definitions {
			if d.Replaces != "" {
				fmt.Fprintf(c.stderr, "dsh: warning: the project's agent definition %s (%s) replaces %s\n", d.Name, d.Path, d.Replaces)
			}
		}
	}
	return nil
}

// resolved returns dir with its symlinks resolved, or dir.
func resolved(dir string) string {
	if d, err := trust.Resolve(dir); err == nil {
		return d
	}
	return dir
}

// skippedNotice is the line that says an untrusted folder's items were
// skipped, or "" when nothing was.
func skippedNotice(p config.Project, here bool) string {
	folder, cmd := "this folder", `"dsh trust"`
	if !here {
		folder, cmd = "folder "+p.Dir, `"dsh trust `+p.Dir+`"`
	}
	if p.Skipped() == "" {
		return ""
	}
	switch p.State {
	case trust.Untrusted:
		return fmt.Sprintf("%s is not trusted: skipped %s (run %s to use them)", folder, p.Skipped(), cmd)
	case trust.Changed:
		return fmt.Sprintf("%s changed since you trusted it: skipped %s (run %s to review and use them)", folder, p.Skipped(), cmd)
	}
	return ""
}

// askTrust asks on the terminal, before the interactive mode starts,
// whether to trust dir when it has untrusted (new or changed) project
// items: it shows what they would add, and records the trust on "y". It
// reports whether it recorded it.
func (c *cli) askTrust(dir string, in io.Reader, out io.Writer) (bool, error) {
	cfg, _ := config.Load(c.configPath, c.getenv)
	p, err := cfg.Project(dir, c.getenv)
	if err != nil {
		return false, err
	}
	if p.State != trust.Untrusted && p.State != trust.Changed {
		return false, nil
	}
	why := "has project files that can run commands on this machine"
	if p.State == trust.Changed {
		why = "changed since you trusted it"
	}
	fmt.Fprintf(out, "%s %s. It would add:\n%s", p.Dir, why, p.Describe("  "))
	fmt.Fprint(out, "Trust this folder? [y/N] ")
	answer, err := readLine(in)
	if err != nil && answer == "" {
		return false, nil
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		fmt.Fprintln(out, "Going on without them.")
		return false, nil
	}
	store, err := config.TrustStore(c.getenv)
	if err != nil {
		return false, err
	}
	st, err := store.Trust(p.Dir)
	if err != nil {
		return false, err
	}
	if st.Hash() != p.Hash() { // changed while the user read them
		store.Revoke(p.Dir)
		fmt.Fprintln(out, "The folder's project files changed meanwhile: not trusted.")
		return false, nil
	}
	return true, nil
}

// readLine reads up to a newline, a byte at a time, so that nothing meant
// for the interactive mode is consumed.
func readLine(in io.Reader) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for b.Len() < 256 {
		n, err := in.Read(buf)
		if n == 1 {
			if buf[0] == '\n' || buf[0] == '\r' {
				return b.String(), nil
			}
			b.WriteByte(buf[0])
		}
		if err != nil {
			return b.String(), err
		}
	}
	return b.String(), nil
}
