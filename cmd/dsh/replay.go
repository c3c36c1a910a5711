package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm/replay"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
)

func (c *cli) replayCmd() *cobra.Command {
	var dir, cwd, timing, keep string
	var yes bool
	cmd := &cobra.Command{
		Use:   "replay [SESSION]",
		Short: "Re-run a recorded conversation without a model or a key, and report where it departs from the recording",
		Long: `Re-run a stored top-level session, its children included, with every model
call answered from the recording instead of a model: no key, no network.
The prompts of the recorded turns are sent again, the tools run again, and
each request the agents make must be the recorded one; a request that
differs fails with a diff naming the session, the step and the first
differing part (system prompt, a tool, or a message). At the end the tree of
sessions the re-run wrote is compared with the recorded one, ignoring ids
and times, and the verdict is printed: exit status 0 when they match, 1
when the re-run departed from the recording.

The configuration is the one dsh run would use (--config, $DSH_CONFIG,
$DSH_HOME/dsh.yaml): a change to it, to dsh or to the tools that alters
what is sent to the model shows up as a divergence. Children that are dsh
itself over ACP (command: self) answer from the same recording.

--dir replays a recording folder instead (session files, as
internal golden tests keep them). The re-run's sessions go to a temporary
folder, or to --keep's.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (dir != "") {
				return errors.New("name a stored session, or a recording folder with --dir")
			}
			if _, err := parseTiming(timing); err != nil {
				return err
			}
			cfg, err := c.loadConfig("")
			if err != nil {
				return err
			}
			defer c.tracing(cmd.Context(), &cfg)()
			home := keep
			if home == "" {
				if home, err = os.MkdirTemp("", "dsh-replay-"); err != nil {
					return err
				}
				defer os.RemoveAll(home)
			} else if home, err = filepath.Abs(home); err != nil {
				return err
			}
			if dir == "" {
				if dir, err = c.exportRecording(cfg, args[0], filepath.Join(home, "recording")); err != nil {
					return err
				}
			} else if dir, err = filepath.Abs(dir); err != nil {
				return err
			}
			return c.replay(cmd.Context(), cfg, replaySpec{dir: dir, home: home, cwd: cwd, timing: timing, yes: yes})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "replay the recording in this folder instead of a stored session")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory of the re-run (default: the recorded one if it exists, else the current one)")
	cmd.Flags().StringVar(&timing, "timing", "instant", "how fast recorded answers stream: instant or recorded")
	cmd.Flags().StringVar(&keep, "keep", "", "keep the re-run's sessions in this folder (its sessions/ subfolder)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "approve every tool call the permission policy says to ask about (as dsh run --yes)")
	return cmd
}

func parseTiming(s string) (replay.Timing, error) {
	switch s {
	case "", "instant":
		return replay.Instant, nil
	case "recorded":
		return replay.AsRecorded, nil
	}
	return 0, fmt.Errorf("--timing: want instant or recorded, got %q", s)
}

// exportRecording writes the tree of a stored session to dir, where child
// processes read it too.
func (c *cli) exportRecording(cfg config.Config, id, dir string) (string, error) {
	root, err := cfg.SessionsRoot(c.getenv)
	if err != nil {
		return "", err
	}
	rec, err := replay.FromStore(session.NewStore(jsonl.New(root), nil), id)
	if err != nil {
		return "", err
	}
	if rec.Root().Header.ParentSession != "" {
		return "", fmt.Errorf("session %s is a child of %s: replay the top-level session", id, rec.Root().Header.ParentSession)
	}
	return dir, rec.WriteDir(dir)
}

// replaySpec says what to replay (dir), where the re-run keeps its
// sessions (home/sessions) and how.
type replaySpec struct {
	dir, home, cwd string
	timing         string // instant (also "") or recorded
	yes            bool
	setup          func(*dsh.Runtime) error // tests: what the configuration cannot say
}

// replay re-runs the recording in spec.dir with its sessions under
// spec.home, then compares the trees.
func (c *cli) replay(ctx context.Context, cfg config.Config, spec replaySpec) error {
	t, err := parseTiming(spec.timing)
	if err != nil {
		return err
	}
	env := map[string]string{"DSH_HOME": spec.home, config.ReplayEnv: spec.dir, config.ReplayTimingEnv: spec.timing}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return c.getenv(k)
	}
	rt, model, err := buildReplaying(ctx, cfg, c.logger(), getenv, spec.dir, t)
	if err != nil {
		return err
	}
	defer model.Close()
	if spec.setup != nil {
		if err := spec.setup(rt); err != nil {
			rt.Close(ctx)
			return err
		}
	}
	rec := model.Recording()
	root := rec.Root()
	prompts := recordedPrompts(root.Events)
	if len(prompts) == 0 {
		rt.Close(ctx)
		return fmt.Errorf("%s has no prompt to send", root.Label())
	}
	opts := cfg.Agent
	if len(root.Calls) > 0 {
		r := root.Calls[0].Request
		opts.Provider, opts.Model, opts.MaxTokens = r.Provider, r.Model, r.MaxTokens
	}
	policy := cfg.Policy()
	a := agent.CreateOptions{Cwd: replayCwd(spec.cwd, root.Header.Cwd), Options: opts, Policy: &policy,
		TokenBudget: cfg.Budget.Tokens, Asker: permission.AskerFunc(refuseAsks)}
	if spec.yes {
		a.Asker = permission.AskerFunc(approveAsks)
	}
	runErr := c.runTurns(ctx, rt, runSpec{root: a, price: cfg.PriceOf, echo: len(prompts) > 1}, slices.Values(prompts))
	if in := (*interruption)(nil); errors.As(runErr, &in) {
		return in
	}
	live, err := storedTree(filepath.Join(spec.home, "sessions"))
	if err != nil {
		return errors.Join(runErr, err)
	}
	// A turn that failed as the recorded one did is a match; one that
	// failed for a divergence is reported by the verdict.
	return c.verdict(rec, live, model.Divergences())
}

// buildReplaying builds the runtime of cfg with every model route, and any
// route the recording used, answered from the recording in dir; sessions
// go to $DSH_HOME/sessions whatever the file says.
func buildReplaying(ctx context.Context, cfg config.Config, log *slog.Logger, getenv func(string) string, dir string, t replay.Timing) (*dsh.Runtime, *replay.Model, error) {
	rec, err := replay.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var rt *dsh.Runtime
	model := replay.NewModel(rec, replay.Options{Timing: t, Live: func(id string) (*session.Session, bool) { return rt.Sessions.Get(id) }})
	cfg.ModelOverride, cfg.SessionsDir = model, ""
	if rt, err = cfg.Build(ctx, log, nil, getenv); err != nil {
		return nil, nil, err
	}
	for _, s := range rec.Sessions {
		for _, call := range s.Calls {
			if p := call.Request.Provider; p != "" && !slices.Contains(rt.LLM.Providers(), p) {
				rt.LLM.Register(p, model)
			}
		}
	}
	return rt, model, nil
}

// recordedPrompts returns the texts of the user's messages that opened the
// recorded turns (completion notices and other messages a re-run makes by
// itself are left out).
func recordedPrompts(events []session.Event) []string {
	var out []string
	step := 0
	for _, e := range events {
		switch d := e.Data.(type) {
		case session.Step:
			if e.Type == session.TypeStepStart {
				step = d.Step
			}
		case content.Message:
			if e.Type == session.TypeUserMessage && step == 1 && d.Source.Kind == content.SourceUser {
				out = append(out, content.JoinText(d.Content))
			}
		}
	}
	return out
}

// replayCwd is the re-run's working directory: the flag's, else the
// recorded one when it exists, else the current one.
func replayCwd(flag, recorded string) string {
	if flag != "" {
		if abs, err := filepath.Abs(flag); err == nil {
			return abs
		}
		return flag
	}
	if fi, err := os.Stat(recorded); err == nil && fi.IsDir() && recorded != "" {
		return recorded
	}
	wd, _ := os.Getwd()
	return cmp.Or(wd, "/")
}

// storedTree reads the tree of the top-level session stored under root.
func storedTree(root string) (*replay.Recording, error) {
	st := session.NewStore(jsonl.New(root), nil)
	hs, err := st.List()
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if h.ParentSession == "" {
			return replay.FromStore(st, h.ID)
		}
	}
	return nil, errors.New("the re-run stored no session")
}

// verdict prints whether the re-run matched the recording.
func (c *cli) verdict(rec, live *replay.Recording, divs []*replay.Divergence) error {
	diffs := replay.Compare(rec, live)
	if len(divs) == 0 && len(diffs) == 0 {
		calls := 0
		for _, s := range rec.Sessions {
			calls += len(s.Calls)
		}
		fmt.Fprintf(c.stdout, "replay: the re-run matches the recording (%d sessions, %d model calls)\n", len(rec.Sessions), calls)
		return nil
	}
	fmt.Fprintln(c.stdout, "replay: the re-run departs from the recording")
	seen := map[string]bool{}
	for _, d := range divs {
		seen[d.Error()] = true
		fmt.Fprintf(c.stdout, "- %v\n", d)
	}
	for _, d := range diffs {
		if seen[d.Failure] { // reported above
			d.Failure = ""
		}
		fmt.Fprintf(c.stdout, "- %s\n", d)
	}
	return errReplayDiverged
}

var errReplayDiverged = errors.New("the re-run departs from the recording")
