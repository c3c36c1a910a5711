package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/a2aserver"
	"github.com/dsh-go/dsh/permission"
)

func (c *cli) a2aCmd() *cobra.Command {
	var listen, cwd, tokenFile, publicURL string
	var yes, anyAddr bool
	var maxTasks int
	cmd := &cobra.Command{
		Use:   "a2a",
		Short: "Serve dsh as an Agent2Agent (A2A 0.3) agent over HTTP JSON-RPC",
		Long: `Serve dsh as an A2A agent: its card at /.well-known/agent-card.json names one
skill per configured subagent tool (subagents.tools in dsh.yaml), and the
JSON-RPC endpoint at /a2a takes message/send, message/stream (SSE),
tasks/get, tasks/cancel and tasks/resubscribe (A2A 0.3, a2a-go's version).
Each task is a turn of a top-level dsh agent under the permission policy,
in a stored session (dsh sessions lists it); the agent delegates through
its subagent tools, and its children's starts, tool calls and ends reach
the client as status updates. A message in the same contextId continues
the session. tasks/cancel stops the task's tree and its processes.

It listens on a loopback address (default 127.0.0.1:8766; another address
needs --any-address) for clients that send "Authorization: Bearer <token>":
the token is read from --token-file (default $DSH_HOME/a2a-token), or
generated there (mode 0600) and printed once on stderr; the card is public
and declares the bearer scheme. With --listen unix:PATH it serves a Unix
socket only its owner can open, without a token. An ask of the permission
policy stops the task at input-required, naming the call; the client's next
message in the task answers it (yes, always, or anything else for no).
--yes approves every ask instead.`,
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
			ln, auth, err := c.listener(a2aHTTP(), listen, tokenFile, anyAddr)
			if err != nil {
				return err
			}
			defer ln.Close()
			cfg = c.oneShotTools(cfg)
			cwd = cfg.ProjectDir
			rt, err := cfg.Build(cmd.Context(), c.logger(), nil, c.getenv)
			if err != nil {
				return err
			}
			defer rt.Close(context.Background())
			var skills []a2a.AgentSkill
			if cfg.Subagents != nil {
				for _, t := range cfg.Subagents.Tools {
					name := cmp.Or(t.ToolName, "subagent")
					skills = append(skills, a2a.AgentSkill{ID: name, Name: name, Tags: []string{"delegation", t.Provider},
						Description: fmt.Sprintf("delegates a self-contained task to a child agent of provider %q", t.Provider)})
				}
			}
			endpoint := cmp.Or(publicURL, "http://"+ln.Addr().String())
			if ln.Addr().Network() == "unix" && publicURL == "" {
				endpoint = "http://localhost"
			}
			opts := a2aserver.Options{Agents: rt.Agents, Subagents: rt.Subagents, Events: rt.Events,
				AgentOptions: cfg.Agent, Policy: cfg.Policy(), TokenBudget: cfg.Budget.Tokens, Cwd: cwd, Skills: skills,
				URL: strings.TrimSuffix(endpoint, "/") + a2aserver.RPCPath, Bearer: ln.Addr().Network() != "unix",
				MaxTasks: maxTasks, Version: version, Log: rt.Log}
			if yes {
				opts.Asker = permission.AskerFunc(approveAsks)
			}
			srv, err := a2aserver.New(opts)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.Handle(a2aserver.CardPath, srv.CardHandler())
			mux.Handle(a2aserver.RPCPath, auth(srv.RPCHandler()))
			hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(c.stderr, "dsh a2a: serving A2A 0.3 (JSON-RPC) at %s, card at %s\n", opts.URL,
				strings.TrimSuffix(endpoint, "/")+a2aserver.CardPath)
			stop := context.AfterFunc(cmd.Context(), func() { hs.Close() })
			defer stop()
			err = hs.Serve(ln)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return errors.Join(err, srv.Close(ctx))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8766", "the address to serve HTTP on (loopback unless --any-address), or the Unix socket unix:PATH")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "the file of the bearer token clients must send (default $DSH_HOME/a2a-token; generated when missing)")
	cmd.Flags().StringVar(&publicURL, "url", "", "the base URL clients reach the server at, for the card (default: http:// and the listen address)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the agents (default: the current directory)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve every tool call the permission policy says to ask about")
	cmd.Flags().BoolVar(&anyAddr, "any-address", false, "allow a non-loopback --listen address (put TLS in front: the token travels in clear)")
	cmd.Flags().IntVar(&maxTasks, "max-tasks", a2aserver.DefaultMaxTasks, "the tasks that may run at once; more are refused")
	return cmd
}
