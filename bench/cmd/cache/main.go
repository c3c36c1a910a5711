// Command cache measures what dsh's model requests would cost behind a
// provider's prompt-prefix cache (issue 18). It builds dsh from the working
// tree and drives real `dsh run` and `dsh acp` processes through scripted
// scenarios against a loopback chat-completions server (scriptllm) that
// keeps every request body, simulates the cache (promptcache) and finds,
// for every child, the parent request that delegated it.
//
// It runs every scenario in each configuration asked for: by default first
// the shipped default one (no dsh.yaml: JSONL sessions, continuable spawn
// and fork, the control tools mounted), then the one-shot one (a dsh.yaml
// that sets continuable: false on both tools, so no control tools either).
//
// Per configuration, per scenario and in total it prints: for each child, the share of its
// first request's bytes that are a byte prefix of the parent's delegating
// request; the share of all input tokens that are cache hits; the input
// cost in full-price token equivalents (hit = 0.1, miss = 1) next to the
// cost with no cache at all; and how many follow-up requests extend an
// earlier request byte for byte (append-only).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dsh-go/dsh/bench/internal/dshbin"
	"github.com/dsh-go/dsh/bench/internal/promptcache"
	"github.com/dsh-go/dsh/bench/internal/scriptllm"
)

func main() {
	var names []string
	for _, sc := range scenarios() {
		names = append(names, sc.name)
	}
	list := flag.String("scenarios", strings.Join(names, ","), "scenarios, comma separated: "+strings.Join(names, ", ")+", "+refName+" (the reference harness)")
	asJSON := flag.Bool("json", false, "one JSON line per scenario (and one for the total)")
	keep := flag.String("keep", "", "keep every request body as DIR/<scenario>/<seq>.json")
	refSrc := flag.String("ref-src", "/work/shared/bench-ref", "("+refName+") the reference harness to copy")
	refDir := flag.String("ref-dir", "", "("+refName+") its writable copy (default <root>/.cache/bench-ref, git-ignored)")
	timeout := flag.Duration("timeout", 60*time.Second, "time limit of one scenario")
	src := flag.String("src", "", "build dsh from this checkout (default: the working tree of this bench module), e.g. a git worktree of an older commit")
	configs := flag.String("config", defaultConfig+","+oneshotConfig, "configurations, comma separated: "+
		defaultConfig+" (the shipped defaults), "+oneshotConfig+" (continuable: false on subagent and subagent_fork)")
	cache := flag.String("cache", "answered", "what a request can hit: answered (requests answered before it arrived; children started together are simultaneous) or arrived (every request that arrived before it)")
	flag.Parse()
	if *cache != "answered" && *cache != "arrived" {
		fmt.Fprintln(os.Stderr, "cache: -cache is answered or arrived")
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.DiscardHandler)) // the ACP SDK logs through slog.Default
	o := options{json: *asJSON, keep: *keep, refSrc: *refSrc, refDir: *refDir, timeout: *timeout, onArrival: *cache == "arrived", src: *src, out: os.Stdout,
		configs: strings.Split(*configs, ",")}
	if err := o.run(strings.Split(*list, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "cache:", err)
		os.Exit(1)
	}
}

type options struct {
	json           bool
	keep           string
	refSrc, refDir string
	timeout        time.Duration
	onArrival      bool     // scriptllm.Server.CacheOnArrival
	src            string   // the checkout dsh is built from
	configs        []string // the configurations to run, in order (default: defaultConfig)
	out            io.Writer
}

// The configurations dsh runs in.
const (
	defaultConfig = "default" // no dsh.yaml: what a user gets
	oneshotConfig = "oneshot" // spawn and fork children are one-shot
)

// configuration describes a configuration and gives its dsh.yaml ("" for
// none); ok is false for an unknown name. Their names have one length, so
// that the working directory, part of dsh's system prompt, is as long in
// each.
func configuration(name string) (what, yaml string, ok bool) {
	switch name {
	case defaultConfig:
		return "the shipped defaults: no dsh.yaml, so JSONL sessions, continuable spawn and fork, control tools (with report) mounted", "", true
	case oneshotConfig:
		return "one-shot children: a dsh.yaml sets continuable: false on subagent and subagent_fork, so no control tools",
			"subagents:\n  providers:\n    - name: spawn\n    - name: fork\n  tools:\n    - provider: spawn\n      continuable: false\n" +
				"    - provider: fork\n      toolName: subagent_fork\n      continuable: false\n", true
	}
	return "", "", false
}

// result is one scenario's figures.
type result struct {
	Config   string `json:"config,omitempty"`
	Scenario string `json:"scenario"`
	promptcache.Report
	Warnings []string `json:"warnings,omitempty"`
}

func (o *options) run(list []string) error {
	all := map[string]*scenario{}
	for _, sc := range scenarios() {
		all[sc.name] = sc
	}
	for _, n := range list {
		if all[n] == nil && n != refName {
			return fmt.Errorf("unknown scenario %q", n)
		}
	}
	configs := o.configs
	if len(configs) == 0 {
		configs = []string{defaultConfig}
	}
	for _, c := range configs {
		if _, _, ok := configuration(c); !ok {
			return fmt.Errorf("unknown configuration %q (%s or %s)", c, defaultConfig, oneshotConfig)
		}
	}
	tmp, err := tempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := o.build(tmp)
	if err != nil {
		return err
	}
	failed := 0
	for i, c := range configs {
		if i > 0 && !o.json {
			fmt.Fprintln(o.out)
		}
		names := list
		if i > 0 { // the reference harness has no configuration of dsh's: once is enough
			names = slices.DeleteFunc(slices.Clone(list), func(n string) bool { return n == refName })
		}
		failed += o.runConfig(tmp, bin, c, names, all)
	}
	if failed > 0 {
		return fmt.Errorf("%d scenario(s) failed", failed)
	}
	return nil
}

// runConfig runs the scenarios in one configuration, prints their figures
// and their total, and returns how many failed.
func (o *options) runConfig(tmp, bin, config string, list []string, all map[string]*scenario) (failed int) {
	what, _, _ := configuration(config)
	if !o.json {
		before := "answered before it arrived"
		if o.onArrival {
			before = "that arrived before it"
		}
		fmt.Fprintf(o.out, "prompt cache, dsh %s, configuration %s (%s): tokens = bytes/4 in chat-template order (system, tools, messages); "+
			"a hit is the longest prefix shared with a request %s, floored to %d tokens; cost in full-price tokens, hit = %.1f\n\n",
			revision(o.src), config, what, before, promptcache.BlockTokens, promptcache.HitPrice)
		fmt.Fprintf(o.out, "%-11s %4s %10s %7s %10s %10s %6s %7s\n", "scenario", "req", "input tok", "hit", "cost", "no cache", "ratio", "append")
	}
	var total promptcache.Report
	for _, n := range list {
		var res result
		var err error
		if n == refName {
			res, err = o.reference(tmp)
		} else {
			res, err = o.scenario(tmp, bin, config, all[n])
		}
		if err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "cache: %s %s: %v\n", config, n, err)
			continue
		}
		if n != refName {
			total = total.Add(res.Report)
		}
		o.print(res)
	}
	o.print(result{Config: config, Scenario: "total", Report: total}) // of dsh's scenarios
	return failed
}

// scenario runs one scenario in a configuration, in a fresh DSH_HOME and
// working directory.
func (o *options) scenario(tmp, bin, config string, sc *scenario) (result, error) {
	res := result{Config: config, Scenario: sc.name}
	dir := filepath.Join(tmp, config, sc.name)
	srv := o.server(sc)
	defer srv.Close()
	_, yaml, _ := configuration(config)
	cwd, env, err := workspace(dir, sc, srv.URL, yaml)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if sc.acp {
		err = runACP(ctx, bin, cwd, env, sc.prompts)
	} else {
		err = runDsh(ctx, bin, cwd, env, sc.prompts[0])
	}
	srv.Close() // waits for every handler, so that the log is complete
	xs := srv.Exchanges()
	kept := sc.name
	if config != defaultConfig {
		kept = filepath.Join(config, sc.name)
	}
	if kerr := o.keepBodies(kept, xs); kerr != nil && err == nil {
		err = kerr
	}
	if err != nil {
		return res, err
	}
	return analyze(res, sc, srv, xs), nil
}

// server starts the scripted model of a scenario.
func (o *options) server(sc *scenario) *scriptllm.Server {
	srv := scriptllm.New(sc.reply)
	srv.CacheOnArrival = o.onArrival
	srv.Start()
	return srv
}

// analyze prices a scenario's exchanges and notes where the run left its
// script.
func analyze(res result, sc *scenario, srv *scriptllm.Server, xs []promptcache.Exchange) result {
	res.Report = promptcache.Analyze(xs)
	res.Warnings = srv.Warnings()
	if n := len(res.Children); n != sc.children {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d delegations, the script makes %d", n, sc.children))
	}
	for _, c := range res.Children {
		if c.First < 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("no request carried the prompt of %s %q", c.Tool, c.Description))
		}
	}
	return res
}

// keepBodies writes the request bodies under o.keep, when set.
func (o *options) keepBodies(name string, xs []promptcache.Exchange) error {
	if o.keep == "" {
		return nil
	}
	dir := filepath.Join(o.keep, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, x := range xs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.json", x.Seq)), x.Body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (o *options) print(r result) {
	if o.json {
		b, _ := json.Marshal(r)
		fmt.Fprintln(o.out, string(b))
		return
	}
	ratio := 0.0
	if r.CostNoCache > 0 {
		ratio = r.Cost / r.CostNoCache
	}
	fmt.Fprintf(o.out, "%-11s %4d %10.0f %6.1f%% %10.0f %10.0f %6.2f %3d/%d\n", r.Scenario, r.Requests, r.InputTokens,
		100*r.HitShare, r.Cost, r.CostNoCache, ratio, r.AppendOnly, r.Continuations)
	if r.Scenario == "total" {
		return
	}
	for _, c := range r.Children {
		fmt.Fprintf(o.out, "  child %-13s %-26q req %2d ← parent req %2d: %6.0f tok, %5.1f%% a prefix of the parent's request, %5.1f%% hits\n",
			c.Tool, c.Description, c.First, c.Parent, c.FirstTokens, 100*c.ParentShare, 100*c.FirstHitShare)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(o.out, "  warning: %s\n", w)
	}
}

// tempDir makes a temporary directory whose name has the same length in
// every run: the working directory is part of dsh's system prompt, so the
// figures do not move with it.
func tempDir() (string, error) {
	for {
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("dsh-cachebench-%08x", rand.Uint32()))
		err := os.Mkdir(dir, 0o700)
		if !errors.Is(err, fs.ErrExist) {
			return dir, err
		}
	}
}

// build builds the dsh command of o.src (default: this working tree) into
// dir.
func (o *options) build(dir string) (string, error) {
	if o.src == "" {
		root, err := dshbin.Root()
		if err != nil {
			return "", err
		}
		o.src = root
	}
	bin := filepath.Join(dir, "dsh")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/dsh")
	cmd.Dir = o.src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/dsh in %s: %v\n%s", o.src, err, out)
	}
	return bin, nil
}

// revision names the commit of the tree at src, with "+dirty" when it has
// uncommitted changes; src itself when it is not a git checkout.
func revision(src string) string {
	out, err := exec.Command("git", "-C", src, "describe", "--always", "--dirty=+dirty").Output()
	if err != nil {
		return src
	}
	return strings.TrimSpace(string(out))
}
