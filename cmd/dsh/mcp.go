package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/mcpserver"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent/subagenttool"
)

func (c *cli) mcpCmd() *cobra.Command {
	var listen, cwd, tokenFile string
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

By default it speaks MCP on stdin/stdout (logs go to $DSH_HOME/logs/dsh.log);
a malformed line gets a JSON-RPC error and the server goes on. With --listen ADDR it
serves streamable HTTP at http://ADDR/mcp on a loopback address only, to
clients that send "Authorization: Bearer <token>": the token is read from
--token-file (default $DSH_HOME/mcp-token), or generated there (mode 0600)
and printed once on stderr. With --listen unix:PATH it serves HTTP on a Unix
socket that only its owner can open (mode 0600), without a token.
Each MCP session gets a top-level agent under the permission policy. An ask
goes to the client's user as an elicitation form when the client can show
forms (on protocol 2026-07-28, through the foreground call that asks);
otherwise it is refused unless --yes approves every ask.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig(cwd)
			if err != nil {
				return err
			}
			if err := c.reportProject(cfg); err != nil {
				return err
			}
			if err := c.checkKey(cfg); err != nil {
				return err
			}
			var ln net.Listener
			var auth func(http.Handler) http.Handler
			if listen != "" {
				if ln, auth, err = c.listener(mcpHTTP(), listen, tokenFile, false); err != nil {
					return err
				}
				defer ln.Close()
			} else if tokenFile != "" {
				return errors.New("--token-file is for --listen on a TCP address")
			}
			cfg = c.oneShotTools(cfg)
			cwd = cfg.ProjectDir
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
			if ln != nil {
				err = c.serveHTTP(cmd.Context(), ln, auth(srv.Handler()))
			} else {
				err = srv.ServeStdio(cmd.Context(), c.stdin, c.stdout)
			}
			return errors.Join(err, srv.Close(context.Background()))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8765), or on the Unix socket unix:PATH, instead of stdio")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "the file of the bearer token HTTP clients must send (default $DSH_HOME/mcp-token; generated when missing)")
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

// serveHTTP serves h at /mcp on ln until ctx ends.
func (c *cli) serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if ln.Addr().Network() == "unix" {
		fmt.Fprintf(c.stderr, "dsh mcp: serving MCP on the Unix socket %s (path /mcp)\n", ln.Addr())
	} else {
		fmt.Fprintf(c.stderr, "dsh mcp: serving MCP at http://%s/mcp\n", ln.Addr())
	}
	stop := context.AfterFunc(ctx, func() { hs.Close() })
	defer stop()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
