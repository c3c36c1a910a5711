package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
)

// routeFlags are the model-route flags of dsh run and dsh chat.
type routeFlags struct {
	route, provider, model string
}

// add declares --route, --provider (its old name, deprecated) and -m.
func (f *routeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.route, "route", "", "model route: a built-in one (deepseek, anthropic, openai, openrouter, local) or a models[].name of dsh.yaml")
	cmd.Flags().StringVar(&f.provider, "provider", "", "the old name of --route")
	cmd.Flags().MarkDeprecated("provider", "use --route") //nolint:errcheck // the flag exists
	cmd.Flags().StringVarP(&f.model, "model", "m", "", "model id (default: agent.model, else the route's)")
}

// apply points cfg at the flags' route and model, failing before any
// session exists when the route is unknown.
func (f routeFlags) apply(cfg *config.Config) error {
	route := f.route
	switch {
	case f.provider != "" && route != "" && f.provider != route:
		return fmt.Errorf("--route %s and --provider %s (its old name) disagree: pass --route alone", route, f.provider)
	case route == "":
		route = f.provider
	}
	return cfg.UseRoute(route, f.model)
}

// checkKey fails fast, naming the variable, when the route's key is unset:
// with every built-in route's variable when dsh picked the route because
// none is set.
func (c *cli) checkKey(cfg config.Config) error {
	for _, m := range cfg.Models {
		if m.Name == cfg.Agent.Provider && m.APIKeyEnv != "" && strings.TrimSpace(c.getenv(m.APIKeyEnv)) == "" {
			if cfg.RoutePicked() {
				return withCode(codeMissingKey, errors.New(config.NoKeyHelp()))
			}
			return withCode(codeMissingKey, fmt.Errorf("%s is not set: export it to use model route %q, or try the offline `dsh demo`", m.APIKeyEnv, m.Name))
		}
	}
	return nil
}

// sayRoute says on stderr which route dsh picked from the variables set,
// unless that is DeepSeek's alone (dsh's route before there were others).
func (c *cli) sayRoute(cfg config.Config) {
	keys := config.KeysSet(c.getenv)
	if !cfg.RoutePicked() || len(keys) == 0 || slices.Equal(keys, []string{"DEEPSEEK_API_KEY"}) {
		return
	}
	fmt.Fprintln(c.stderr, "dsh:", cfg.RouteChoice())
}
