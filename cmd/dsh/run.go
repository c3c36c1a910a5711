package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

func (c *cli) runCmd() *cobra.Command {
	var model, provider, cwd string
	cmd := &cobra.Command{
		Use:   "run PROMPT",
		Short: "Run an agent on the configured model and print its answer as it streams",
		Long: `Run an agent on the configured model and print its answer as it streams.

The answer goes to stdout; tool calls and child runs go to stderr. Every way
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
			cfg, err := config.Load(c.configPath, c.getenv)
			if err != nil {
				return err
			}
			if provider != "" {
				cfg.Agent.Provider, cfg.Agent.Model = provider, cfg.ModelOf(provider)
			}
			if model != "" {
				cfg.Agent.Model = model
			}
			rt, err := cfg.Build(cmd.Context(), c.logger(), nil, c.getenv)
			if err != nil {
				return err
			}
			if err := c.checkKey(cfg); err != nil {
				return err
			}
			return c.runTurns(cmd.Context(), rt, cfg.Agent, cwd, strings.Join(args, " "))
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "model route (a configured model name)")
	cmd.Flags().StringVarP(&model, "model", "m", "", "model id")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the agent (default: the current directory)")
	return cmd
}

// checkKey fails fast, naming the variable, when the route's key is unset.
func (c *cli) checkKey(cfg config.Config) error {
	for _, m := range cfg.Models {
		if m.Name == cfg.Agent.Provider && strings.TrimSpace(c.getenv(m.APIKeyEnv)) == "" {
			return fmt.Errorf("%s is not set: export it to use model route %q, or try the offline `dsh demo`", m.APIKeyEnv, m.Name)
		}
	}
	return nil
}

// runTurns runs each text as one turn of a new top-level agent, streaming
// its text to stdout and its tool and child activity to stderr. It stops at
// the first turn that does not complete.
func (c *cli) runTurns(ctx context.Context, rt *dsh.Runtime, opts agent.Options, cwd string, texts ...string) error {
	defer rt.Close(context.Background())
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		cwd = wd
	}
	a, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: cwd, Options: opts})
	if err != nil {
		return err
	}
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
	if err := settle(ctx, rt, a); err != nil {
		return err
	}
	var total content.Usage
	for _, u := range subagent.UsageFromEvents(a.Session().Events()) {
		total = total.Add(u)
	}
	fmt.Fprintf(c.stderr, "[session %s · %s, children included]\n", a.ID(), usageLine(total))
	return nil
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
	}
	return fmt.Errorf("turn ended %s", end.Reason.Kind)
}

func usageLine(u content.Usage) string {
	return fmt.Sprintf("tokens in %d (cached %d) out %d", u.Input, u.CacheRead, u.Output)
}

// printer renders a session's events for a terminal.
type printer struct {
	out, info io.Writer
	midLine   bool
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
		if d.Chunk.Type == content.ChunkTextDelta && d.Chunk.Text != "" {
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

// finish ends a partial line of streamed text.
func (p *printer) finish() {
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
