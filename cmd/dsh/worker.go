//go:build temporal

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/temporal"
)

func (c *cli) workerCmd() *cobra.Command {
	var provider, hostPort, namespace, taskQueue, workspace, identity string
	var concurrency int
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the children of temporal providers from a task queue, with this host's models, tools and workspace",
		Long: `dsh worker connects to a Temporal cluster and runs the children that temporal
providers (kind: temporal) start, at most --concurrency at once. A child runs
here: with the models, tools, permissions and hooks of this host's dsh.yaml,
in the workspace (--workspace, default the current directory). Its session log
goes back to the parent through the cluster.

The cluster and task queue are those of a temporal provider of dsh.yaml
(--provider; by default the only one), else localhost:7233, namespace
default, task queue dsh-children; the flags override them.

SIGTERM or SIGINT stops the worker: it takes no new child and hands the ones
it runs back to the cluster, which gives them to another worker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var w *temporal.Worker
			loader := config.Loader{Kinds: capDepth(config.BuiltinKinds(), func(p subagent.Provider) subagent.Provider { return w.CapDepth(p) })}
			cfg, err := loader.Load(c.configPath, c.getenv)
			if err != nil {
				return err
			}
			for _, warning := range cfg.Warnings() {
				fmt.Fprintln(c.stderr, "dsh: warning:", warning)
			}
			tc, err := workerBlock(cfg, provider)
			if err != nil {
				return err
			}
			set := func(dst *string, flag, value string) {
				if cmd.Flags().Changed(flag) {
					*dst = value
				}
			}
			set(&tc.HostPort, "host-port", hostPort)
			set(&tc.Namespace, "namespace", namespace)
			set(&tc.TaskQueue, "task-queue", taskQueue)
			tc.Getenv, tc.Log = c.getenv, c.logger()
			if workspace, err = filepath.Abs(workspace); err != nil {
				return err
			}
			if fi, err := os.Stat(workspace); err != nil || !fi.IsDir() {
				return fmt.Errorf("--workspace %s is not a directory", workspace)
			}
			w, err = temporal.NewWorker(temporal.WorkerOptions{Config: tc, Concurrency: concurrency, Identity: identity})
			if err != nil {
				return err
			}
			root, err := cfg.SessionsRoot(c.getenv)
			if err != nil {
				return err
			}
			rt, err := cfg.Build(cmd.Context(), c.logger(), w.Sessions(jsonl.New(root)), c.getenv)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "dsh worker: task queue %s, namespace %s, on %s; workspace %s\n", tc.TaskQueue, tc.Namespace, tc.HostPort, workspace)
			err = w.Run(cmd.Context(), temporal.Host{Agents: rt.Agents, Options: cfg.Agent, Cwd: workspace, Policy: cfg.Policy()})
			ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
			defer cancel()
			return errors.Join(err, rt.Close(ctx))
		},
	}
	f := cmd.Flags()
	f.StringVar(&provider, "provider", "", "the temporal provider of dsh.yaml whose cluster and task queue to serve (default: the only one)")
	f.StringVar(&hostPort, "host-port", "", "the cluster's frontend (default: the provider's, else "+temporal.DefaultHostPort+")")
	f.StringVar(&namespace, "namespace", "", "the namespace (default: the provider's, else "+temporal.DefaultNamespace+")")
	f.StringVar(&taskQueue, "task-queue", "", "the task queue (default: the provider's, else "+temporal.DefaultTaskQueue+")")
	f.StringVar(&workspace, "workspace", ".", "the children's working directory")
	f.IntVar(&concurrency, "concurrency", temporal.DefaultConcurrency, "children run at once")
	f.StringVar(&identity, "identity", "", "the worker's name on the cluster (default pid@host)")
	return cmd
}

// workerBlock returns the temporal block of the named provider, of the
// only temporal provider when name is empty, or an empty block when there
// is none.
func workerBlock(cfg config.Config, name string) (temporal.Config, error) {
	var found []config.Provider
	if cfg.Subagents != nil {
		for _, p := range cfg.Subagents.Providers {
			if kind := cmpOr(p.Kind, p.Name); kind == temporal.Kind && (name == "" || p.Name == name) {
				found = append(found, p)
			}
		}
	}
	switch {
	case len(found) == 1:
		var tc temporal.Config
		if b, ok := found[0].Block().(*temporal.Config); ok && b != nil {
			tc = *b
		}
		tc.Name = found[0].Name
		return tc, nil
	case name != "":
		return temporal.Config{}, fmt.Errorf("--provider %s: no temporal provider of that name in the configuration", name)
	case len(found) > 1:
		return temporal.Config{}, errors.New("the configuration has several temporal providers: name one with --provider")
	}
	return temporal.Config{}, nil
}

// capDepth wraps every kind's providers with wrap.
func capDepth(kinds []config.Kind, wrap func(subagent.Provider) subagent.Provider) []config.Kind {
	for i, k := range kinds {
		build := k.New
		kinds[i].New = func(env config.BuildEnv, name string, block any) (subagent.Provider, error) {
			p, err := build(env, name, block)
			if err != nil {
				return nil, err
			}
			return wrap(p), nil
		}
	}
	return kinds
}
