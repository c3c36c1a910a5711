package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/trust"
	"github.com/dsh-go/dsh/worktree"
)

// check is the outcome of one doctor check.
type check struct {
	ok      bool
	skipped bool // not checked, and not a failure
	warn    bool // a problem that does not stop dsh
	what    string
	detail  string
}

func (c *cli) doctorCmd() *cobra.Command {
	var rf routeFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the configured model routes, subagent providers and $DSH_HOME",
		Long: `Check what dsh needs, one line per check: the model route dsh run would use
(with the same --route and -m) and every other route dsh.yaml configures or
whose key is set: its key variable is set, its endpoint answers and serves
the model (the list the endpoint serves is printed when it does not); each configured subagent
provider's program is on PATH; each MCP server (mcpServers in dsh.yaml,
and the project's .mcp.json in a trusted folder) starts and lists its
tools, and an untrusted folder's servers are listed as skipped; each problem
of the agent definitions (a bad file, a tool or model dsh lacks) is a WARN
line, which does not fail the check; $DSH_HOME is
writable; no git worktree that a child was given (isolation: worktree) was
left behind by a dsh that was killed (each one found is listed with how to
clean it up). Exits 1 when a check fails.

Every FAIL line says what to do about it.

Environment: the built-in routes' key and base-URL variables (see dsh run
--help), DSH_HOME, DSH_CONFIG, and the key variable of every configured
route.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.loadConfig("")
			if err != nil {
				return err
			}
			if err := rf.apply(&cfg); err != nil {
				return err
			}
			if err := c.reportProject(cfg); err != nil {
				return err
			}
			checks := []check{configFiles(cfg)}
			checks = append(checks, c.checkRoutes(cmd.Context(), cfg)...)
			checks = append(checks, c.checkProviders(cfg)...)
			checks = append(checks, c.checkMCP(cmd.Context(), cfg)...)
			checks = append(checks, c.checkUntrustedMCP(cfg)...)
			checks = append(checks, c.checkAgents(cfg)...)
			checks = append(checks, c.checkHome())
			checks = append(checks, checkWorktrees(cmd.Context())...)
			failed := 0
			for _, ch := range checks {
				mark := "ok  "
				if ch.skipped {
					mark = "skip"
				} else if ch.warn {
					mark = "WARN"
				} else if !ch.ok {
					mark = "FAIL"
					failed++
				}
				fmt.Fprintf(c.stdout, "%s %s: %s\n", mark, ch.what, ch.detail)
			}
			if failed > 0 {
				return fmt.Errorf("doctor: %d of %d checks failed", failed, len(checks))
			}
			return nil
		},
	}
	rf.add(cmd)
	return cmd
}

// configFiles names the configuration files read, as dsh config does.
func configFiles(cfg config.Config) check {
	var files []string
	for _, f := range cfg.Files() {
		files = append(files, f.Layer+" "+f.Path)
	}
	if len(files) == 0 {
		return check{ok: true, what: "configuration", detail: "the built-in defaults (no dsh.yaml; dsh config prints them)"}
	}
	return check{ok: true, what: "configuration", detail: strings.Join(files, ", then ") + " (dsh config prints the result)"}
}

// checkRoutes checks the route and model dsh run would use (with the
// same flags), and every other route a file configures or whose key is
// set; the built-in routes with no key are one skip line.
func (c *cli) checkRoutes(ctx context.Context, cfg config.Config) []check {
	var out []check
	var idle []string
	for _, m := range cfg.Models {
		used := m.Name == cfg.Agent.Provider
		if !used && m.Builtin() && !config.RouteKeySet(m.Name, c.getenv) {
			idle = append(idle, m.Name)
			continue
		}
		out = append(out, c.checkRoute(ctx, cfg, m, used))
	}
	if len(idle) > 0 {
		out = append(out, check{skipped: true, what: "built-in model routes " + strings.Join(idle, ", "),
			detail: "not checked: their variables are not set (dsh doctor --route NAME checks one)"})
	}
	return out
}

// checkRoute checks a model route's key and endpoint, and that the endpoint
// serves the model: for the route dsh run uses, the model it would ask for.
func (c *cli) checkRoute(ctx context.Context, cfg config.Config, m config.Model, used bool) check {
	what, model := "model route "+m.Name, m.Model
	if used {
		what, model = fmt.Sprintf("model route %s (dsh run uses it, model %s)", m.Name, cfg.Agent.Model), cfg.Agent.Model
	}
	keyNote := m.APIKeyEnv + " set"
	if m.APIKeyEnv == "" {
		keyNote = "no key needed"
	} else if strings.TrimSpace(c.getenv(m.APIKeyEnv)) == "" {
		if used && cfg.RoutePicked() {
			return check{what: what, detail: "no model key is set: export one of " + strings.Join(config.PickVariables(), ", ") +
				" (dsh uses the first that is set), or name a route with agent.route in dsh.yaml or --route"}
		}
		return check{what: what, detail: fmt.Sprintf("%s is not set: export it to use this route", m.APIKeyEnv)}
	}
	adapter, err := m.Adapter(c.getenv, nil)
	if err != nil {
		return check{what: what, detail: err.Error() + " (fix models[].baseURL in dsh.yaml)"}
	}
	ids, err := adapter.ListModels(ctx)
	if err != nil {
		return check{what: what, detail: listFailure(err, m)}
	}
	if model != "" && !slices.Contains(ids, model) {
		return check{what: what, detail: fmt.Sprintf("%s does not list model %q; it serves: %s (set agent.model or models[].model in dsh.yaml, or pass -m MODEL to dsh run and dsh doctor)",
			m.BaseURL, model, strings.Join(ids, ", "))}
	}
	detail := fmt.Sprintf("%s; %s serves %s", keyNote, m.BaseURL, cmp.Or(model, strings.Join(ids, ", ")))
	if choice := cfg.RouteChoice(); used && choice != "" {
		detail += "; " + choice
	}
	return check{ok: true, what: what, detail: detail}
}

// listFailure is the detail of a route whose model list could not be
// read: the adapter's message, which says what to do for a key, a model,
// a balance or a server that is down, and otherwise where the endpoint is
// set.
func listFailure(err error, m config.Model) string {
	le := (*llm.Error)(nil)
	if !errors.As(err, &le) {
		return err.Error()
	}
	switch le.Code {
	case llm.CodeAuth, llm.CodeUnreachable, llm.CodeQuota, llm.CodeUnknownModel, llm.CodeMissingKey, llm.CodeInvalidKey:
		return le.Msg
	}
	where := "models[].baseURL in dsh.yaml"
	if v := config.BaseURLEnv(m.Name); v != "" {
		where = v + " or " + where
	}
	return fmt.Sprintf("%s (is %s this route's endpoint? set %s)", le.Msg, m.BaseURL, where)
}

// checkProviders checks that each out-of-process provider's program is on
// PATH.
func (c *cli) checkProviders(cfg config.Config) []check {
	if cfg.Subagents == nil {
		return nil
	}
	var out []check
	for _, p := range cfg.Subagents.Providers {
		program, install := cfg.ProgramOf(p)
		if program == "" {
			continue
		}
		what := fmt.Sprintf("subagent provider %s (%s)", p.Name, cmp.Or(p.Kind, p.Name))
		if program == config.SelfCommand {
			out = append(out, check{ok: true, what: what, detail: "runs this dsh"})
			continue
		}
		path, err := exec.LookPath(program)
		if err != nil {
			detail := fmt.Sprintf("%s is not on PATH", program)
			if install != "" {
				detail += "; install it with: " + install
			} else {
				detail += "; install it, or point the provider's command at it in subagents.providers of dsh.yaml"
			}
			out = append(out, check{what: what, detail: detail})
			continue
		}
		out = append(out, check{ok: true, what: what, detail: path})
	}
	return out
}

// checkMCP starts each configured MCP server and lists its tools.
func (c *cli) checkMCP(ctx context.Context, cfg config.Config) []check {
	log := slog.New(slog.DiscardHandler)
	if c.verbose {
		log = c.logger()
	}
	set, err := cfg.MCPSet(mcptool.Options{Log: log, Getenv: c.getenv, Version: version})
	if err != nil {
		return []check{{what: "MCP servers", detail: err.Error() + " (fix mcpServers in dsh.yaml)"}}
	}
	if set == nil {
		return nil
	}
	defer set.Close(context.Background())
	set.Ready(ctx)
	var out []check
	for _, st := range set.Status() {
		what := fmt.Sprintf("MCP server %s (%s)", st.Name, st.Transport)
		if src := cfg.MCPSource(st.Name); src != "" {
			what += " from " + src
		}
		if st.Err != nil {
			detail := st.Err.Error()
			if e := (*mcptool.Error)(nil); errors.As(st.Err, &e) {
				detail = e.Msg // the line names the server already
			}
			if src := cfg.MCPSource(st.Name); src != "" {
				detail += fmt.Sprintf(" (fix or remove the server %s in %s)", st.Name, src)
			} else {
				detail += fmt.Sprintf(" (fix or remove mcpServers.%s in dsh.yaml)", st.Name)
			}
			out = append(out, check{what: what, detail: detail})
			continue
		}
		out = append(out, check{ok: true, what: what, detail: fmt.Sprintf("%d tools: %s", len(st.Tools), strings.Join(st.Tools, ", "))})
	}
	return out
}

// checkUntrustedMCP lists the MCP servers of the working directory's
// .mcp.json when the folder is not trusted: they are not started.
func (c *cli) checkUntrustedMCP(cfg config.Config) []check {
	wd, err := os.Getwd()
	if err != nil {
		return nil
	}
	p, err := cfg.Project(wd, c.getenv)
	if err != nil || (p.State != trust.Untrusted && p.State != trust.Changed) {
		return nil
	}
	var out []check
	for _, s := range p.Servers {
		out = append(out, check{skipped: true, what: fmt.Sprintf("MCP server %s (%s) from %s", s.Name, s.Describe, filepath.Join(p.Dir, trust.MCPFile)),
			detail: fmt.Sprintf("not started: this folder is %s (run \"dsh trust\" to use it)", p.State)})
	}
	return out
}

// checkAgents reports what is wrong in the agent definitions, one WARN
// line each (a bad file is left out, never fatal), or one ok line.
func (c *cli) checkAgents(cfg config.Config) []check {
	const what = "agent definitions"
	warnings, err := cfg.AgentWarnings(c.getenv)
	if err != nil {
		return []check{{what: what, detail: err.Error()}}
	}
	if len(warnings) == 0 {
		return []check{{ok: true, what: what, detail: "no problems"}}
	}
	var out []check
	for _, w := range warnings {
		out = append(out, check{warn: true, what: what, detail: strings.TrimPrefix(strings.TrimPrefix(w, "agent definitions: "), "agent definition ")})
	}
	return out
}

// checkHome checks that $DSH_HOME can hold sessions.
func (c *cli) checkHome() check {
	home, err := config.Home(c.getenv)
	if err != nil {
		return check{what: "DSH_HOME", detail: err.Error() + " (set DSH_HOME)"}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return check{what: "DSH_HOME", detail: err.Error() + " (set DSH_HOME to a folder dsh may create and write)"}
	}
	f, err := os.CreateTemp(home, ".doctor-*")
	if err != nil {
		return check{what: "DSH_HOME", detail: fmt.Sprintf("%s is not writable: %v (set DSH_HOME to a folder dsh may write)", home, err)}
	}
	f.Close()
	os.Remove(f.Name())
	return check{ok: true, what: "DSH_HOME", detail: filepath.Clean(home) + " is writable"}
}

// checkWorktrees reports the children's git worktrees of the repository
// holding the current directory: one left by a dsh that is gone fails.
func checkWorktrees(ctx context.Context) []check {
	wd, err := os.Getwd()
	if err != nil {
		return nil
	}
	infos, err := worktree.List(ctx, wd)
	if err != nil {
		return nil // not in a git repository: nothing to check
	}
	var out []check
	for _, in := range infos {
		what := "worktree " + in.Path
		switch {
		case in.Missing:
			out = append(out, check{what: what, detail: fmt.Sprintf("its folder is gone: git worktree prune && git branch -D %s", in.Branch)})
		case in.Stale:
			out = append(out, check{what: what, detail: fmt.Sprintf("left behind by dsh pid %d, which is gone; %s", in.Owner, in.Remedy())})
		case in.Owner != 0:
			out = append(out, check{ok: true, what: what, detail: fmt.Sprintf("in use by dsh pid %d", in.Owner)})
		default:
			out = append(out, check{ok: true, what: what, detail: "kept for review: " + in.Remedy()})
		}
	}
	return out
}
