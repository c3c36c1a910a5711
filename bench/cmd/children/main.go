// Command children measures how many live children one dsh process holds,
// in the reference's shapes (/work/shared/bench-ref, cases (b) and (a')):
//
//   - memory: N children are started one after another from one parent and
//     held inside their model call on one shared gate; memory per live child
//     is (after − before) / N after forced GCs, for the live heap, for
//     goroutine stacks (which Go keeps outside the heap) and for RSS. The
//     start latency per decile shows whether starting stays linear. Then
//     the gate opens, every result is checked and every child disposed, and
//     the live agent and session counts must be back to their baseline.
//   - park: the spawn round trip (Start → Wait → Dispose) while K other
//     children of the same parent are alive and parked in their model call.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/bench/internal/dshcase"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
)

func main() {
	cases := flag.String("case", "memory,park", "cases, comma separated: memory, park")
	providers := flag.String("provider", "spawn,fork", "memory-case providers, comma separated")
	ns := flag.String("n", "1000,5000", "memory case: numbers of live children, comma separated")
	ks := flag.String("k", "0,1000,2500", "park case: numbers of other live children, comma separated")
	runs := flag.Int("runs", 3, "runs per configuration, each on a fresh runtime")
	warm := flag.Int("warmup", 50, "round trips before measuring")
	iters := flag.Int("iters", 300, "park case: recorded round trips")
	store := flag.String("store", "memory", "session store: memory, jsonl, null")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole command to this file")
	flag.StringVar(&heapProfile, "heapprofile", "", "memory case: write a heap profile taken while all children are parked (first configuration only) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "children:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("dsh live children, %s %s/%s GOMAXPROCS=%d, store %s, %d runs per configuration, load average %.2f\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *store, *runs, measure.LoadAvg())
	if err := run(*cases, *providers, *ns, *ks, *runs, *warm, *iters, *store); err != nil {
		fmt.Fprintln(os.Stderr, "children:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// heapProfile is where the first memory configuration writes a heap
// profile while all its children are parked ("" for none).
var heapProfile string

func writeHeapProfile() error {
	if heapProfile == "" {
		return nil
	}
	f, err := os.Create(heapProfile)
	if err != nil {
		return err
	}
	heapProfile = ""
	return errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(cases, providers, nList, kList string, runs, warm, iters int, store string) error {
	for _, c := range strings.Split(cases, ",") {
		switch c {
		case "memory":
			list, err := ints(nList)
			if err != nil {
				return err
			}
			for _, p := range strings.Split(providers, ",") {
				for _, n := range list {
					if err := repeat(runs, fmt.Sprintf("memory %s N=%d", p, n), memoryMetrics, func() (map[string]float64, string, error) {
						return memory(p, n, warm, store)
					}); err != nil {
						return err
					}
				}
			}
		case "park":
			list, err := ints(kList)
			if err != nil {
				return err
			}
			for _, k := range list {
				if err := repeat(runs, fmt.Sprintf("park spawn K=%d", k), parkMetrics, func() (map[string]float64, string, error) {
					return park(k, warm, iters, store)
				}); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("unknown case %q", c)
		}
	}
	return nil
}

func repeat(runs int, name string, metrics []stats.Metric, one func() (map[string]float64, string, error)) error {
	all := stats.Runs{Metrics: metrics}
	fmt.Printf("\n## %s\n", name)
	for r := 1; r <= runs; r++ {
		vals, note, err := one()
		if err != nil {
			return fmt.Errorf("%s run %d: %w", name, r, err)
		}
		all.Add(vals)
		var parts []string
		for _, m := range metrics {
			parts = append(parts, fmt.Sprintf("%s "+m.Format, m.Name, vals[m.Name]))
		}
		fmt.Printf("run %d: %s\n", r, strings.Join(parts, ", "))
		if note != "" {
			fmt.Printf("       %s\n", note)
		}
	}
	fmt.Printf("median of %d runs (min–max):\n  %s\n", runs, strings.Join(all.Pooled(), "\n  "))
	return nil
}

func m(name, format string) stats.Metric { return stats.Metric{Name: name, Format: format} }

var memoryMetrics = []stats.Metric{
	m("heap_per_child_b", "%.0f"), m("stack_per_child_b", "%.0f"), m("heap_stack_per_child_b", "%.0f"),
	m("rss_per_child_b", "%.0f"), m("goroutines_per_child", "%.2f"),
	m("start_all_ms", "%.1f"), m("start_first10_us", "%.1f"), m("start_last10_us", "%.1f"),
	m("release_results_ms", "%.1f"), m("release_disposed_ms", "%.1f"),
	m("heap_after_release_per_child_b", "%.0f"), m("settled", "%.0f"),
}

func newEnv(store string) (*dshcase.Env, string, error) {
	dir, err := os.MkdirTemp("", "dsh-children-")
	if err != nil {
		return nil, "", err
	}
	backend, err := dshcase.Backend(store, dir)
	if err != nil {
		return nil, "", err
	}
	env, err := dshcase.New(dshcase.Options{Backend: backend})
	return env, dir, err
}

// waitParked waits until n children are inside their model call.
func waitParked(env *dshcase.Env, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for env.Parked() < int64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d children reached their model call", env.Parked(), n)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// memory is case (b).
func memory(provider string, n, warm int, store string) (map[string]float64, string, error) {
	ctx := context.Background()
	env, dir, err := newEnv(store)
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	defer env.Close()
	parent, err := env.NewParent(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	if err := dshcase.Turn(ctx, parent, dshcase.PromptDirect); err != nil {
		return nil, "", err
	}
	for range warm {
		if _, err := env.RoundTrip(ctx, provider, parent, dshcase.PromptTask); err != nil {
			return nil, "", err
		}
	}
	agents0, sessions0 := len(env.RT.Agents.List()), len(env.RT.Sessions.Live())
	h0 := measure.Settle()

	runs := make([]subagent.Run, 0, n)
	lat := make([]float64, 0, n)
	t0 := time.Now()
	for range n {
		s := time.Now()
		r, err := env.Start(ctx, provider, parent, dshcase.PromptPark)
		if err != nil {
			return nil, "", err
		}
		lat = append(lat, stats.Micros(time.Since(s)))
		runs = append(runs, r)
	}
	startAll := time.Since(t0)
	if err := waitParked(env, n); err != nil {
		return nil, "", err
	}
	h1 := measure.Settle()
	if err := writeHeapProfile(); err != nil {
		return nil, "", err
	}

	t1 := time.Now()
	env.Release()
	var errs []error
	for _, r := range runs {
		res, err := r.Wait(ctx)
		if err == nil && (res.StopReason != subagent.Completed || content.JoinText(res.Output) != dshcase.ChildAnswer) {
			err = fmt.Errorf("child stopped %s with %q (%s)", res.StopReason, content.JoinText(res.Output), res.Diagnostic)
		}
		errs = append(errs, err)
	}
	results := time.Since(t1)
	for _, r := range runs {
		errs = append(errs, r.Dispose(ctx))
	}
	disposed := time.Since(t1)
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	runs = nil
	h2 := measure.Settle()
	settled := len(env.RT.Agents.List()) == agents0 && len(env.RT.Sessions.Live()) == sessions0 && h2.Goroutines == h0.Goroutines
	if fails, last := env.Failures(); fails > 0 {
		return nil, "", fmt.Errorf("%d unexpected model requests, last: %s", fails, last)
	}

	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	tenth := max(n/10, 1)
	deciles := make([]string, 0, 10)
	for d := range 10 {
		lo, hi := d*n/10, (d+1)*n/10
		if hi > lo {
			deciles = append(deciles, fmt.Sprintf("%.0f", stats.Median(lat[lo:hi])))
		}
	}
	b := 0.0
	if settled {
		b = 1
	}
	return map[string]float64{
			"heap_per_child_b":               per(h1.HeapAlloc, h0.HeapAlloc),
			"stack_per_child_b":              per(h1.StackInuse, h0.StackInuse),
			"heap_stack_per_child_b":         per(h1.HeapAlloc+h1.StackInuse, h0.HeapAlloc+h0.StackInuse),
			"rss_per_child_b":                per(h1.RSS, h0.RSS),
			"goroutines_per_child":           float64(h1.Goroutines-h0.Goroutines) / float64(n),
			"start_all_ms":                   float64(startAll.Microseconds()) / 1e3,
			"start_first10_us":               stats.Median(lat[:tenth]),
			"start_last10_us":                stats.Median(lat[n-tenth:]),
			"release_results_ms":             float64(results.Microseconds()) / 1e3,
			"release_disposed_ms":            float64(disposed.Microseconds()) / 1e3,
			"heap_after_release_per_child_b": per(h2.HeapAlloc, h0.HeapAlloc),
			"settled":                        b,
		}, fmt.Sprintf("start µs per decile (median): %s; heap %s → %s (all parked) → %s (released), RSS %s → %s → %s",
			strings.Join(deciles, ", "), stats.Bytes(float64(h0.HeapAlloc)), stats.Bytes(float64(h1.HeapAlloc)), stats.Bytes(float64(h2.HeapAlloc)),
			stats.Bytes(float64(h0.RSS)), stats.Bytes(float64(h1.RSS)), stats.Bytes(float64(h2.RSS))), nil
}

var parkMetrics = []stats.Metric{
	m("median_us", "%.1f"), m("p90_us", "%.1f"), m("start_us", "%.1f"), m("result_us", "%.1f"), m("dispose_us", "%.1f"),
	m("cpu_us_per_op", "%.1f"), m("bytes_per_op", "%.0f"), m("park_all_ms", "%.1f"),
}

// park is case (a'): the spawn round trip with k other children alive.
func park(k, warm, iters int, store string) (map[string]float64, string, error) {
	ctx := context.Background()
	env, dir, err := newEnv(store)
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	defer env.Close()
	parent, err := env.NewParent(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	if err := dshcase.Turn(ctx, parent, dshcase.PromptDirect); err != nil {
		return nil, "", err
	}
	t0 := time.Now()
	parked := make([]subagent.Run, 0, k)
	for range k {
		r, err := env.Start(ctx, "spawn", parent, dshcase.PromptPark)
		if err != nil {
			return nil, "", err
		}
		parked = append(parked, r)
	}
	if err := waitParked(env, k); err != nil {
		return nil, "", err
	}
	parkAll := time.Since(t0)
	for range warm {
		if _, err := env.RoundTrip(ctx, "spawn", parent, dshcase.PromptTask); err != nil {
			return nil, "", err
		}
	}
	total, starts, results, disposes := make([]float64, 0, iters), make([]float64, 0, iters), make([]float64, 0, iters), make([]float64, 0, iters)
	before := measure.Read()
	for range iters {
		ph, err := env.RoundTrip(ctx, "spawn", parent, dshcase.PromptTask)
		if err != nil {
			return nil, "", err
		}
		total = append(total, stats.Micros(ph.Total()))
		starts = append(starts, stats.Micros(ph.Start))
		results = append(results, stats.Micros(ph.Result))
		disposes = append(disposes, stats.Micros(ph.Dispose))
	}
	after := measure.Read()
	if env.Parked() != int64(k) {
		return nil, "", fmt.Errorf("%d children parked after the loop, want %d", env.Parked(), k)
	}
	env.Release()
	var errs []error
	for _, r := range parked {
		res, err := r.Wait(ctx)
		if err == nil && res.StopReason != subagent.Completed {
			err = fmt.Errorf("parked child stopped %s (%s)", res.StopReason, res.Diagnostic)
		}
		errs = append(errs, err, r.Dispose(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	if fails, last := env.Failures(); fails > 0 {
		return nil, "", fmt.Errorf("%d unexpected model requests, last: %s", fails, last)
	}
	t := stats.Of(total)
	return map[string]float64{
		"median_us": t.Median, "p90_us": t.P90,
		"start_us": stats.Median(starts), "result_us": stats.Median(results), "dispose_us": stats.Median(disposes),
		"cpu_us_per_op": stats.Micros(after.CPU-before.CPU) / float64(iters),
		"bytes_per_op":  float64(after.TotalAlloc-before.TotalAlloc) / float64(iters),
		"park_all_ms":   float64(parkAll.Microseconds()) / 1e3,
	}, "", nil
}
