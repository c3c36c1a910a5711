package main

import (
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/telemetry"
)

func (c *cli) runCmd() *cobra.Command {
	var rf routeFlags
	var cwd, resume, format string
	var maxSteps int
	var yes, cont, jsonOut, quiet bool
	cmd := &cobra.Command{
		Use:   "run PROMPT | -",
		Short: "Run an agent on the configured model and print its answer as it streams",
		Long: `Run one turn of a new agent on the configured model. The answer streams to
stdout; reasoning, tool calls and child runs go to stderr.

--continue goes on with the latest top-level session of the working
directory, --resume ID with the session ID (or an unambiguous prefix of
it; ` + "`dsh sessions list`" + ` shows them), from its log alone: the model sees
the whole conversation so far, and its subagents can be messaged again.
Children that were still working when their process ended are reported to
the resumed conversation as interrupted.

Tools the permission policy (permissions in dsh.yaml) says to ask about are
refused, with a message the model reads, since dsh run asks nobody: pass
--yes to approve them. A turn stops after --max-steps model calls (default
agent.maxSteps, else 100), and the whole tree after budget.tokens tokens
(default 10,000,000).

Every way the run can end is recorded in the session: SIGINT (Ctrl-C),
SIGTERM and SIGHUP abort the running turn, and those of all its children
with their processes, and log its end; so does stdout closing (as when
` + "`dsh run … | head`" + ` has read enough). A second signal exits at once,
after a best-effort flush; the next load marks the open turn interrupted.

Exit status:
  0    the turn completed
  1    an error (the turn failed, or dsh could not start it)
  129  SIGHUP (the terminal or ssh connection closed)
  130  SIGINT (Ctrl-C)
  141  stdout closed
  143  SIGTERM

With --json, stdout has one JSON object per line and always ends with one
"result" line, start-up errors included: its "text" is the answer, "code"
and "error" say why a run failed (see the README).`,
		Example: `  dsh run "Find the TODO comments and summarise them"
  git diff | dsh run -                      # the prompt from stdin
  dsh run --json "list the Go files" | jq -c 'select(.type=="result")'
  dsh run --yes --max-steps 20 "fix the failing test"`,
		Args: needPrompt,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			resultOnly := false
			switch format {
			case "text":
			case "stream-json":
				jsonOut = true
			case "json":
				jsonOut, resultOnly = true, true
			default:
				return withCode(codeUsage, fmt.Errorf("--output-format: want text, json or stream-json, got %q", format))
			}
			if jsonOut {
				defer func() { err = reportJSON(c.stdout, err) }()
			}
			if err := emptyResume(cmd); err != nil {
				return withCode(codeUsage, err)
			}
			prompt, err := c.promptOf(args)
			if err != nil {
				return withCode(codeUsage, err)
			}
			if cwd != "" {
				if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
					return withCode(codeUsage, fmt.Errorf("--cwd %s is not a directory", cwd))
				}
			}
			cfg, err := c.loadConfig(cwd)
			if err != nil {
				return withCode(codeConfig, err)
			}
			if err := rf.apply(&cfg); err != nil {
				return err
			}
			if maxSteps != 0 {
				if err := config.CheckMaxSteps(maxSteps); err != nil {
					return withCode(codeUsage, fmt.Errorf("--max-steps: %w", err))
				}
				cfg.Agent.MaxSteps = maxSteps
			}
			if err := c.reportProject(cfg); err != nil {
				return withCode(codeConfig, err)
			}
			defer c.tracing(cmd.Context(), &cfg)()
			rt, err := cfg.Build(cmd.Context(), c.logger(), nil, c.getenv)
			if err != nil {
				return withCode(codeConfig, err)
			}
			if err := c.checkKey(cfg); err != nil {
				rt.Close(context.Background())
				return err
			}
			if !quiet {
				c.sayRoute(cfg)
			}
			policy := cfg.Policy()
			root := agent.CreateOptions{Cwd: cwd, Options: cfg.Agent, Policy: &policy, TokenBudget: cfg.Budget.Tokens,
				Asker: permission.AskerFunc(refuseAsks)}
			if cont || resume != "" {
				id, err := c.sessionToResume(rt.Sessions, cont, resume, cwd)
				if err != nil {
					rt.Close(context.Background())
					return withCode(codeNoSession, err)
				}
				root.SessionID, root.Resume, root.Cwd = id, true, ""
			}
			if yes {
				root.Asker = permission.AskerFunc(approveAsks)
			}
			return c.runTurns(cmd.Context(), rt, runSpec{root: root, price: cfg.PriceOf, json: jsonOut, resultOnly: resultOnly, quiet: quiet}, slices.Values([]string{prompt}))
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "write one JSON object per line to stdout for every event (see README)")
	cmd.Flags().StringVar(&format, "output-format", "text", "text; stream-json (as --json); or json: only the last line, the result (as Claude Code's)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "write only the answer, errors and the last line")
	cmd.Flags().IntVar(&maxSteps, "max-steps", 0, "model calls a turn may make, 1 to 10000 (default agent.maxSteps, else 100)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve every tool call the permission policy says to ask about")
	rf.add(cmd)
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the agent (default: the current directory)")
	cmd.Flags().BoolVarP(&cont, "continue", "c", false, "continue the latest top-level session of the working directory")
	cmd.Flags().StringVarP(&resume, "resume", "r", "", "continue session `ID` (an id, or an unambiguous prefix of one)")
	cmd.MarkFlagsMutuallyExclusive("continue", "resume")
	cmd.MarkFlagsMutuallyExclusive("json", "output-format")
	return cmd
}

// errEmptyID refuses an empty session id, as an unset shell variable
// gives: it would otherwise name a new session, or every stored one.
var errEmptyID = errors.New(`the session id is empty (an unset variable?): give an id or a prefix of one; dsh sessions list shows them`)

// emptyResume refuses `--resume ""`, which would start a new session.
func emptyResume(cmd *cobra.Command) error {
	if f := cmd.Flags().Lookup("resume"); f != nil && f.Changed && f.Value.String() == "" {
		return fmt.Errorf("--resume: %w", errEmptyID)
	}
	return nil
}

// sessionToResume finds the session --continue or --resume names: the
// latest top-level session of the working directory, or the one session
// whose id is resume or starts with it.
func (c *cli) sessionToResume(st *session.Store, cont bool, resume, cwd string) (string, error) {
	if !cont && resume == "" {
		return "", errEmptyID
	}
	hs, err := st.List() // newest first
	if err != nil {
		return "", err
	}
	if cont {
		if cwd == "" {
			if cwd, err = os.Getwd(); err != nil {
				return "", err
			}
		}
		if abs, err := filepath.Abs(cwd); err == nil {
			cwd = abs
		}
		for _, h := range hs {
			if h.ParentSession == "" && h.Origin != session.OriginSubagent && h.Cwd == cwd {
				return h.ID, nil
			}
		}
		return "", fmt.Errorf("no session to continue in %s: start one with dsh run PROMPT", cwd)
	}
	var matches []session.Header
	for _, h := range hs {
		if h.ID == resume {
			return h.ID, nil
		}
		if strings.HasPrefix(h.ID, resume) {
			matches = append(matches, h)
		}
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no stored session has an id starting with %q (dsh sessions list shows them)", resume)
	case 1:
		return matches[0].ID, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d sessions have an id starting with %q; give more of it:", len(matches), resume)
	for _, h := range matches {
		fmt.Fprintf(&b, "\n  %s  %s  %s", h.ID, time.UnixMilli(h.CreatedAt).Format(time.DateTime), dash(h.Cwd))
	}
	return "", errors.New(b.String())
}

// refuseAsks answers the asks of a non-interactive run: a call that needs
// approval is refused, telling the model why and the user how to allow it.
func refuseAsks(_ context.Context, req permission.Request) (permission.Answer, error) {
	return permission.Reject, fmt.Errorf("%s needs approval, and `dsh run` asks nobody: rerun with --yes, "+
		"or set permissions.tools.%s: allow in dsh.yaml", req.Tool, req.Tool)
}

// approveAsks approves every ask (dsh run --yes).
func approveAsks(context.Context, permission.Request) (permission.Answer, error) {
	return permission.AllowOnce, nil
}

// promptOf is the prompt of `dsh run`: its arguments joined, or stdin for
// a lone "-".
func (c *cli) promptOf(args []string) (string, error) {
	if len(args) != 1 || args[0] != "-" {
		return strings.Join(args, " "), nil
	}
	b, err := io.ReadAll(io.LimitReader(c.stdin, maxPrompt+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("reading the prompt from stdin: %w", err)
	case len(b) > maxPrompt:
		return "", fmt.Errorf("the prompt on stdin is over %d MiB", maxPrompt>>20)
	case strings.TrimSpace(string(b)) == "":
		return "", errors.New("the prompt on stdin is empty")
	}
	return string(b), nil
}

// needPrompt says in one line what `dsh run` without a prompt lacks.
func needPrompt(_ *cobra.Command, args []string) error {
	if len(args) == 0 {
		return withCode(codeUsage, errors.New(`run needs a prompt: dsh run "PROMPT", or dsh run - to read it from stdin`))
	}
	return nil
}

// answerText keeps the text of the latest turn's last model message: the
// answer a --json result line carries.
type answerText struct {
	mu   sync.Mutex
	text string
}

// observe takes a session event of the top-level agent.
func (a *answerText) observe(e session.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch d := e.Data.(type) {
	case session.TurnStart:
		a.text = ""
	case session.AssistantMessage:
		a.text = content.JoinText(d.Message.Content)
	}
}

func (a *answerText) get() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.text
}

// maxPrompt bounds a prompt read from stdin.
const maxPrompt = 8 << 20

// runSpec describes a run: its top-level agent and how it is shown.
type runSpec struct {
	root  agent.CreateOptions
	price func(route string) (config.Price, bool) // nil: no prices
	json  bool                                    // --json: one object per line on stdout
	// resultOnly keeps --json to its last line (--output-format json).
	resultOnly bool
	quiet      bool // --quiet: the answer, errors and the last line
	echo       bool // each prompt is shown before its turn
}

// runTurns runs each prompt as one turn of a new top-level agent, streaming
// its text to stdout and its tool and child activity to stderr. It stops at
// the first turn that does not complete. Whatever happens once the agent
// exists, its last line names the session and what it spent.
func (c *cli) runTurns(ctx context.Context, rt *dsh.Runtime, spec runSpec, prompts iter.Seq[string]) (runErr error) {
	defer rt.Close(context.Background())
	root := spec.root
	if root.Cwd == "" && !root.Resume {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root.Cwd = wd
	}
	ctx, span := c.rootSpan(ctx, rt)
	defer span.End()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	broken := func(error) { cancel(newInterruption("stdout closed", exitPipe)) }
	var out output = newHumanOutput(c.stdout, c.stderr, spec.quiet, broken)
	if spec.json {
		j := newJSONOutput(c.stdout, broken)
		j.resultOnly = spec.resultOnly
		out = j
	}
	defer watch(rt.Events, out)() // before the agent: creating it starts the MCP servers
	a, err := rt.Agents.Create(ctx, root)
	if err != nil {
		return err
	}
	// A signal stops the whole tree with the user's authority: every
	// continuable child's running turn, before the runtime drains them.
	defer func() {
		if in := (*interruption)(nil); errors.As(context.Cause(ctx), &in) {
			rt.Subagents.InterruptTree(a.ID(), in.what)
			rt.Tasks.Stop(a, subagenttool.TaskKind, in.what)
		}
	}()
	from := a.Session().Len() // a resumed session's earlier usage is not this run's
	status := "completed"
	span.SetAttributes(telemetry.ConversationID.String(a.ID()))
	var answer answerText
	defer func() {
		usage := subagent.UsageFromEvents(a.Session().Events()[from:])
		line, cost, priced := spentLine(usage, spec.price)
		if runErr != nil && status == "completed" {
			status = "error"
		}
		out.result(runResult{SessionID: a.ID(), Answer: answer.get(), Status: status, Err: runErr, Usage: usage, Line: line, CostUSD: cost, Priced: priced})
		if spec.json {
			runErr = reported(runErr)
		}
	}()
	if root.Resume {
		if n, err := rt.Subagents.ReportInterrupted(ctx, a); err != nil {
			fmt.Fprintf(c.stderr, "dsh: warning: could not check the children of %s: %v\n", a.ID(), err)
		} else if n == 1 {
			fmt.Fprintln(c.stderr, "[1 child was interrupted when its process ended; the model is told]")
		} else if n > 1 {
			fmt.Fprintf(c.stderr, "[%d children were interrupted when their process ended; the model is told]\n", n)
		}
	}
	defer atExit(ctx, func() { rt.Sessions.FlushLive() })()
	out.session(a.ID(), a.Cwd())
	defer a.Session().Observe(out.event)()
	defer a.Session().Observe(answer.observe)()
	for text := range prompts {
		if spec.echo && !spec.json {
			fmt.Fprintf(c.stderr, "> %s\n", text)
		}
		end, err := a.Run(ctx, content.UserText(text))
		out.finish()
		if err != nil {
			return err
		}
		status = end.Reason.Kind
		if in := (*interruption)(nil); end.Reason.Kind == session.EndAborted && errors.As(context.Cause(ctx), &in) {
			status = "interrupted"
			return in
		}
		if err := endError(end); err != nil {
			return err
		}
	}
	var last atomic.Pointer[session.TurnEnd] // of the turns completion notices open while settling
	stop := a.Session().Observe(func(e session.Event) {
		if end, ok := e.Data.(session.TurnEnd); ok {
			last.Store(&end)
		}
	})
	err = settle(ctx, rt, a)
	stop()
	if err != nil || last.Load() == nil {
		return err
	}
	status = last.Load().Reason.Kind
	return endError(*last.Load())
}

// spentLine renders usage per "route/model" as one line, with the cost
// of the routes that have a price (naming the models that have none), and
// returns that cost.
func spentLine(byModel map[string]content.Usage, price func(string) (config.Price, bool)) (line string, cost float64, priced bool) {
	var total content.Usage
	var unpriced []string
	for _, key := range slices.Sorted(maps.Keys(byModel)) {
		u := byModel[key]
		total = total.Add(u)
		if p, ok := priceOf(price, key); ok {
			cost, priced = cost+p.Cost(u), true
		} else {
			unpriced = append(unpriced, key)
		}
	}
	line = usageLine(total)
	if priced {
		line += fmt.Sprintf(" · $%.4f", cost)
		if len(unpriced) > 0 {
			line += " (unpriced: " + strings.Join(unpriced, ", ") + ")"
		}
	}
	return line, cost, priced
}

// priceOf is price(key), key a "route/model" of usage; false without
// prices.
func priceOf(price func(string) (config.Price, bool), key string) (config.Price, bool) {
	if price == nil {
		return config.Price{}, false
	}
	return price(key)
}

// settle waits while the agent still has background tasks running,
// continuable children working (those it started and those it messaged)
// or turns to take (their notices wake it), so that `dsh run` does not
// exit in the middle of work it started.
func settle(ctx context.Context, rt *dsh.Runtime, a *agent.Agent) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := a.Status() == agent.StatusRunning || rt.Subagents.Working(a.ID())
		for _, t := range rt.Tasks.List(a) {
			busy = busy || !t.Status.Terminal()
		}
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// endError turns a turn end other than completed into a one-line error.
func endError(end session.TurnEnd) error {
	switch end.Reason.Kind {
	case session.EndCompleted:
		return nil
	case session.EndError:
		if f := end.Reason.Error; f != nil {
			return withCode(f.Code, fmt.Errorf("turn failed: %s (%s)", f.Message, f.Code))
		}
	case session.EndAborted:
		return withCode(codeAborted, errors.New("turn aborted"))
	case session.EndMaxTokens:
		return withCode(codeMaxTokens, errors.New("the answer hit the max-tokens limit"))
	case session.EndMaxSteps:
		return withCode(codeMaxSteps, errors.New("the turn stopped at its step cap (max-steps): raise --max-steps or agent.maxSteps"))
	case session.EndBudget:
		return withCode(codeBudget, errors.New("the run stopped: its token budget (budget.tokens) is spent"))
	case session.EndBlocked:
		if c := end.Reason.Cause; c != nil && c.Kind == "hook" {
			return fmt.Errorf("a hook stopped the turn: %s", cmp.Or(c.Reason, "(it gave no reason)"))
		}
	}
	return withCode(codeError, fmt.Errorf("turn ended %s", end.Reason.Kind))
}

func usageLine(u content.Usage) string {
	return "tokens " + u.String()
}
