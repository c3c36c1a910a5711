package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm/replay"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/builtin"
)

func (c *cli) acpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "acp",
		Short: "Serve the Agent Client Protocol on stdin/stdout, for editors such as Zed",
		Long: `Serve dsh as an Agent Client Protocol agent on stdin/stdout: an editor (Zed,
or any ACP client such as acpx) starts "dsh acp" and drives sessions over
JSON-RPC. stdout carries protocol frames only; logs go to
$DSH_HOME/logs/dsh.log (--verbose also sends them to stderr).

bash, write_file and edit_file ask the client before they run (acp.askPermission
in dsh.yaml). The model route's key must be in the environment the editor
starts dsh in: an unset key refuses session/new with a message naming it.
Zed's settings.json:

  "agent_servers": {
    "dsh": {
      "type": "custom",
      "command": "dsh",
      "args": ["acp"],
      "env": {"DEEPSEEK_API_KEY": "sk-..."}
    }
  }`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig("")
			if err != nil {
				return err
			}
			if err := c.reportProject(cfg); err != nil {
				return err
			}
			defer c.tracing(cmd.Context(), &cfg)()
			var rt *dsh.Runtime
			if dir := c.getenv(config.ReplayEnv); dir != "" { // a child of dsh replay
				t, err := parseTiming(c.getenv(config.ReplayTimingEnv))
				if err != nil {
					return err
				}
				var model *replay.Model
				if rt, model, err = buildReplaying(cmd.Context(), cfg, c.logger(), c.getenv, dir, t); err != nil {
					return err
				}
				defer model.Close()
			} else if rt, err = cfg.Build(cmd.Context(), c.logger(), nil, c.getenv); err != nil {
				return err
			}
			cfg.Agent.SubagentDepth = config.DepthFrom(c.getenv)
			toolOpts, err := cfg.BuiltinOptions(c.getenv)
			if err != nil {
				return errors.Join(err, rt.Close(cmd.Context()))
			}
			err = acpserver.Serve(cmd.Context(), acpserver.Options{Agents: rt.Agents, AgentOptions: cfg.Agent,
				Policy: cfg.ACPPolicy(acpserver.DefaultAskPermission()), TokenBudget: cfg.Budget.Tokens,
				Routes:        acpRoutes(cfg, c.getenv),
				ContextWindow: rt.LLM.ContextWindow,
				FileTools:     func(f builtin.Files) []tool.Definition { return builtin.FileTools(toolOpts, f) },
				Commands:      &toolOpts,
				Cost: func(u map[string]content.Usage) (float64, bool) {
					_, cost, priced := spentLine(u, cfg.PriceOf)
					return cost, priced
				},
				Ready: func() error {
					if c.getenv(config.ReplayEnv) != "" {
						return nil // a replayed model needs no key
					}
					if err := c.checkKey(cfg); err != nil {
						return fmt.Errorf("%w (an editor passes it in the env of its agent_servers entry)", err)
					}
					return nil
				},
				PermissionTimeout: cfg.ACP.PermissionTimeout, MaxSessions: cfg.ACP.MaxSessions, Sessions: rt.Sessions, Subagents: rt.Subagents, Version: version, Log: rt.Log,
				StopBackground: func(root *agent.Agent, reason string) { rt.Tasks.Stop(root, subagenttool.TaskKind, reason) },
				MCP: mcptool.Options{Log: rt.Log, Events: rt.Events, Version: version, OutputLimit: cfg.Tools.OutputLimit,
					Sandbox: cfg.Tools.Sandbox, Network: cfg.Tools.Network, CacheDir: config.MCPCacheDir(c.getenv)}}, c.stdin, c.stdout)
			return errors.Join(err, rt.Close(cmd.Context()))
		},
	}
}

// acpRoutes are the models an ACP session can pick: the routes a file
// configures or whose key is set, with their model ids, the agent's own
// first (a built-in route without its key could only fail).
func acpRoutes(cfg config.Config, getenv func(string) string) []acpserver.Route {
	routes := []acpserver.Route{{Provider: cfg.Agent.Provider, Model: cfg.Agent.Model}}
	for _, m := range cfg.Models {
		if m.Builtin() && (m.APIKeyEnv == "" || getenv(m.APIKeyEnv) == "") {
			continue
		}
		if r := (acpserver.Route{Provider: m.Name, Model: m.Model}); r.Model != "" && !slices.Contains(routes, r) {
			routes = append(routes, r)
		}
	}
	return routes
}
