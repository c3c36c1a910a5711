// Command reference runs the reference implementation (deepseek-harness
// rc.8, TypeScript, on Node 22, through the harness in /work/shared/bench-ref)
// and dsh side by side, in one invocation, interleaved: every round runs each
// scenario once on each side, alternating which side goes first.
//
// Scenarios (the reference's cases):
//
//   - a-spawn, a-fork: Start → Wait → Dispose round trip, sequential, from a
//     parent with one completed turn (bench.mjs roundtrip);
//   - c: the tool path, from the end of the parent's subagent tool-call stream
//     to its next model request carrying the result (bench.mjs tool delegate);
//   - b: memory per live child, N children parked in their model call
//     (bench.mjs memory; the reference's heapUsed against dsh's live heap +
//     goroutine stacks, both after forced GCs);
//   - d: ACP server ready latency, spawn → initialize + session/new answered
//     (acp-bench.mjs against acp-server.mjs; dsh: `dsh acp`, built from
//     ../cmd/dsh, with a throw-away DSH_HOME and a model endpoint that nothing
//     answers, since no prompt is sent).
//
// The reference side runs in fresh Node processes (one per scenario per
// round); dsh's in-process scenarios run in this process, on a fresh runtime
// each time. The harness is copied to <root>/.cache/bench-ref (git-ignored)
// and `npm ci` runs there once.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/dsh-go/dsh/bench/internal/acpwire"
	"github.com/dsh-go/dsh/bench/internal/dshbin"
	"github.com/dsh-go/dsh/bench/internal/dshcase"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
)

type options struct {
	rtWarm, rtIters, toolWarm, toolIters, n, acpRuns int
	store                                            string
	refDir, node, dshBin                             string
}

func main() {
	var o options
	rounds := flag.Int("rounds", 5, "rounds; each runs every scenario once on each side")
	cases := flag.String("case", "a-spawn,a-fork,c,b,d", "scenarios, comma separated: a-spawn, a-fork, c, b, d")
	flag.IntVar(&o.rtWarm, "rt-warmup", 200, "(a) warm-up round trips per run")
	flag.IntVar(&o.rtIters, "rt-iters", 1000, "(a) recorded round trips per run (the reference's RESULTS.md used 2000)")
	flag.IntVar(&o.toolWarm, "tool-warmup", 50, "(c) warm-up parents per run")
	flag.IntVar(&o.toolIters, "tool-iters", 300, "(c) recorded parents per run (RESULTS.md: 500)")
	flag.IntVar(&o.n, "n", 1000, "(b) live children")
	flag.IntVar(&o.acpRuns, "acp-runs", 10, "(d) recorded spawns per run per side (after one warm-up spawn)")
	flag.StringVar(&o.store, "store", "memory", "dsh's session store: memory, null, jsonl")
	src := flag.String("src", "/work/shared/bench-ref", "the reference harness to copy")
	flag.StringVar(&o.refDir, "dir", "", "the writable copy (default <root>/.cache/bench-ref)")
	flag.Parse()
	if err := run(o, *src, *rounds, strings.Split(*cases, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "reference:", err)
		os.Exit(1)
	}
}

// scenario is one figure measured on both sides.
type scenario struct {
	name, unit string
	ref, dsh   func() (float64, error)
	refV, dshV []float64
}

func run(o options, src string, rounds int, cases []string) error {
	if err := setup(&o, src); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "dsh-reference-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.dshBin, err = dshbin.Build(tmp); err != nil {
		return err
	}
	nodeV, _ := exec.Command(o.node, "--version").Output()
	fmt.Printf("reference vs dsh, %s %s/%s GOMAXPROCS=%d, node %s, dsh store %s, %d rounds, load average %.2f\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), strings.TrimSpace(string(nodeV)), o.store, rounds, measure.LoadAvg())
	var scs []*scenario
	for _, c := range cases {
		switch c {
		case "a-spawn", "a-fork":
			p := strings.TrimPrefix(c, "a-")
			scs = append(scs, &scenario{name: "(a) " + p + " round trip, median", unit: "µs",
				ref: func() (float64, error) {
					return o.bench("per_delegation.median_us", "roundtrip", "--provider", p, "--warmup", fmt.Sprint(o.rtWarm), "--iters", fmt.Sprint(o.rtIters))
				},
				dsh: func() (float64, error) { return o.roundtrip(p) }})
		case "c":
			scs = append(scs, &scenario{name: "(c) tool path, median", unit: "µs",
				ref: func() (float64, error) {
					return o.bench("toolcall_to_toolresult.median_us", "tool", "--mode", "delegate", "--warmup", fmt.Sprint(o.toolWarm), "--iters", fmt.Sprint(o.toolIters))
				},
				dsh: o.toolPath})
		case "b":
			scs = append(scs, &scenario{name: fmt.Sprintf("(b) memory per live child, spawn, N=%d (ref heapUsed; dsh heap+stacks)", o.n), unit: "B",
				ref: func() (float64, error) {
					return o.bench("per_child_bytes.heapUsed", "memory", "--provider", "spawn", "--n", fmt.Sprint(o.n))
				},
				dsh: o.memory})
		case "d":
			scs = append(scs, &scenario{name: "(d) ACP server ready (spawn → initialize + session/new), median", unit: "ms",
				ref: func() (float64, error) {
					return o.script("ready_initialize_plus_session_new.median_ms", "acp-bench.mjs", "--runs", fmt.Sprint(o.acpRuns), "--server", "reference")
				},
				dsh: func() (float64, error) { return o.acpReady(tmp) }})
		default:
			return fmt.Errorf("unknown scenario %q", c)
		}
	}
	start := time.Now()
	for r := 1; r <= rounds; r++ {
		for _, s := range scs {
			first, second := s.ref, s.dsh
			if r%2 == 0 {
				first, second = s.dsh, s.ref
			}
			v1, err := first()
			if err != nil {
				return fmt.Errorf("%s round %d: %w", s.name, r, err)
			}
			v2, err := second()
			if err != nil {
				return fmt.Errorf("%s round %d: %w", s.name, r, err)
			}
			if r%2 == 0 {
				v1, v2 = v2, v1
			}
			s.refV, s.dshV = append(s.refV, v1), append(s.dshV, v2)
			fmt.Printf("round %d %-70s ref %10.1f %s  dsh %10.1f %s  ref/dsh %6.1f×\n", r, s.name, v1, s.unit, v2, s.unit, v1/v2)
		}
	}
	fmt.Printf("\n## summary: median of %d rounds (min–max); ratio = reference / dsh (median of the per-round ratios, min–max) — %s\n", rounds, time.Since(start).Round(time.Second))
	for _, s := range scs {
		ratios := make([]float64, len(s.refV))
		for i := range ratios {
			ratios[i] = s.refV[i] / s.dshV[i]
		}
		fmt.Printf("%s\n  reference %s %s\n  dsh       %s %s\n  ref/dsh   %s×\n", s.name,
			stats.Spread(s.refV, "%.1f"), s.unit, stats.Spread(s.dshV, "%.2f"), s.unit, stats.Spread(ratios, "%.1f"))
	}
	return nil
}

// setup copies the harness to its writable place and installs it once.
func setup(o *options, src string) error {
	if o.refDir == "" {
		root, err := dshbin.Root()
		if err != nil {
			return err
		}
		o.refDir = filepath.Join(root, ".cache", "bench-ref")
	}
	if _, err := os.Stat(filepath.Join(o.refDir, "package.json")); err != nil {
		if err := os.MkdirAll(filepath.Dir(o.refDir), 0o755); err != nil {
			return err
		}
		if out, err := exec.Command("cp", "-r", src, o.refDir).CombinedOutput(); err != nil {
			return fmt.Errorf("copy %s: %v: %s", src, err, out)
		}
	}
	stamp := filepath.Join(o.refDir, ".npm-ci.stamp")
	o.node = filepath.Join(o.refDir, "node_modules", ".bin", "node")
	if _, err := os.Stat(stamp); err != nil {
		if _, nerr := os.Stat(o.node); nerr != nil {
			fmt.Fprintln(os.Stderr, "reference: npm ci in", o.refDir)
			cmd := exec.Command("npm", "ci")
			cmd.Dir, cmd.Stdout, cmd.Stderr = o.refDir, os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("npm ci: %w", err)
			}
		}
		if err := os.WriteFile(stamp, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// bench runs bench.mjs with --expose-gc and returns the figure at path.
func (o *options) bench(path string, args ...string) (float64, error) {
	return o.script(path, append([]string{"bench.mjs"}, args...)...)
}

// script runs one harness script on Node 22 and returns the figure at path
// (dotted) of the JSON object on its last stdout line.
func (o *options) script(path string, args ...string) (float64, error) {
	cmd := exec.Command(o.node, append([]string{"--expose-gc"}, args...)...)
	cmd.Dir = o.refDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("node %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var v any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		return 0, fmt.Errorf("node %s: %v", strings.Join(args, " "), err)
	}
	m, _ := v.(map[string]any)
	if bad, ok := m["bad"].(float64); ok && bad > 0 {
		return 0, fmt.Errorf("node %s: %v bad delegations", strings.Join(args, " "), bad)
	}
	if s, ok := m["settled"].(bool); ok && !s {
		return 0, fmt.Errorf("node %s: did not settle", strings.Join(args, " "))
	}
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		default:
			return 0, fmt.Errorf("no %s in %s", path, lines[len(lines)-1])
		}
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("no %s in %s", path, lines[len(lines)-1])
	}
	return f, nil
}

func (o *options) env(tool bool) (*dshcase.Env, string, error) {
	dir, err := os.MkdirTemp("", "dsh-reference-case-")
	if err != nil {
		return nil, "", err
	}
	backend, err := dshcase.Backend(o.store, dir)
	if err != nil {
		return nil, "", err
	}
	env, err := dshcase.New(dshcase.Options{Backend: backend, Tool: tool})
	return env, dir, err
}

// roundtrip is dsh's (a): the median round trip in µs.
func (o *options) roundtrip(provider string) (float64, error) {
	ctx := context.Background()
	env, dir, err := o.env(false)
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	defer env.Close()
	parent, err := env.NewParent(ctx, dir)
	if err != nil {
		return 0, err
	}
	if err := dshcase.Turn(ctx, parent, dshcase.PromptDirect); err != nil {
		return 0, err
	}
	lat := make([]float64, 0, o.rtIters)
	for i := range o.rtWarm + o.rtIters {
		ph, err := env.RoundTrip(ctx, provider, parent, dshcase.PromptTask)
		if err != nil {
			return 0, err
		}
		if i >= o.rtWarm {
			lat = append(lat, stats.Micros(ph.Total()))
		}
	}
	if n, last := env.Failures(); n > 0 {
		return 0, fmt.Errorf("%d unexpected model requests, last: %s", n, last)
	}
	return stats.Median(lat), nil
}

// toolPath is dsh's (c): the median tool-call → tool-result interval in µs.
func (o *options) toolPath() (float64, error) {
	ctx := context.Background()
	env, dir, err := o.env(true)
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	defer env.Close()
	lat := make([]float64, 0, o.toolIters)
	for i := range o.toolWarm + o.toolIters {
		if err := env.Delegation(ctx, dir); err != nil {
			return 0, err
		}
		if i >= o.toolWarm {
			lat = append(lat, stats.Micros(env.ToolPath()))
		}
	}
	if n, last := env.Failures(); n > 0 {
		return 0, fmt.Errorf("%d unexpected model requests, last: %s", n, last)
	}
	return stats.Median(lat), nil
}

// memory is dsh's (b): live heap + goroutine stacks per parked child, in
// bytes, after 50 warm-up round trips and forced GCs; it checks that every
// child completes and that agents, sessions and goroutines settle.
func (o *options) memory() (float64, error) {
	ctx := context.Background()
	env, dir, err := o.env(false)
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	defer env.Close()
	parent, err := env.NewParent(ctx, dir)
	if err != nil {
		return 0, err
	}
	if err := dshcase.Turn(ctx, parent, dshcase.PromptDirect); err != nil {
		return 0, err
	}
	for range 50 {
		if _, err := env.RoundTrip(ctx, "spawn", parent, dshcase.PromptTask); err != nil {
			return 0, err
		}
	}
	agents0 := len(env.RT.Agents.List())
	h0 := measure.Settle()
	runs := make([]subagent.Run, 0, o.n)
	for range o.n {
		r, err := env.Start(ctx, "spawn", parent, dshcase.PromptPark)
		if err != nil {
			return 0, err
		}
		runs = append(runs, r)
	}
	for deadline := time.Now().Add(time.Minute); env.Parked() < int64(o.n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d of %d children parked", env.Parked(), o.n)
		}
	}
	h1 := measure.Settle()
	env.Release()
	var errs []error
	for _, r := range runs {
		res, err := r.Wait(ctx)
		if err == nil && (res.StopReason != subagent.Completed || content.JoinText(res.Output) != dshcase.ChildAnswer) {
			err = fmt.Errorf("child stopped %s", res.StopReason)
		}
		errs = append(errs, err, r.Dispose(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	runs = nil
	h2 := measure.Settle()
	if len(env.RT.Agents.List()) != agents0 || h2.Goroutines != h0.Goroutines {
		return 0, fmt.Errorf("not settled: agents %d → %d, goroutines %d → %d", agents0, len(env.RT.Agents.List()), h0.Goroutines, h2.Goroutines)
	}
	return (float64(h1.HeapAlloc+h1.StackInuse) - float64(h0.HeapAlloc+h0.StackInuse)) / float64(o.n), nil
}

// acpReady is dsh's (d): the median ready latency of `dsh acp` in ms, after
// one warm-up spawn, as acp-bench.mjs does.
func (o *options) acpReady(tmp string) (float64, error) {
	env, err := dshbin.Env(tmp, "http://127.0.0.1:1")
	if err != nil {
		return 0, err
	}
	lat := make([]float64, 0, o.acpRuns)
	for i := range o.acpRuns + 1 {
		cmd := exec.Command(o.dshBin, "acp")
		cmd.Dir, cmd.Env = tmp, dshbin.Environ(env)
		t, err := acpwire.Ready(cmd, tmp, 5*time.Second)
		if err != nil {
			return 0, fmt.Errorf("dsh acp: %w", err)
		}
		if i > 0 {
			lat = append(lat, float64(t.Ready.Microseconds())/1e3)
		}
	}
	return stats.Median(lat), nil
}
