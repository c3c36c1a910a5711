package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/cmd/dsh/internal/tui"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
)

// chatFlags are the flags of `dsh chat` (bare `dsh` takes the defaults).
type chatFlags struct {
	routeFlags
	cwd, resume string
	maxSteps    int
	yes, cont   bool
	prompt      string // bare dsh's first prompt
}

const chatLong = `Talk with an agent, turn after turn, in one session.

On a terminal (stdin and stdout both are one) this is the interactive mode:
the answer streams, the model's thinking folds into a block (Ctrl+T), and
the children of the conversation are a live tree (provider, label, status,
elapsed time, tokens, the tool each runs now); background children stay
listed until read (/output) or killed (/kill). Enter sends, Alt+Enter (or
Shift+Enter where the terminal reports it, Ctrl+J, or a trailing \) adds a
line, Up and Down recall earlier prompts, Tab completes slash commands, Esc
interrupts the running turn and keeps the session, Ctrl+C twice exits.
bash, write_file and edit_file ask by default (unless permissions.tools
names them), as do the tools the permission policy says to ask about: y
allows once, a allows the tool in the whole tree for the rest of the
session, n denies; a child's request names the child. Tool calls show
their result folded (Ctrl+O unfolds), edits as a diff; the answer's
Markdown is rendered.
Typing / shows the slash commands: /tasks /output ID /kill ID /agents [N]
/clear (/new) /model [ROUTE] /permissions /mcp /sessions /resume ID /cost
/help /exit. Tab on an empty prompt selects a child, Enter opens its
transcript, Esc returns; Ctrl+R searches the history ($DSH_HOME/history). Every exit leaves the conversation in the scrollback
and prints the session id and dsh -r ID, which continues it. --continue and
--resume ID (and /resume ID) go on with a stored session, as dsh run's do.

Without a terminal, prompts come from stdin, one turn per line (a line
ending in \ goes on with the next line); the output is dsh run's. A turn
that does not complete ends the run, as do Ctrl+C and the end of stdin
once the work started has settled. Asks are refused unless --yes.` + envHelp

func (c *cli) chatCmd() *cobra.Command {
	var f chatFlags
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk with an agent: interactive on a terminal, prompts from stdin otherwise",
		Long:  chatLong,
		Example: `  dsh                                       # the same as dsh chat, on a terminal
  dsh -c                                    # continue the latest session here
  dsh -m deepseek-v4-pro "fix the tests"    # bare dsh takes chat's flags and a first prompt
  dsh chat --route local
  printf 'list the Go files\nnow count them\n' | dsh chat`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := emptyResume(cmd); err != nil {
				return err
			}
			return c.chat(cmd.Context(), f)
		},
	}
	f.register(cmd)
	return cmd
}

// register adds the chat flags to cmd (dsh chat, and bare dsh).
func (f *chatFlags) register(cmd *cobra.Command) {
	f.routeFlags.add(cmd)
	cmd.Flags().StringVar(&f.cwd, "cwd", "", "working directory of the agent (default: the current directory)")
	cmd.Flags().IntVar(&f.maxSteps, "max-steps", 0, "model calls a turn may make, 1 to 10000 (default agent.maxSteps, else 100)")
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "without a terminal: approve every tool call the permission policy says to ask about")
	cmd.Flags().BoolVarP(&f.cont, "continue", "c", false, "continue the latest top-level session of the working directory")
	cmd.Flags().StringVarP(&f.resume, "resume", "r", "", "continue session `ID` (an id, or an unambiguous prefix of one)")
	cmd.MarkFlagsMutuallyExclusive("continue", "resume")
}

// rootRun is bare dsh: dsh chat, its arguments the first prompt. A lone
// word that is no prompt (no space, before any --) is taken for a
// mistyped command rather than sent to the model.
func (c *cli) rootRun(f *chatFlags) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := emptyResume(cmd); err != nil {
			return err
		}
		if len(args) == 1 && cmd.ArgsLenAtDash() != 0 && !strings.ContainsAny(args[0], " \t\n?.,!'\"") {
			if len(cmd.SuggestionsFor(args[0])) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return withCode(codeUsage, fmt.Errorf("unknown command %q for \"dsh\": dsh --help lists the commands; to send it as a prompt: dsh -- %s", args[0], args[0]))
		}
		f.prompt = strings.Join(args, " ")
		return c.chat(cmd.Context(), *f)
	}
}

// chat runs a conversation: interactive when stdin and stdout are a
// terminal, else one turn per line of stdin; f.prompt, when set, is the
// first turn.
func (c *cli) chat(ctx context.Context, f chatFlags) error {
	in, out, interactive := c.terminal()
	if interactive {
		dir := f.cwd
		if dir == "" {
			dir = "."
		}
		if _, err := c.askTrust(dir, in, out); err != nil {
			return err
		}
	}
	cfg, err := c.loadConfig(f.cwd)
	if err != nil {
		return err
	}
	if err := f.apply(&cfg); err != nil {
		return err
	}
	if f.maxSteps != 0 {
		if err := config.CheckMaxSteps(f.maxSteps); err != nil {
			return fmt.Errorf("--max-steps: %w", err)
		}
		cfg.Agent.MaxSteps = f.maxSteps
	}
	f.cwd = cfg.ProjectDir
	if err := c.reportProject(cfg); err != nil {
		return err
	}
	if interactive && c.verbose { // stderr is the screen
		fmt.Fprintln(c.stderr, "dsh: warning: in the interactive mode, -v sends debug records to the log file ($DSH_HOME/logs/dsh.log), not to the screen")
		c.verbose, c.logLevel = false, "debug"
	}
	rt, err := cfg.Build(ctx, c.logger(), nil, c.getenv)
	if err != nil {
		return err
	}
	if err := c.checkKey(cfg); err != nil {
		rt.Close(context.Background())
		return err
	}
	c.sayRoute(cfg)
	policy := cfg.Policy()
	root := agent.CreateOptions{Cwd: f.cwd, Options: cfg.Agent, Policy: &policy, TokenBudget: cfg.Budget.Tokens}
	if f.cont || f.resume != "" {
		id, err := c.sessionToResume(rt.Sessions, f.cont, f.resume, f.cwd)
		if err != nil {
			rt.Close(context.Background())
			return err
		}
		root.SessionID, root.Resume, root.Cwd = id, true, ""
	}
	if !interactive {
		root.Asker = permission.AskerFunc(refuseAsks)
		if f.yes {
			root.Asker = permission.AskerFunc(approveAsks)
		}
		var readErr error
		prompts := promptLines(ctx, c.stdin, &readErr)
		if f.prompt != "" {
			prompts = prepend(f.prompt, prompts)
		}
		err := c.runTurns(ctx, rt, runSpec{root: root, price: cfg.PriceOf, echo: true}, prompts)
		return errors.Join(err, readErr)
	}
	return c.chatOnTerminal(ctx, rt, cfg, root, f.cwd, f.prompt, in, out)
}

// prepend yields first, then what rest yields.
func prepend(first string, rest iter.Seq[string]) iter.Seq[string] {
	return func(yield func(string) bool) {
		if !yield(first) {
			return
		}
		for s := range rest {
			if !yield(s) {
				return
			}
		}
	}
}

// terminal returns stdin and stdout when both are a terminal.
func (c *cli) terminal() (in, out *os.File, ok bool) {
	in, _ = c.stdin.(*os.File)
	if lw, isLocked := c.stdout.(*lockedWriter); isLocked {
		out, _ = lw.w.(*os.File)
	}
	ok = in != nil && out != nil && term.IsTerminal(in.Fd()) && term.IsTerminal(out.Fd())
	return in, out, ok
}

// chatOnTerminal runs the interactive mode. Whatever ends it, its last line
// names the session and what it spent.
func (c *cli) chatOnTerminal(ctx context.Context, rt *dsh.Runtime, cfg config.Config, root agent.CreateOptions, cwd, prompt string, in, out *os.File) (err error) {
	defer rt.Close(context.Background())
	policy := root.Policy.Narrow(permission.AskFor(interactiveAsks(cfg.Permissions)...))
	root.Policy = &policy
	var routes []string
	for _, m := range cfg.Models {
		routes = append(routes, m.Name)
	}
	ui := tui.New(tui.Options{Runtime: rt, In: in, Out: out, Model: cfg.Agent.Provider + "/" + cfg.Agent.Model, Routes: routes,
		Spent: func(u map[string]content.Usage) string {
			line, _, _ := spentLine(u, cfg.PriceOf)
			return line
		},
		Sessions:    func() (string, error) { return c.recentSessions(cfg, cwd) },
		HistoryFile: historyFile(c.getenv),
		Window: func(model string) int64 { // "route/model"
			route, id, _ := strings.Cut(model, "/")
			return int64(rt.LLM.ContextWindow(route, id))
		},
		ModelOf:     cfg.ModelOf,
		Permissions: describePolicy(cfg.Permissions),
		MCP:         describeMCP(cfg),
		Resume:      resumer{c: c, rt: rt, root: root, cwd: cwd}, Prompt: prompt})
	root.Asker = ui.Asker()
	a, err := rt.Agents.Create(ctx, root)
	if err != nil {
		return err
	}
	if root.Resume {
		rt.Subagents.ReportInterrupted(ctx, a)
	}
	defer atExit(ctx, func() { rt.Sessions.FlushLive() })()
	defer atExit(ctx, ui.Abandon)()
	last := a
	defer func() {
		line, _, _ := spentLine(subagent.UsageFromEvents(last.Session().Events()), cfg.PriceOf)
		fmt.Fprintf(c.stderr, "[session %s · %s, children included]\nContinue it with: dsh -r %s\n", last.ID(), line, last.ID())
	}()
	last, err = ui.Run(ctx, a)
	return err
}

// interactiveAsks are the tools the interactive mode asks about by
// default, those that change the machine (bash, write_file, edit_file),
// less those permissions.tools names (they keep its decision).
func interactiveAsks(r permission.Rules) []string {
	var ask []string
	for _, t := range []string{"bash", "write_file", "edit_file"} {
		if _, named := r.Tools[t]; !named {
			ask = append(ask, t)
		}
	}
	return ask
}

// historyFile is where the interactive mode keeps its prompt history:
// $DSH_HOME/history ("" when there is no home).
func historyFile(getenv func(string) string) string {
	home, err := config.Home(getenv)
	if err != nil || os.MkdirAll(home, 0o700) != nil {
		return ""
	}
	return filepath.Join(home, "history")
}

// describePolicy says what the interactive mode's policy asks about and
// denies, for /permissions.
func describePolicy(r permission.Rules) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Permissions (permissions in dsh.yaml; a child can only narrow them):\n  default: %s", cmp.Or(string(r.Default), "allow"))
	for _, t := range interactiveAsks(r) {
		fmt.Fprintf(&b, "\n  %s: ask (the interactive default)", t)
	}
	for _, t := range slices.Sorted(maps.Keys(r.Tools)) {
		fmt.Fprintf(&b, "\n  %s: %s", t, r.Tools[t])
	}
	return b.String()
}

// describeMCP lists the configured MCP servers, for /mcp: each one's name
// and where it was configured.
func describeMCP(cfg config.Config) []string {
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		from := "dsh.yaml"
		if src := cfg.MCPSource(name); src != "" {
			from = src
		}
		lines = append(lines, name+" (from "+from+")")
	}
	return lines
}

// resumer continues stored sessions for /resume: a top-level agent like
// the conversation's, told about the children that were interrupted.
type resumer struct {
	c    *cli
	rt   *dsh.Runtime
	root agent.CreateOptions
	cwd  string // the working directory of a new conversation
}

func (r resumer) Resume(ctx context.Context, id string, asker permission.Asker) (*agent.Agent, error) {
	full, err := r.c.sessionToResume(r.rt.Sessions, false, id, "")
	if err != nil {
		return nil, err
	}
	co := r.root
	co.SessionID, co.Resume, co.Cwd, co.Asker = full, true, "", asker
	a, err := r.rt.Agents.Create(ctx, co)
	if err != nil {
		return nil, err
	}
	r.rt.Subagents.ReportInterrupted(ctx, a)
	return a, nil
}

func (r resumer) New(ctx context.Context, asker permission.Asker) (*agent.Agent, error) {
	co := r.root
	co.SessionID, co.Resume, co.Asker = "", false, asker
	if co.Cwd == "" {
		co.Cwd = r.cwd
	}
	return r.rt.Agents.Create(ctx, co)
}

// recentSessions renders the newest stored sessions of cwd, for /sessions.
func (c *cli) recentSessions(cfg config.Config, cwd string) (string, error) {
	root, err := cfg.SessionsRoot(c.getenv)
	if err != nil {
		return "", err
	}
	st := session.NewStore(jsonl.New(root), nil)
	hs, err := st.List()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tAGE\tSTATUS\tTOKENS\tTITLE")
	rows := summarize(st, hs, cwd, false, false, 10)
	for _, r := range rows {
		fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\n", strings.Repeat("  ", r.indent), shortID(r.ID), age(r.Created), dash(r.Status), r.Usage.String(), r.Title)
	}
	w.Flush()
	if len(rows) == 0 {
		return "No stored sessions in " + cwd + ".", nil
	}
	return b.String() + "dsh sessions list --all lists every directory's; dsh sessions show ID prints one.", nil
}

// promptLines yields the prompts on r, one per line; a line ending in a
// backslash goes on with the next line, and blank lines are skipped. It
// stops at the end of r, when ctx ends, or at a read error (set in *errp).
func promptLines(ctx context.Context, r io.Reader, errp *error) iter.Seq[string] {
	type read struct {
		text string
		err  error
	}
	return func(yield func(string) bool) {
		reads := make(chan read)
		done := make(chan struct{})
		defer close(done)
		send := func(r read) bool {
			select {
			case reads <- r:
				return true
			case <-done:
				return false
			}
		}
		go func() { // reads while a turn runs, so that a blocked read cannot hold up Ctrl-C
			defer close(reads)
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 0, 64<<10), maxPrompt)
			var prompt strings.Builder
			for sc.Scan() {
				line := sc.Text()
				if cont, ok := strings.CutSuffix(line, `\`); ok {
					prompt.WriteString(cont + "\n")
					continue
				}
				prompt.WriteString(line)
				text := prompt.String()
				prompt.Reset()
				if strings.TrimSpace(text) != "" && !send(read{text: text}) {
					return
				}
			}
			if err := sc.Err(); err != nil {
				send(read{err: fmt.Errorf("reading prompts from stdin: %w", err)})
			} else if text := prompt.String(); strings.TrimSpace(text) != "" {
				send(read{text: text})
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case r, ok := <-reads:
				switch {
				case !ok:
					return
				case r.err != nil:
					*errp = r.err
					return
				case !yield(r.text):
					return
				}
			}
		}
	}
}
