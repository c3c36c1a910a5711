package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
)

func (c *cli) sessionsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sessions", Short: "List and show stored sessions (bare: list them)",
		Long: "List and show the sessions stored under $DSH_HOME/sessions (or sessionsDir). Both only read:\n" +
			"a session a running dsh is writing is shown as far as it is. Without a command, dsh sessions\n" +
			"is dsh sessions list." + envHelp}
	store := func() (*session.Store, error) {
		cfg, err := c.loadConfig("")
		if err != nil {
			return nil, err
		}
		root, err := cfg.SessionsRoot(c.getenv)
		if err != nil {
			return nil, err
		}
		return session.NewStore(jsonl.New(root), nil), nil
	}
	var flat, asJSON, all bool
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List stored sessions, newest first, children under their parents",
		Long: `List stored sessions, newest first: id, age, status of the last turn, tokens
(children's included in their own rows), title (the first prompt). Children
are listed under their parents; --flat lists every session on its own.
By default only the sessions of the current directory are listed.` + envHelp,
		Example: `  dsh sessions list
  dsh sessions list --all --limit 50
  dsh sessions list --json | jq -r '.[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store()
			if err != nil {
				return err
			}
			hs, err := st.List()
			if err != nil {
				return err
			}
			wd, _ := os.Getwd()
			rows := summarize(st, hs, wd, all, flat, limit)
			if asJSON {
				enc := json.NewEncoder(c.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tAGE\tSTATUS\tTOKENS\tTITLE")
			for _, r := range rows {
				fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", strings.Repeat("  ", r.indent), shortID(r.ID), age(r.Created), dash(r.Status),
					r.Usage.String(), r.Title)
			}
			if len(rows) == 0 {
				fmt.Fprintln(w, "(no sessions here: --all lists every directory's)")
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&flat, "flat", false, "list children as sessions of their own, not under their parents")
	list.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	list.Flags().BoolVar(&all, "all", false, "list the sessions of every directory, not only the current one's")
	list.Flags().IntVar(&limit, "limit", 20, "list at most this many top-level sessions (0: no limit)")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Print a stored session's conversation (read-only: a session being written is shown as far as it is)",
		Long: `Print a stored session's conversation: each turn with its usage and how it
ended (a failed turn's error), each tool call, and for a subagent call the
child's session id. ID may be any unambiguous prefix.` + envHelp,
		Example: "  dsh sessions show 4b0c",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store()
			if err != nil {
				return err
			}
			id, err := resolveID(st, args[0])
			if err != nil {
				return err
			}
			h, events, err := st.Read(id)
			if err != nil {
				return err
			}
			c.printSession(h, events)
			return nil
		},
	}
	cmd.AddCommand(list, show)
	// Bare `dsh sessions` is `dsh sessions list`, with its flags.
	cmd.Args, cmd.RunE = noArgs, list.RunE
	cmd.Flags().AddFlagSet(list.Flags())
	return cmd
}

// envHelp lists the environment dsh reads, for --help.
const envHelp = `

Environment:
  DEEPSEEK_API_KEY, ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY
                      the built-in model routes' keys: with no route named
                      (agent.route, --route), dsh uses the first that is set
  DEEPSEEK_BASE_URL, ANTHROPIC_BASE_URL, OPENAI_BASE_URL, OPENROUTER_BASE_URL
                      their endpoints
  DSH_LOCAL_BASE_URL  a local OpenAI-compatible server (route local, picked
                      last; DSH_LOCAL_MODEL names its model)
  DSH_HOME            where sessions, logs and dsh.yaml live (default ~/.dsh)
  DSH_CONFIG          a configuration file laid over $DSH_HOME/dsh.yaml and
                      the trusted project's .dsh/dsh.yaml (dsh config)
  DSH_LOG             the log file's level: debug, info, warn or error`

// resolveID finds the session an id or an unambiguous prefix names.
func resolveID(st *session.Store, prefix string) (string, error) {
	if prefix == "" {
		return "", errEmptyID
	}
	hs, err := st.List()
	if err != nil {
		return "", err
	}
	var matches []string
	for _, h := range hs {
		if h.ID == prefix {
			return h.ID, nil
		}
		if strings.HasPrefix(h.ID, prefix) {
			matches = append(matches, h.ID)
		}
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no session %q", prefix)
	case 1:
		return matches[0], nil
	}
	slices.Sort(matches)
	return "", fmt.Errorf("%q is ambiguous: it starts %d sessions (%s)", prefix, len(matches), strings.Join(matches, ", "))
}

// sessionRow is one line of `sessions list`.
type sessionRow struct {
	ID       string        `json:"id"`
	Parent   string        `json:"parent,omitempty"`
	Depth    int           `json:"depth"`
	Created  time.Time     `json:"created"`
	Cwd      string        `json:"cwd"`
	Status   string        `json:"status"` // the last turn's end reason, "running", or "" before any turn
	Usage    content.Usage `json:"usage"`
	Title    string        `json:"title"`
	indent   int
	children []*sessionRow
}

// summarize reads the sessions of hs (those of cwd unless all) into rows:
// the newest limit top-level sessions, each followed by its descendants
// (unless flat).
func summarize(st *session.Store, hs []session.Header, cwd string, all, flat bool, limit int) []*sessionRow {
	byID := map[string]*sessionRow{}
	var roots []*sessionRow
	for _, h := range hs { // newest first
		if !all && h.Cwd != cwd {
			continue
		}
		r := &sessionRow{ID: h.ID, Parent: h.ParentSession, Depth: h.DelegationDepth, Created: time.UnixMilli(h.CreatedAt), Cwd: h.Cwd}
		byID[h.ID] = r
	}
	for _, h := range hs {
		r := byID[h.ID]
		if r == nil {
			continue
		}
		if p := byID[r.Parent]; p != nil && !flat {
			p.children = append(p.children, r)
			continue
		}
		roots = append(roots, r)
	}
	if limit > 0 && len(roots) > limit {
		roots = roots[:limit]
	}
	var out []*sessionRow
	var walk func(r *sessionRow, indent int)
	walk = func(r *sessionRow, indent int) {
		r.indent = indent
		r.fill(st)
		out = append(out, r)
		slices.SortFunc(r.children, func(a, b *sessionRow) int { return a.Created.Compare(b.Created) })
		for _, c := range r.children {
			walk(c, indent+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return out
}

// fill reads the session's title, status and usage from its log.
func (r *sessionRow) fill(st *session.Store) {
	h, events, err := st.Read(r.ID)
	if err != nil {
		r.Status = "unreadable"
		return
	}
	own := events[min(h.SeedLength, len(events)):]
	for _, e := range own {
		switch d := e.Data.(type) {
		case content.Message:
			if r.Title == "" && d.Source.Kind == content.SourceUser {
				_, task, _ := prompt.SplitChildTask(content.JoinText(d.Content))
				r.Title = clip(strings.TrimSpace(task), 60)
			}
		case session.TurnStart:
			r.Status = "running"
		case session.TurnEnd:
			r.Status = d.Reason.Kind
		}
	}
	for _, u := range subagent.UsageFromEvents(own) {
		r.Usage = r.Usage.Add(u)
	}
}

// shortID is the first 8 characters of an id, enough to name it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// age renders how long ago t was, coarsely.
func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
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
	var turn content.Usage
	for _, e := range events[min(h.SeedLength, len(events)):] {
		switch d := e.Data.(type) {
		case session.TurnStart:
			open, turn = true, content.Usage{}
			fmt.Fprintf(c.stdout, "\n── turn %d\n", d.Turn)
		case content.Message:
			fmt.Fprintf(c.stdout, "user: %s\n", content.JoinText(d.Content))
		case session.AssistantMessage:
			if d.Usage != nil {
				turn = turn.Add(*d.Usage)
			}
			if r := content.JoinReasoning(d.Message.Content); r != "" {
				fmt.Fprintf(c.stdout, "thinking: %s\n", clip(r, 300))
			}
			if t := content.JoinText(d.Message.Content); t != "" {
				fmt.Fprintf(c.stdout, "assistant: %s\n", strings.TrimSpace(t))
			}
		case session.ToolCall:
			fmt.Fprintf(c.stdout, "tool %s %s\n", d.Name, clip(d.Arguments, 200))
		case session.Compaction:
			printCompaction(c.stdout, d)
			if d.Usage != nil {
				turn = turn.Add(*d.Usage)
			}
		case session.ToolResult:
			status := "result"
			if d.Error != nil {
				status = "error " + d.Error.Code
			}
			if len(d.Message.Content) == 1 {
				fmt.Fprintf(c.stdout, "  %s: %s\n", status, clip(content.JoinText(d.Message.Content[0].Content), 300))
			}
			var m subagent.ChildMeta
			if len(d.Meta) > 0 && json.Unmarshal(d.Meta, &m) == nil && m.SubagentChild != "" {
				fmt.Fprintf(c.stdout, "  child %s (%s): dsh sessions show %s\n", m.SubagentChild, m.SubagentProvider, shortID(m.SubagentChild))
			}
			for _, u := range d.Usage {
				turn = turn.Add(u)
			}
		case json.RawMessage: // a continuable child's activation, settled
			for _, u := range subagent.UsageFromEvents([]session.Event{e}) {
				turn = turn.Add(u)
			}
		case session.TurnEnd:
			open = false
			why := ""
			if f := d.Reason.Error; f != nil {
				why = fmt.Sprintf(": %s: %s", f.Code, f.Message)
			}
			fmt.Fprintf(c.stdout, "── end: %s%s · tokens %s\n", d.Reason.Kind, why, turn)
		}
	}
	if open {
		fmt.Fprintln(c.stdout, "── running (a live dsh is writing this session)")
	}
}

// demoDir makes a fresh working directory for the demo.
func demoDir() (string, error) { return os.MkdirTemp("", "dsh-demo-") }

// printCompaction shows a compaction: what it replaced, and the summary
// the model reads from then on.
func printCompaction(w io.Writer, d session.Compaction) {
	fmt.Fprintf(w, "── compacted (%s): %d messages summarised, %d kept", d.Trigger, d.Compacted, d.Kept)
	if d.TokensBefore > 0 {
		fmt.Fprintf(w, " · about %d tokens before", d.TokensBefore)
	}
	if d.Focus != "" {
		fmt.Fprintf(w, " · focus %q", d.Focus)
	}
	fmt.Fprintf(w, "\nsummary: %s\n", clip(content.JoinText(d.Summary.Content), 600))
}
