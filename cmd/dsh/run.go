package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
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
	"github.com/dsh-go/dsh/telemetry"
)

func (c *cli) runCmd() *cobra.Command {
	var model, provider, cwd string
	var maxSteps int
	var yes bool
	cmd := &cobra.Command{
		Use:   "run PROMPT",
		Short: "Run an agent on the configured model and print its answer as it streams",
		Long: `Run one turn of a new agent on the configured model. The answer streams to
stdout; reasoning, tool calls and child runs go to stderr.

Tools the permission policy (permissions in dsh.yaml) says to ask about are
refused, with a message the model reads, since dsh run asks nobody: pass
--yes to approve them. A turn stops after --max-steps model calls (default
agent.maxSteps, else 100), and the whole tree after budget.tokens tokens.

Every way
the run can end is recorded in the session: SIGINT (Ctrl-C), SIGTERM and
SIGHUP abort the running turn and log its end; so does stdout closing (as
when ` + "`dsh run … | head`" + ` has read enough). A second signal exits at once,
after a best-effort flush; the next load marks the open turn interrupted.

Exit status:
  0    the turn completed
  1    an error (the turn failed, or dsh could not start it)
  129  SIGHUP (the terminal or ssh connection closed)
  130  SIGINT (Ctrl-C)
  141  stdout closed
  143  SIGTERM`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig()
			if err != nil {
				return err
			}
			if provider != "" {
				cfg.Agent.Provider, cfg.Agent.Model = provider, cfg.ModelOf(provider)
			}
			if model != "" {
				cfg.Agent.Model = model
			}
			if maxSteps != 0 {
				cfg.Agent.MaxSteps = maxSteps
			}
			defer c.tracing(cmd.Context(), &cfg)()
			rt, err := cfg.Build(cmd.Context(), c.logger(), nil, c.getenv)
			if err != nil {
				return err
			}
			if err := c.checkKey(cfg); err != nil {
				return err
			}
			policy := cfg.Policy()
			root := agent.CreateOptions{Cwd: cwd, Options: cfg.Agent, Policy: &policy, TokenBudget: cfg.Budget.Tokens,
				Asker: permission.AskerFunc(refuseAsks)}
			if yes {
				root.Asker = permission.AskerFunc(approveAsks)
			}
			return c.runTurns(cmd.Context(), rt, runSpec{root: root, price: cfg.PriceOf}, strings.Join(args, " "))
		},
	}
	cmd.Flags().IntVar(&maxSteps, "max-steps", 0, "model calls a turn may make (default agent.maxSteps, else 100; -1: no cap)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve every tool call the permission policy says to ask about")
	cmd.Flags().StringVar(&provider, "provider", "", "model route (a configured model name)")
	cmd.Flags().StringVarP(&model, "model", "m", "", "model id")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the agent (default: the current directory)")
	return cmd
}

// checkKey fails fast, naming the variable, when the route's key is unset.
func (c *cli) checkKey(cfg config.Config) error {
	for _, m := range cfg.Models {
		if m.Name == cfg.Agent.Provider && m.APIKeyEnv != "" && strings.TrimSpace(c.getenv(m.APIKeyEnv)) == "" {
			return fmt.Errorf("%s is not set: export it to use model route %q, or try the offline `dsh demo`", m.APIKeyEnv, m.Name)
		}
	}
	return nil
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

// runSpec describes a run's top-level agent.
type runSpec struct {
	root  agent.CreateOptions
	price func(route string) (config.Price, bool) // nil: no prices
}

// runTurns runs each text as one turn of a new top-level agent, streaming
// its text to stdout and its tool and child activity to stderr. It stops at
// the first turn that does not complete. Whatever happens once the agent
// exists, its last line names the session and what it spent.
func (c *cli) runTurns(ctx context.Context, rt *dsh.Runtime, spec runSpec, texts ...string) error {
	defer rt.Close(context.Background())
	root := spec.root
	if root.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root.Cwd = wd
	}
	ctx, span := c.rootSpan(ctx, rt)
	defer span.End()
	a, err := rt.Agents.Create(ctx, root)
	if err != nil {
		return err
	}
	span.SetAttributes(telemetry.ConversationID.String(a.ID()))
	defer func() {
		fmt.Fprintf(c.stderr, "[session %s · %s, children included]\n", a.ID(),
			spentLine(subagent.UsageFromEvents(a.Session().Events()), spec.price))
	}()
	defer atExit(ctx, func() { rt.Sessions.FlushLive() })()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	p := &printer{out: c.stdout, info: c.stderr, broken: func(error) { cancel(newInterruption("stdout closed", exitPipe)) }}
	defer a.Session().Observe(p.event)()
	defer watchChildren(rt.Events, c.stderr)()
	for _, text := range texts {
		if len(texts) > 1 {
			fmt.Fprintf(c.stderr, "> %s\n", text)
		}
		end, err := a.Run(ctx, content.UserText(text))
		p.finish()
		if err != nil {
			return err
		}
		if in := (*interruption)(nil); end.Reason.Kind == session.EndAborted && errors.As(context.Cause(ctx), &in) {
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
	return endError(*last.Load())
}

// spentLine renders usage per "route/model" as one line, with the cost
// of the routes that have a price (naming the models that have none).
func spentLine(byModel map[string]content.Usage, price func(string) (config.Price, bool)) string {
	var total content.Usage
	cost, priced := 0.0, false
	var unpriced []string
	for _, key := range slices.Sorted(maps.Keys(byModel)) {
		u := byModel[key]
		total = total.Add(u)
		route, _, _ := strings.Cut(key, "/")
		if p, ok := priceOf(price, route); ok {
			cost, priced = cost+p.Cost(u), true
		} else {
			unpriced = append(unpriced, key)
		}
	}
	line := usageLine(total)
	if priced {
		line += fmt.Sprintf(" · $%.4f", cost)
		if len(unpriced) > 0 {
			line += " (unpriced: " + strings.Join(unpriced, ", ") + ")"
		}
	}
	return line
}

func priceOf(price func(string) (config.Price, bool), route string) (config.Price, bool) {
	if price == nil {
		return config.Price{}, false
	}
	return price(route)
}

// settle waits while the agent still has background tasks running or turns
// to take (their completion notices wake it), so that `dsh run` does not
// exit in the middle of work it started.
func settle(ctx context.Context, rt *dsh.Runtime, a *agent.Agent) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := a.Status() == agent.StatusRunning
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
			return fmt.Errorf("turn failed: %s (%s)", f.Message, f.Code)
		}
	case session.EndAborted:
		return errors.New("turn aborted")
	case session.EndMaxTokens:
		return errors.New("the answer hit the max-tokens limit")
	case session.EndMaxSteps:
		return errors.New("the turn stopped at its step cap (max-steps): raise --max-steps or agent.maxSteps")
	case session.EndBudget:
		return errors.New("the run stopped: its token budget (budget.tokens) is spent")
	}
	return fmt.Errorf("turn ended %s", end.Reason.Kind)
}

func usageLine(u content.Usage) string {
	return "tokens " + u.String()
}

// printer renders a session's events for a terminal: text to out, the
// model's reasoning and tool activity to info.
type printer struct {
	out, info io.Writer
	midLine   bool        // out has a partial line
	thinking  bool        // info has a partial line of reasoning
	broken    func(error) // called at the first failed write to out
	failed    bool
}

// print writes s to out; after a failed write it writes nothing more.
func (p *printer) print(s string) {
	if p.failed {
		return
	}
	if _, err := io.WriteString(p.out, s); err != nil {
		p.failed = true
		if p.broken != nil {
			p.broken(err)
		}
	}
}

func (p *printer) event(e session.Event) {
	switch d := e.Data.(type) {
	case session.AssistantChunk:
		switch {
		case d.Chunk.Type == content.ChunkReasoningDelta && d.Chunk.Text != "":
			if !p.thinking {
				fmt.Fprint(p.info, "thinking: ")
				p.thinking = true
			}
			fmt.Fprint(p.info, d.Chunk.Text)
		case d.Chunk.Type == content.ChunkTextDelta && d.Chunk.Text != "":
			p.endThinking()
			p.print(d.Chunk.Text)
			p.midLine = !strings.HasSuffix(d.Chunk.Text, "\n")
		}
	case session.ToolCall:
		p.finish()
		fmt.Fprintf(p.info, "→ %s %s\n", d.Name, clip(d.Arguments, 200))
	case session.ToolResult:
		status := "ok"
		if d.Error != nil {
			status = "error " + d.Error.Code
		}
		var text string
		if len(d.Message.Content) == 1 {
			text = content.JoinText(d.Message.Content[0].Content)
		}
		fmt.Fprintf(p.info, "← %s (%d bytes)\n", status, len(text))
	case session.AssistantMessage:
		p.finish()
	}
}

// endThinking ends a partial line of streamed reasoning.
func (p *printer) endThinking() {
	if p.thinking {
		fmt.Fprintln(p.info)
		p.thinking = false
	}
}

// finish ends a partial line of streamed reasoning or text.
func (p *printer) finish() {
	p.endThinking()
	if p.midLine {
		p.print("\n")
		p.midLine = false
	}
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
