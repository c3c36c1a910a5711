package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
)

func (c *cli) sessionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "List and show stored sessions"}
	store := func() (*session.Store, error) {
		cfg, err := c.loadConfig()
		if err != nil {
			return nil, err
		}
		root, err := cfg.SessionsRoot(c.getenv)
		if err != nil {
			return nil, err
		}
		return session.NewStore(jsonl.New(root), nil), nil
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List stored sessions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store()
			if err != nil {
				return err
			}
			hs, err := st.List()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tCREATED\tDEPTH\tPARENT\tCWD")
			for _, h := range hs {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", h.ID, time.UnixMilli(h.CreatedAt).Format(time.DateTime),
					h.DelegationDepth, dash(h.ParentSession), dash(h.Cwd))
			}
			return w.Flush()
		},
	}
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print a stored session's conversation (read-only: a session being written is shown as far as it is)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store()
			if err != nil {
				return err
			}
			h, events, err := st.Read(args[0])
			if err != nil {
				return err
			}
			c.printSession(h, events)
			return nil
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *cli) printSession(h session.Header, events []session.Event) {
	fmt.Fprintf(c.stdout, "session %s  created %s  depth %d", h.ID, time.UnixMilli(h.CreatedAt).Format(time.DateTime), h.DelegationDepth)
	if h.ParentSession != "" {
		fmt.Fprintf(c.stdout, "  parent %s", h.ParentSession)
	}
	fmt.Fprintf(c.stdout, "\ncwd %s · %d events\n", dash(h.Cwd), len(events))
	open := false // Read closes the open turn of a crashed writer, not a live one's
	for _, e := range events[min(h.SeedLength, len(events)):] {
		switch d := e.Data.(type) {
		case session.TurnStart:
			open = true
			fmt.Fprintf(c.stdout, "\n── turn %d\n", d.Turn)
		case content.Message:
			fmt.Fprintf(c.stdout, "user: %s\n", content.JoinText(d.Content))
		case session.AssistantMessage:
			if r := content.JoinReasoning(d.Message.Content); r != "" {
				fmt.Fprintf(c.stdout, "thinking: %s\n", clip(r, 300))
			}
			if t := content.JoinText(d.Message.Content); t != "" {
				fmt.Fprintf(c.stdout, "assistant: %s\n", strings.TrimSpace(t))
			}
		case session.ToolCall:
			fmt.Fprintf(c.stdout, "tool %s %s\n", d.Name, clip(d.Arguments, 200))
		case session.ToolResult:
			status := "result"
			if d.Error != nil {
				status = "error " + d.Error.Code
			}
			if len(d.Message.Content) == 1 {
				fmt.Fprintf(c.stdout, "  %s: %s\n", status, clip(content.JoinText(d.Message.Content[0].Content), 300))
			}
		case session.TurnEnd:
			open = false
			fmt.Fprintf(c.stdout, "── end: %s\n", d.Reason.Kind)
		}
	}
	if open {
		fmt.Fprintln(c.stdout, "── running (a live dsh is writing this session)")
	}
}

// demoDir makes a fresh working directory for the demo.
func demoDir() (string, error) { return os.MkdirTemp("", "dsh-demo-") }
