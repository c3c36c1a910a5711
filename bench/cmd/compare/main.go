// Command compare runs the same delegation task in dsh and in cloudwego/eino,
// interleaved in one process, and prints the ratio of medians (dsh/eino)
// for wall time, CPU time, bytes and objects allocated per delegation.
//
// One delegation is one parent turn on a fake model that answers at once:
// the parent's model calls a tool, the tool runs a child agent whose model
// answers at once, and the parent's next model call receives the child's
// answer as the tool result and answers.
//
//   - dsh: a fresh parent agent (Agents.Create → Run → Dispose) on the
//     spawn provider through the subagent tool, foreground.
//   - eino: adk.Runner.Run on a ChatModelAgent parent whose only tool is a
//     child ChatModelAgent wrapped by adk.NewAgentTool (Generate path).
//   - eino-stream: the same with RunnerConfig.EnableStreaming (Stream path;
//     the events' message streams are read to the end).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dsh-go/dsh/bench/internal/dshcase"
	"github.com/dsh-go/dsh/bench/internal/einocase"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
)

type impl struct {
	name  string
	op    func(context.Context) error
	check func() error

	times, cpu, bytes, allocs []float64 // per op (times) or per batch (the rest), µs and counts
}

type summary struct {
	Impl          string  `json:"impl"`
	Ops           int     `json:"ops"`
	MedianUs      float64 `json:"medianUs"`
	P90Us         float64 `json:"p90Us"`
	P99Us         float64 `json:"p99Us"`
	MeanUs        float64 `json:"meanUs"`
	CPUUsPerOp    float64 `json:"cpuUsPerOp"`
	BytesPerOp    float64 `json:"bytesPerOp"`
	BytesPerOpP90 float64 `json:"bytesPerOpP90"`
	AllocsPerOp   float64 `json:"allocsPerOp"`
}

type ratio struct {
	Versus string  `json:"versus"`
	Time   float64 `json:"time"`
	P90    float64 `json:"p90"`
	CPU    float64 `json:"cpu"`
	Bytes  float64 `json:"bytes"`
	Allocs float64 `json:"allocs"`
}

func main() {
	rounds := flag.Int("rounds", 100, "recorded rounds per run; each round runs one batch of every implementation")
	warmup := flag.Int("warmup", 5, "warm-up rounds per run (not recorded)")
	batch := flag.Int("batch", 25, "delegations per batch")
	runs := flag.Int("runs", 3, "independent runs (fresh runtimes); the summary is the median over runs")
	implList := flag.String("impls", "dsh,eino,eino-stream", "implementations, comma separated: dsh, eino, eino-stream")
	store := flag.String("store", "null", "dsh session store: null (keeps nothing), memory (keeps every log in the heap), jsonl (files)")
	asJSON := flag.Bool("json", false, "print one JSON line per run instead of tables")
	flag.Parse()
	if err := run(*runs, *rounds, *warmup, *batch, strings.Split(*implList, ","), *store, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(runs, rounds, warmup, batch int, names []string, store string, asJSON bool) error {
	ctx := context.Background()
	if !asJSON {
		fmt.Printf("dsh vs eino: one delegation = a parent turn whose tool call runs a child agent (fake model, answers at once)\n")
		fmt.Printf("%s %s/%s, GOMAXPROCS=%d, eino %s, dsh store %s; %d run(s) × %d rounds × %d delegations per implementation after %d warm-up rounds, interleaved (order rotates each round)\n",
			runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), einoVersion(), store, runs, rounds, batch, warmup)
	}
	perRun := map[string][]ratio{}
	var order []string
	for r := 1; r <= runs; r++ {
		impls, cleanup, err := build(ctx, names, store)
		if err != nil {
			return err
		}
		load0 := measure.LoadAvg()
		start := time.Now()
		for round := range warmup + rounds {
			record := round >= warmup
			for i := range impls {
				im := impls[(i+round)%len(impls)]
				if err := batchOf(ctx, im, batch, record); err != nil {
					cleanup()
					return fmt.Errorf("%s: %w", im.name, err)
				}
			}
		}
		elapsed := time.Since(start)
		for _, im := range impls {
			if im.check != nil {
				if err := im.check(); err != nil {
					cleanup()
					return fmt.Errorf("%s: %w", im.name, err)
				}
			}
		}
		cleanup()
		sums := make([]summary, len(impls))
		for i, im := range impls {
			sums[i] = summarize(im)
		}
		var ratios []ratio
		for _, s := range sums[1:] {
			rt := ratioOf(sums[0], s)
			ratios = append(ratios, rt)
			if r == 1 {
				order = append(order, s.Impl)
			}
			perRun[s.Impl] = append(perRun[s.Impl], rt)
		}
		if asJSON {
			line, _ := json.Marshal(map[string]any{"run": r, "go": runtime.Version(), "eino": einoVersion(), "store": store,
				"rounds": rounds, "batch": batch, "warmup": warmup, "loadAvg": []float64{load0, measure.LoadAvg()},
				"seconds": elapsed.Seconds(), "impls": sums, "ratios": ratios})
			fmt.Println(string(line))
			continue
		}
		fmt.Printf("\nrun %d (%.1f s, load average %.2f → %.2f)\n", r, elapsed.Seconds(), load0, measure.LoadAvg())
		fmt.Printf("%-12s %6s %10s %10s %10s %11s %12s %12s %10s\n", "impl", "ops", "median µs", "p90 µs", "mean µs",
			"cpu µs/op", "B/op", "B/op p90", "allocs/op")
		for _, s := range sums {
			fmt.Printf("%-12s %6d %10.1f %10.1f %10.1f %11.1f %12.0f %12.0f %10.0f\n", s.Impl, s.Ops, s.MedianUs, s.P90Us, s.MeanUs,
				s.CPUUsPerOp, s.BytesPerOp, s.BytesPerOpP90, s.AllocsPerOp)
		}
		for _, rt := range ratios {
			fmt.Printf("ratio %s/%s: time (median) %.3f, p90 %.3f, cpu %.3f, bytes %.3f, allocs %.3f\n",
				sums[0].Impl, rt.Versus, rt.Time, rt.P90, rt.CPU, rt.Bytes, rt.Allocs)
		}
	}
	if asJSON || runs < 2 {
		return nil
	}
	fmt.Printf("\nmedian over %d runs (min–max)\n", runs)
	for _, v := range order {
		rs := perRun[v]
		pick := func(f func(ratio) float64) string {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return stats.Spread(xs, "%.3f")
		}
		fmt.Printf("ratio %s/%s: time %s, p90 %s, cpu %s, bytes %s, allocs %s\n", names[0], v,
			pick(func(r ratio) float64 { return r.Time }), pick(func(r ratio) float64 { return r.P90 }),
			pick(func(r ratio) float64 { return r.CPU }), pick(func(r ratio) float64 { return r.Bytes }),
			pick(func(r ratio) float64 { return r.Allocs }))
	}
	return nil
}

// batchOf runs n delegations of im, timing each, and records the batch's
// CPU time and allocations per delegation.
func batchOf(ctx context.Context, im *impl, n int, record bool) error {
	times := make([]float64, 0, n)
	before := measure.Read()
	for range n {
		t0 := time.Now()
		if err := im.op(ctx); err != nil {
			return err
		}
		times = append(times, stats.Micros(time.Since(t0)))
	}
	after := measure.Read()
	if record {
		im.times = append(im.times, times...)
		im.cpu = append(im.cpu, stats.Micros(after.CPU-before.CPU)/float64(n))
		im.bytes = append(im.bytes, float64(after.TotalAlloc-before.TotalAlloc)/float64(n))
		im.allocs = append(im.allocs, float64(after.Mallocs-before.Mallocs)/float64(n))
	}
	return nil
}

func summarize(im *impl) summary {
	t := stats.Of(im.times)
	b := stats.Of(im.bytes)
	return summary{Impl: im.name, Ops: t.N, MedianUs: t.Median, P90Us: t.P90, P99Us: t.P99, MeanUs: t.Mean,
		CPUUsPerOp: stats.Median(im.cpu), BytesPerOp: b.Median, BytesPerOpP90: b.P90, AllocsPerOp: stats.Median(im.allocs)}
}

func ratioOf(a, b summary) ratio {
	return ratio{Versus: b.Impl, Time: a.MedianUs / b.MedianUs, P90: a.P90Us / b.P90Us, CPU: a.CPUUsPerOp / b.CPUUsPerOp,
		Bytes: a.BytesPerOp / b.BytesPerOp, Allocs: a.AllocsPerOp / b.AllocsPerOp}
}

func build(ctx context.Context, names []string, store string) ([]*impl, func(), error) {
	var impls []*impl
	var cleanups []func()
	cleanup := func() {
		for _, c := range cleanups {
			c()
		}
	}
	for _, name := range names {
		switch name = strings.TrimSpace(name); name {
		case "dsh":
			dir, err := os.MkdirTemp("", "dsh-compare-")
			if err != nil {
				cleanup()
				return nil, nil, err
			}
			backend, err := dshcase.Backend(store, dir)
			if err != nil {
				cleanup()
				return nil, nil, err
			}
			env, err := dshcase.New(dshcase.Options{Backend: backend, Tool: true})
			if err != nil {
				cleanup()
				return nil, nil, err
			}
			cwd := dir
			cleanups = append(cleanups, func() { env.Close(); os.RemoveAll(dir) })
			impls = append(impls, &impl{name: name,
				op: func(ctx context.Context) error { return env.Delegation(ctx, cwd) },
				check: func() error {
					if n, last := env.Failures(); n > 0 {
						return fmt.Errorf("%d unexpected model requests, last: %s", n, last)
					}
					if n := len(env.RT.Agents.List()); n != 0 {
						return fmt.Errorf("%d agents left alive", n)
					}
					return nil
				}})
		case "eino", "eino-stream":
			env, err := einocase.New(ctx, name == "eino-stream")
			if err != nil {
				cleanup()
				return nil, nil, err
			}
			impls = append(impls, &impl{name: name, op: env.Delegation,
				check: func() error {
					if n := env.Failures(); n > 0 {
						return fmt.Errorf("%d unexpected model inputs", n)
					}
					return nil
				}})
		default:
			cleanup()
			return nil, nil, fmt.Errorf("unknown implementation %q", name)
		}
	}
	if len(impls) < 2 {
		cleanup()
		return nil, nil, fmt.Errorf("need at least two implementations, the first is compared with the others")
	}
	return impls, cleanup, nil
}

func einoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/cloudwego/eino" {
				return d.Version
			}
		}
	}
	return "unknown"
}
