// Command fanout starts N concurrent background children from one parent
// and measures the fan-out at scale: the time to start them all, the time
// until all have settled, peak RSS, RSS and heap per live child, and the
// goroutine count before, at the peak and after every child is disposed
// (which must be back to the baseline: the command exits 1 if not).
//
// Each child's model call "thinks" for a fixed time (-think; the sleep
// honours cancellation) and then answers with the reference's 5-chunk
// stream. The runtime is dsh.New with the memory store (the default, which
// keeps every finished child's log in the heap) or -store null.
//
// -path tool (default) starts every child through the real subagent tool
// with run_in_background: the tool's Execute is called on a tool scope with
// the parent as caller, as the agent loop does for a model's tool call; the
// task runtime's per-owner cap is raised to N (dsh.Options.MaxTasksPerOwner).
// -path service calls rt.Subagents.Start directly and waits in a goroutine
// per child.
//
// With several values of -n, each N runs in a fresh process (this binary
// re-executed), so that RSS figures are not disturbed by an earlier run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/bench/internal/dshcase"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

func main() {
	ns := flag.String("n", "1000,10000", "numbers of concurrent children, comma separated (each in a fresh process)")
	think := flag.Duration("think", 2*time.Second, "each child's model call sleeps this long before answering (long enough that all N are alive at once)")
	path := flag.String("path", "tool", "how children start: tool (the subagent tool, run_in_background) or service (rt.Subagents.Start)")
	store := flag.String("store", "memory", "session store: memory (keeps every log), null (keeps nothing)")
	runs := flag.Int("runs", 1, "runs per N, each in a fresh process")
	heapProfile := flag.String("heapprofile", "", "write a heap profile here while all N children are parked (one N, one run)")
	goroutines := flag.String("goroutines", "", "write the goroutine stacks here (text, identical stacks counted once) while all N children are parked (one N, one run)")
	memRate := flag.Int("memprofilerate", 0, "runtime.MemProfileRate for -heapprofile (1 counts every allocation; 0 keeps the runtime's default)")
	flag.Parse()
	if *memRate > 0 {
		runtime.MemProfileRate = *memRate
	}
	list := strings.Split(*ns, ",")
	if len(list) > 1 || *runs > 1 {
		if *heapProfile != "" || *goroutines != "" {
			fmt.Fprintln(os.Stderr, "fanout: -heapprofile and -goroutines need a single -n and -runs 1")
			os.Exit(2)
		}
		fmt.Printf("dsh fan-out, %s %s/%s GOMAXPROCS=%d, path %s, store %s, think %s, load average %.2f\n",
			runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *path, *store, *think, measure.LoadAvg())
		failed := false
		for _, n := range list {
			for range *runs {
				cmd := exec.Command(os.Args[0], "-n", n, "-think", think.String(), "-path", *path, "-store", *store)
				cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
				if err := cmd.Run(); err != nil {
					failed = true
				}
			}
		}
		if failed {
			os.Exit(1)
		}
		return
	}
	n, err := strconv.Atoi(list[0])
	if err != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "fanout: bad -n")
		os.Exit(2)
	}
	ok, err := fanout(n, *think, *path, *store, *heapProfile, *goroutines)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// model answers a parent at once and makes a child think first.
type model struct {
	think    time.Duration
	inflight atomic.Int64
	reached  atomic.Int64
}

// The answers, built once: a parked child holds only its timer, not a copy
// of an answer it has not streamed yet.
var (
	parentAnswer = dshcase.TextAnswer(dshcase.ParentAnswer)
	childAnswer  = dshcase.TextAnswer(dshcase.ChildAnswer)
)

func (m *model) stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	answer := parentAnswer
	child := dshcase.IsChild(req)
	if child {
		answer = childAnswer
	}
	return func(yield func(content.Chunk) bool) {
		if child {
			m.reached.Add(1)
			m.inflight.Add(1)
			t := time.NewTimer(m.think)
			select {
			case <-t.C:
				m.inflight.Add(-1)
			case <-ctx.Done():
				t.Stop()
				m.inflight.Add(-1)
				yield(llm.FinishAborted(context.Cause(ctx)))
				return
			}
		}
		for _, c := range answer {
			if !yield(c) {
				return
			}
		}
	}
}

func vm(key string) uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func fanout(n int, think time.Duration, path, store, heapProfile, goroutines string) (bool, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dsh-fanout-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	backend, err := dshcase.Backend(store, dir)
	if err != nil {
		return false, err
	}
	rt, err := dsh.New(dsh.Options{Logger: dshcase.Quiet, Backend: backend, MaxTasksPerOwner: n + 1})
	if err != nil {
		return false, err
	}
	m := &model{think: think}
	if _, err := rt.LLM.Register(dshcase.Provider, llm.ModelFunc(m.stream)); err != nil {
		return false, err
	}
	sp, err := inproc.NewSpawn(rt.Agents)
	if err != nil {
		return false, err
	}
	if _, err := rt.Subagents.Register(sp); err != nil {
		return false, err
	}
	if _, err := subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events, Log: dshcase.Quiet},
		subagenttool.Config{Provider: inproc.SpawnName}); err != nil {
		return false, err
	}
	// The task tools, as dsh mounts them: a background start needs an owner
	// that could read its result (task_output).
	if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{}); err != nil {
		return false, err
	}
	parent, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: dir, Options: agent.Options{Provider: dshcase.Provider, Model: dshcase.Model}})
	if err != nil {
		return false, err
	}
	if err := dshcase.Turn(ctx, parent, dshcase.PromptDirect); err != nil {
		return false, err
	}
	scope := rt.Tools.NewScope()
	args, _ := json.Marshal(map[string]any{"description": "fan-out child", "prompt": dshcase.PromptTask, "run_in_background": true})

	h0 := measure.Settle()
	var (
		ids     = make([]string, 0, n)
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []error
		settled atomic.Int64
	)
	addErr := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	t0 := time.Now()
	var half time.Duration
	for i := range n {
		if i == n/2 {
			half = time.Since(t0)
		}
		switch path {
		case "tool":
			res := scope.Execute(ctx, tool.Call{ID: fmt.Sprintf("call_%d", i), Name: "subagent", Arguments: args, Cwd: dir, Caller: parent})
			text := content.JoinText(res.Content)
			id, ok := strings.CutPrefix(text, "started background subagent task ")
			if res.IsError || !ok {
				return false, fmt.Errorf("child %d: the tool answered %q", i, text)
			}
			ids = append(ids, id)
		case "service":
			r, err := rt.Subagents.Start(ctx, inproc.SpawnName, subagent.StartRequest{Label: "fan-out child", Prompt: []content.Block{content.Text(dshcase.PromptTask)}, Parent: parent})
			if err != nil {
				return false, fmt.Errorf("child %d: %w", i, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := r.Wait(ctx)
				if err == nil && (res.StopReason != subagent.Completed || content.JoinText(res.Output) != dshcase.ChildAnswer) {
					err = fmt.Errorf("child stopped %s: %q", res.StopReason, content.JoinText(res.Output))
				}
				if derr := r.Dispose(ctx); err == nil {
					err = derr
				}
				if err != nil {
					addErr(err)
				}
				settled.Add(1)
			}()
		default:
			return false, fmt.Errorf("unknown -path %q", path)
		}
	}
	startAll := time.Since(t0)
	secondHalf := startAll - half
	// The peak: every child has reached its model call.
	for deadline := time.Now().Add(time.Minute); m.reached.Load() < int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false, fmt.Errorf("only %d of %d children reached their model call", m.reached.Load(), n)
		}
	}
	live := m.inflight.Load()
	gPeak := runtime.NumGoroutine()
	hPeak := measure.Settle()
	if heapProfile != "" {
		if err := writeProfile(heapProfile, "heap", 0); err != nil {
			return false, err
		}
	}
	if goroutines != "" {
		if err := writeProfile(goroutines, "goroutine", 1); err != nil {
			return false, err
		}
	}
	livePeak := m.inflight.Load()
	peakAt := time.Since(t0)

	// Settle: every task (or run) finished with the child's answer.
	switch path {
	case "tool":
		for _, id := range ids {
			snap, err := rt.Tasks.Wait(ctx, id, parent, 5*time.Minute)
			if err != nil {
				return false, fmt.Errorf("task %s: %w", id, err)
			}
			out, _, err := rt.Tasks.Read(id, parent)
			if err == nil && (snap.Status != task.Completed || out.Output != dshcase.ChildAnswer) {
				err = fmt.Errorf("task %s ended %s (%s) with %q", id, snap.Status, snap.Detail, out.Output)
			}
			if err != nil {
				return false, err
			}
		}
	case "service":
		wg.Wait()
	}
	allSettled := time.Since(t0)
	if len(errs) > 0 {
		return false, fmt.Errorf("%d children failed, first: %w", len(errs), errs[0])
	}
	agentsLive := len(rt.Agents.List())
	// Children dispose themselves (tool) or were disposed (service); give
	// exiting goroutines a moment.
	var hAfter measure.Heap
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		hAfter = measure.Settle()
		if hAfter.Goroutines <= h0.Goroutines || time.Now().After(deadline) {
			break
		}
	}
	if err := parent.Dispose(ctx); err != nil {
		return false, err
	}
	if err := rt.Close(ctx); err != nil {
		return false, err
	}
	hClosed := measure.Settle()
	hwm := vm("VmHWM")

	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(livePeak) }
	back := hAfter.Goroutines == h0.Goroutines && agentsLive == 1
	linear := float64(secondHalf) / float64(half)
	fmt.Printf("\n## fan-out N=%d, path %s, store %s, think %s (%s)\n", n, path, store, think, runtime.Version())
	fmt.Printf("start all N:             %s (first half %s, second half %s: ratio %.2f, linear if ≈ 1); %.1f µs per start\n",
		startAll.Round(time.Microsecond), half.Round(time.Microsecond), secondHalf.Round(time.Microsecond), linear, stats.Micros(startAll)/float64(n))
	fmt.Printf("all settled:             %s after the first start (%s after the last; think %s)\n", allSettled.Round(time.Millisecond), (allSettled - startAll).Round(time.Millisecond), think)
	fmt.Printf("live at the peak:        %d children in their model call (%d when the last start returned), measured %s after the first start\n", livePeak, live, peakAt.Round(time.Millisecond))
	fmt.Printf("RSS:                     baseline %s, at the peak %s, peak (VmHWM) %s\n", stats.Bytes(float64(h0.RSS)), stats.Bytes(float64(hPeak.RSS)), stats.Bytes(float64(hwm)))
	fmt.Printf("RSS per live child:      %s\n", stats.Bytes(per(hPeak.RSS, h0.RSS)))
	fmt.Printf("heap per live child:     %s live heap + %s goroutine stacks = %s\n", stats.Bytes(per(hPeak.HeapAlloc, h0.HeapAlloc)),
		stats.Bytes(per(hPeak.StackInuse, h0.StackInuse)), stats.Bytes(per(hPeak.HeapAlloc+hPeak.StackInuse, h0.HeapAlloc+h0.StackInuse)))
	fmt.Printf("heap kept after settle:  %s per child (store %s)\n", stats.Bytes((float64(hAfter.HeapAlloc)-float64(h0.HeapAlloc))/float64(n)), store)
	fmt.Printf("goroutines:              before %d, at the peak %d (%.2f per child), after settle %d, after closing the runtime %d\n",
		h0.Goroutines, gPeak, float64(gPeak-h0.Goroutines)/float64(n), hAfter.Goroutines, hClosed.Goroutines)
	fmt.Printf("settled:                 %v (all %d answered; live agents %d, want 1; goroutines back to %d: %v)\n", back, n, agentsLive, h0.Goroutines, hAfter.Goroutines == h0.Goroutines)
	fmt.Printf("json: {\"n\":%d,\"path\":%q,\"store\":%q,\"start_all_ms\":%.1f,\"half_ratio\":%.2f,\"settle_ms\":%.1f,\"live_peak\":%d,\"rss_per_child_b\":%.0f,\"heap_stack_per_child_b\":%.0f,\"vmhwm_b\":%d,\"g_before\":%d,\"g_peak\":%d,\"g_after\":%d,\"settled\":%v}\n",
		n, path, store, stats.Micros(startAll)/1e3, linear, stats.Micros(allSettled)/1e3, livePeak, per(hPeak.RSS, h0.RSS),
		per(hPeak.HeapAlloc+hPeak.StackInuse, h0.HeapAlloc+h0.StackInuse), hwm, h0.Goroutines, gPeak, hAfter.Goroutines, back)
	return back, nil
}

// writeProfile writes the named runtime profile to path (debug as
// pprof.Profile.WriteTo takes it).
func writeProfile(path, name string, debug int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup(name).WriteTo(f, debug), f.Close())
}
