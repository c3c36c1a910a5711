package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/mcpserver"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent/subagenttool"
)

func (c *cli) mcpCmd() *cobra.Command {
	var listen, cwd string
	var yes bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve dsh's subagent tools over the Model Context Protocol (stdio, or streamable HTTP with --listen)",
		Long: `Serve dsh as an MCP server: one tool per configured subagent tool instance
(subagents.tools in dsh.yaml), which delegates a task to its provider, plus
task_list, task_output and task_kill for children run in the background.
A foreground call reports the child's turns and tool calls as MCP progress
notifications and is cancelled by MCP's cancellation; its result carries
the child's output, stop reason and token usage (structured content).

By default it speaks MCP on stdin/stdout (logs go to stderr). With --listen
it serves streamable HTTP at http://ADDR/mcp on a loopback address only.
Each MCP session gets a top-level agent under the permission policy. An ask
goes to the client's user as an elicitation form when the client can show
forms (on protocol 2026-07-28, through the foreground call that asks);
otherwise it is refused unless --yes approves every ask.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig()
			if err != nil {
				return err
			}
			if err := c.reportProject(cfg); err != nil {
				return err
			}
			if err := c.checkKey(cfg); err != nil {
				return err
			}
			cfg = c.oneShotTools(cfg)
			if cwd == "" {
				if cwd, err = os.Getwd(); err != nil {
					return err
				}
			}
			rt, err := cfg.Build(cmd.Context(), c.logger(), nil, c.getenv)
			if err != nil {
				return err
			}
			defer rt.Close(context.Background())
			var instances []subagenttool.Config
			if cfg.Subagents != nil {
				instances = cfg.Subagents.Tools
			}
			opts := mcpserver.Options{Agents: rt.Agents, Subagents: rt.Subagents, Tools: rt.Tools, Events: rt.Events,
				Instances: instances, AgentOptions: cfg.Agent, Policy: cfg.Policy(), TokenBudget: cfg.Budget.Tokens,
				Cwd: cwd, Version: version, Log: rt.Log}
			if yes {
				opts.Asker = permission.AskerFunc(approveAsks)
			}
			srv, err := mcpserver.New(opts)
			if err != nil {
				return err
			}
			if listen != "" {
				err = c.serveHTTP(cmd.Context(), srv, listen)
			} else {
				err = srv.Run(cmd.Context(), &mcp.IOTransport{Reader: io.NopCloser(c.stdin), Writer: nopCloser{c.stdout}})
			}
			return errors.Join(err, srv.Close(context.Background()))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8765) instead of stdio")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the agents (default: the current directory)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve every tool call the permission policy says to ask about")
	return cmd
}

// oneShotTools makes every subagent tool instance start one-shot
// children: MCP serves the task tools but not send_message, so a child run
// in the background must be a task the client collects with task_output.
// It says so on stderr for an instance configured `continuable: true`.
func (c *cli) oneShotTools(cfg config.Config) config.Config {
	if cfg.Subagents == nil {
		return cfg
	}
	sub := *cfg.Subagents
	sub.Tools = slices.Clone(sub.Tools)
	off := false
	for i, t := range sub.Tools {
		if t.Continuable != nil && *t.Continuable {
			fmt.Fprintf(c.stderr, "dsh mcp: subagent tool %s starts one-shot children here (MCP clients cannot continue a child)\n",
				cmp.Or(t.ToolName, "subagent"))
		}
		sub.Tools[i].Continuable = &off
	}
	cfg.Subagents = &sub
	return cfg
}

// serveHTTP serves srv at http://addr/mcp until ctx ends. Only loopback
// addresses are accepted: a delegated child can run commands.
func (c *cli) serveHTTP(ctx context.Context, srv *mcpserver.Server, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %s: dsh mcp serves loopback addresses only (127.0.0.1, ::1, localhost): its children can run commands", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	hs := &http.Server{Handler: mux}
	fmt.Fprintf(c.stderr, "dsh mcp: serving MCP at http://%s/mcp\n", ln.Addr())
	stop := context.AfterFunc(ctx, func() { hs.Close() })
	defer stop()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// nopCloser is a writer whose Close does nothing (stdout stays open).
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
