// Command seam measures dsh's subagent seam in the reference's shapes
// (/work/shared/bench-ref, cases (a) and (c)), reporting medians rather
// than the means that go test -bench prints:
//
//   - roundtrip: Subagents.Start → Run.Wait → Run.Dispose, sequential, from
//     one parent that has one completed turn (the fork child's seed), with
//     the median of each phase;
//   - tool: a fresh parent per iteration (create → turn → dispose) whose
//     model calls the subagent tool (delegate) or answers at once (direct),
//     with the tool-call → tool-result interval: from the end of the
//     parent's tool-call stream to the arrival of its next model request.
//
// Each case runs -runs times on a fresh runtime; the summary is the median
// of the per-run figures with their min–max, as in the reference's RESULTS.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/dsh-go/dsh/bench/internal/dshcase"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
	"github.com/dsh-go/dsh/session"
)

func main() {
	cases := flag.String("case", "roundtrip,tool", "cases, comma separated: roundtrip, tool, fsfloor")
	providers := flag.String("provider", "spawn,fork", "roundtrip providers, comma separated")
	modes := flag.String("mode", "delegate,direct", "tool modes, comma separated")
	runs := flag.Int("runs", 5, "runs per case, each on a fresh runtime")
	rtWarm := flag.Int("rt-warmup", 200, "roundtrip warm-up delegations")
	rtIters := flag.Int("rt-iters", 2000, "roundtrip recorded delegations")
	toolWarm := flag.Int("tool-warmup", 50, "tool warm-up parents")
	toolIters := flag.Int("tool-iters", 500, "tool recorded parents")
	store := flag.String("store", "memory", "session store: memory, jsonl, null")
	flag.IntVar(&projects, "jsonl-projects", 0, "jsonl store: create this many other project directories in its root first")
	asJSON := flag.Bool("json", false, "print each run as a JSON line")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole command to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "seam:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "seam:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("dsh seam, %s %s/%s GOMAXPROCS=%d, store %s, %d runs per case, load average %.2f\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *store, *runs, measure.LoadAvg())
	var err error
	for _, c := range strings.Split(*cases, ",") {
		switch c {
		case "roundtrip":
			for _, p := range strings.Split(*providers, ",") {
				if err = repeat(*runs, *asJSON, "roundtrip "+p, roundtripMetrics, func() (map[string]float64, error) {
					return roundtrip(p, *store, *rtWarm, *rtIters)
				}); err != nil {
					break
				}
			}
		case "tool":
			for _, m := range strings.Split(*modes, ",") {
				metrics := toolMetrics
				if m == "direct" {
					metrics = directMetrics
				}
				if err = repeat(*runs, *asJSON, "tool "+m, metrics, func() (map[string]float64, error) {
					return toolPath(m, *store, *toolWarm, *toolIters)
				}); err != nil {
					break
				}
			}
		case "fsfloor":
			err = repeat(*runs, *asJSON, "fsfloor", fsMetrics, func() (map[string]float64, error) { return fsFloor(*rtIters) })
		default:
			err = fmt.Errorf("unknown case %q", c)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "seam:", err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
	}
}

// projects is the number of other project directories the jsonl store's
// root holds before a run.
var projects int

// newBackend returns the store's backend under dir, with the jsonl root
// holding projects other project directories.
func newBackend(store, dir string) (session.Backend, error) {
	if store == "jsonl" {
		for i := range projects {
			if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("other-project-%05d", i)), 0o700); err != nil {
				return nil, err
			}
		}
	}
	return dshcase.Backend(store, dir)
}

var fsMetrics = []stats.Metric{m("median_us", "%.1f"), m("p90_us", "%.1f"), m("remove_us_per_session", "%.1f")}

// fsFloor measures what one JSONL session costs the filesystem alone: a
// directory, a file created with O_EXCL, three appended lines, close; the
// floor under any jsonl figure on this machine.
func fsFloor(n int) (map[string]float64, error) {
	root, err := os.MkdirTemp("", "dsh-fsfloor-")
	if err != nil {
		return nil, err
	}
	line := []byte(`{"type":"turn/start","seq":1,"time":1,"data":{"turn":1}}` + "\n")
	lat := make([]float64, 0, n)
	for i := range n {
		t0 := time.Now()
		dir := filepath.Join(root, "project", fmt.Sprintf("session-%08d", i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, "session.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		for range 3 {
			if _, err := f.Write(line); err != nil {
				return nil, err
			}
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		lat = append(lat, stats.Micros(time.Since(t0)))
	}
	t0 := time.Now()
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	s := stats.Of(lat)
	return map[string]float64{"median_us": s.Median, "p90_us": s.P90, "remove_us_per_session": stats.Micros(time.Since(t0)) / float64(n)}, nil
}

func repeat(runs int, asJSON bool, name string, metrics []stats.Metric, one func() (map[string]float64, error)) error {
	all := stats.Runs{Metrics: metrics}
	fmt.Printf("\n## %s\n", name)
	for r := 1; r <= runs; r++ {
		vals, err := one()
		if err != nil {
			return fmt.Errorf("%s run %d: %w", name, r, err)
		}
		all.Add(vals)
		if asJSON {
			b, _ := json.Marshal(map[string]any{"case": name, "run": r, "values": vals})
			fmt.Println(string(b))
			continue
		}
		var parts []string
		for _, m := range metrics {
			parts = append(parts, fmt.Sprintf("%s "+m.Format, m.Name, vals[m.Name]))
		}
		fmt.Printf("run %d: %s\n", r, strings.Join(parts, ", "))
	}
	fmt.Printf("median of %d runs (min–max):\n  %s\n", runs, strings.Join(all.Pooled(), "\n  "))
	return nil
}

func m(name, format string) stats.Metric { return stats.Metric{Name: name, Format: format} }

var roundtripMetrics = []stats.Metric{
	m("median_us", "%.1f"), m("p90_us", "%.1f"), m("p99_us", "%.1f"),
	m("start_us", "%.1f"), m("result_us", "%.1f"), m("dispose_us", "%.1f"),
	m("delegations_per_s", "%.0f"), m("cpu_us_per_op", "%.1f"), m("bytes_per_op", "%.0f"), m("allocs_per_op", "%.0f"),
	m("seed_events", "%.0f"), m("heap_growth_bytes", "%.0f"),
}

// roundtrip is case (a): sequential Start → Wait → Dispose from one parent
// with one completed turn.
func roundtrip(provider, store string, warm, iters int) (map[string]float64, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dsh-seam-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	backend, err := newBackend(store, dir)
	if err != nil {
		return nil, err
	}
	env, err := dshcase.New(dshcase.Options{Backend: backend})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	parent, err := env.NewParent(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := dshcase.Turn(ctx, parent, dshcase.PromptDirect); err != nil {
		return nil, err
	}
	seed := len(session.CompletedPrefix(parent.Session().Events()))
	parentEvents := parent.Session().Len()
	for range warm {
		if _, err := env.RoundTrip(ctx, provider, parent, dshcase.PromptTask); err != nil {
			return nil, err
		}
	}
	h0 := measure.Settle()
	total, starts, results, disposes := make([]float64, 0, iters), make([]float64, 0, iters), make([]float64, 0, iters), make([]float64, 0, iters)
	before := measure.Read()
	t0 := time.Now()
	for range iters {
		ph, err := env.RoundTrip(ctx, provider, parent, dshcase.PromptTask)
		if err != nil {
			return nil, err
		}
		total = append(total, stats.Micros(ph.Total()))
		starts = append(starts, stats.Micros(ph.Start))
		results = append(results, stats.Micros(ph.Result))
		disposes = append(disposes, stats.Micros(ph.Dispose))
	}
	elapsed := time.Since(t0)
	after := measure.Read()
	h1 := measure.Settle()
	if n := len(env.RT.Agents.List()); n != 1 {
		return nil, fmt.Errorf("%d live agents after the loop, want 1 (the parent)", n)
	}
	if n := len(env.RT.Sessions.Live()); n != 1 {
		return nil, fmt.Errorf("%d live sessions after the loop, want 1", n)
	}
	if n := parent.Session().Len(); n != parentEvents {
		return nil, fmt.Errorf("the parent's log grew from %d to %d events", parentEvents, n)
	}
	if n, last := env.Failures(); n > 0 {
		return nil, fmt.Errorf("%d unexpected model requests, last: %s", n, last)
	}
	t := stats.Of(total)
	return map[string]float64{
		"median_us": t.Median, "p90_us": t.P90, "p99_us": t.P99,
		"start_us": stats.Median(starts), "result_us": stats.Median(results), "dispose_us": stats.Median(disposes),
		"delegations_per_s": float64(iters) / elapsed.Seconds(),
		"cpu_us_per_op":     stats.Micros(after.CPU-before.CPU) / float64(iters),
		"bytes_per_op":      float64(after.TotalAlloc-before.TotalAlloc) / float64(iters),
		"allocs_per_op":     float64(after.Mallocs-before.Mallocs) / float64(iters),
		"seed_events":       float64(seed),
		"heap_growth_bytes": float64(int64(h1.HeapAlloc) - int64(h0.HeapAlloc)),
	}, nil
}

var toolMetrics = []stats.Metric{
	m("turn_median_us", "%.1f"), m("turn_p90_us", "%.1f"), m("whole_median_us", "%.1f"),
	m("toolpath_median_us", "%.1f"), m("toolpath_p90_us", "%.1f"), m("parents_per_s", "%.0f"),
	m("cpu_us_per_op", "%.1f"), m("bytes_per_op", "%.0f"), m("allocs_per_op", "%.0f"),
}

var directMetrics = []stats.Metric{
	m("turn_median_us", "%.1f"), m("turn_p90_us", "%.1f"), m("whole_median_us", "%.1f"), m("parents_per_s", "%.0f"),
	m("cpu_us_per_op", "%.1f"), m("bytes_per_op", "%.0f"), m("allocs_per_op", "%.0f"),
}

// toolPath is case (c): a fresh parent per iteration, create → turn →
// dispose, with or without one delegation through the subagent tool.
func toolPath(mode, store string, warm, iters int) (map[string]float64, error) {
	ctx := context.Background()
	prompt := map[string]string{"delegate": dshcase.PromptDelegate, "direct": dshcase.PromptDirect}[mode]
	if prompt == "" {
		return nil, fmt.Errorf("unknown tool mode %q", mode)
	}
	dir, err := os.MkdirTemp("", "dsh-seam-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	backend, err := newBackend(store, dir)
	if err != nil {
		return nil, err
	}
	env, err := dshcase.New(dshcase.Options{Backend: backend, Tool: true})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	one := func() (turn, whole, toolPath time.Duration, err error) {
		t0 := time.Now()
		p, err := env.NewParent(ctx, dir)
		if err != nil {
			return 0, 0, 0, err
		}
		t1 := time.Now()
		err = dshcase.Turn(ctx, p, prompt)
		t2 := time.Now()
		if derr := p.Dispose(ctx); err == nil {
			err = derr
		}
		return t2.Sub(t1), time.Since(t0), env.ToolPath(), err
	}
	for range warm {
		if _, _, _, err := one(); err != nil {
			return nil, err
		}
	}
	turns, wholes, paths := make([]float64, 0, iters), make([]float64, 0, iters), make([]float64, 0, iters)
	before := measure.Read()
	t0 := time.Now()
	for range iters {
		turn, whole, path, err := one()
		if err != nil {
			return nil, err
		}
		turns = append(turns, stats.Micros(turn))
		wholes = append(wholes, stats.Micros(whole))
		paths = append(paths, stats.Micros(path))
	}
	elapsed := time.Since(t0)
	after := measure.Read()
	if n, last := env.Failures(); n > 0 {
		return nil, fmt.Errorf("%d unexpected model requests, last: %s", n, last)
	}
	if n := len(env.RT.Agents.List()); n != 0 {
		return nil, fmt.Errorf("%d agents left alive", n)
	}
	t, p := stats.Of(turns), stats.Of(paths)
	vals := map[string]float64{
		"turn_median_us": t.Median, "turn_p90_us": t.P90, "whole_median_us": stats.Median(wholes),
		"parents_per_s": float64(iters) / elapsed.Seconds(),
		"cpu_us_per_op": stats.Micros(after.CPU-before.CPU) / float64(iters),
		"bytes_per_op":  float64(after.TotalAlloc-before.TotalAlloc) / float64(iters),
		"allocs_per_op": float64(after.Mallocs-before.Mallocs) / float64(iters),
	}
	if mode == "delegate" {
		vals["toolpath_median_us"], vals["toolpath_p90_us"] = p.Median, p.P90
	}
	return vals, nil
}
