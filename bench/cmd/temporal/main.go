// Command temporal measures temporal children (subagent/temporal) against
// spawn and acp children, and the throughput of a fleet of two workers:
//
//   - a real Temporal server: the e2e module's testserver
//     (../subagent/temporal/e2e/testserver, built here unless -server names
//     a binary; a cold build takes about 10 minutes on 2 cores), on
//     loopback: in-memory SQLite with one history shard, or what its
//     $DSH_TESTSERVER_* settings in this process's environment ask for;
//   - two `dsh worker` processes built from ../cmd/dsh, each running up to
//     -concurrency children;
//   - one loopback model server (this process) that answers every request at
//     once, used by every child: the spawn children in this process, the
//     `dsh acp` children and the workers' children.
//
// Per child, interleaved over the providers: ready = Provider.Start (for
// temporal: the workflow started, a worker has claimed the child); result
// = Run.Wait after that (the child's one model call, and for temporal the
// log's checkpoints and the workflow's end reaching the parent); dispose =
// Run.Dispose. Then -children temporal children are started at once, and
// the time until every one has settled and been disposed gives children
// per second.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/bench/internal/dshbin"
	"github.com/dsh-go/dsh/bench/internal/dshcase"
	"github.com/dsh-go/dsh/bench/internal/loopllm"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/temporal"
)

func main() {
	runs := flag.Int("runs", 15, "recorded children per provider (after one warm-up each)")
	children := flag.Int("children", 200, "temporal children started at once for the throughput figure (0: skip)")
	concurrency := flag.Int("concurrency", 50, "children each of the two workers runs at once")
	server := flag.String("server", "", "a prebuilt testserver binary (default: build ../subagent/temporal/e2e/testserver)")
	dsh := flag.String("dsh", "", "a prebuilt dsh binary, built with the tag temporal (default: build ../cmd/dsh), e.g. to profile the workers with perf")
	history := flag.Bool("history", false, "print the workflow history of the last recorded temporal child: its events, their times, and what they cost")
	flag.Parse()
	slog.SetDefault(dshcase.Quiet) // the ACP connection logs through slog.Default
	if !tagged {
		fmt.Fprintln(os.Stderr, "temporal: this bench needs the temporal kind: go run -tags temporal ./cmd/temporal")
		os.Exit(2)
	}
	if err := run(*runs, *children, *concurrency, *server, *dsh, *history); err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
}

// sample is one provider's readings, in milliseconds.
type sample struct {
	name                  string
	ready, result, dispos []float64
}

func run(runs, children, concurrency int, server, bin string, history bool) error {
	ctx := context.Background()
	root, err := dshbin.Root()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "dsh-bench-temporal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		if bin, err = dshbin.Build(tmp, "temporal"); err != nil { // `dsh worker` is in builds with the tag only
			return err
		}
	}
	if server == "" {
		server = filepath.Join(tmp, "testserver")
		fmt.Fprintln(os.Stderr, "building the Temporal test server (minutes on a cold build cache)…")
		build := exec.Command("go", "build", "-o", server, "./testserver")
		build.Dir = filepath.Join(root, "subagent", "temporal", "e2e")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build the test server: %v\n%s", err, out)
		}
	}
	hostPort, namespace, serverPid, stop, err := startServer(server)
	if err != nil {
		return err
	}
	defer stop()
	srv := loopllm.Start("ok")
	defer srv.Close()

	yaml := fmt.Sprintf(`models:
  - {name: deepseek, baseURL: %s, apiKeyEnv: DEEPSEEK_API_KEY}
subagents:
  providers:
    - name: spawn
    - name: fleet
      kind: temporal
      temporal: {hostPort: "%s", namespace: %s, taskQueue: bench, readyTimeout: 5m}
  tools:
    - provider: spawn
    - provider: fleet
      toolName: subagent_fleet
`, srv.URL, hostPort, namespace)
	env, err := dshbin.Env(tmp, srv.URL)
	if err != nil {
		return err
	}
	configPath := filepath.Join(env["DSH_HOME"], "dsh.yaml")
	if err := os.WriteFile(configPath, []byte(yaml), 0o600); err != nil {
		return err
	}
	env["DSH_CONFIG"] = configPath
	exited := make(chan error, 2) // a worker that ends before the bench does
	var workerPids []int
	for _, name := range []string{"a", "b"} {
		w := exec.Command(bin, "worker", "--identity", name, "--concurrency", fmt.Sprint(concurrency), "--workspace", tmp)
		w.Env = dshbin.Environ(env)
		var stderr strings.Builder
		w.Stderr = &stderr
		if err := w.Start(); err != nil {
			return err
		}
		workerPids = append(workerPids, w.Process.Pid)
		done := make(chan struct{})
		go func() {
			err := w.Wait()
			select {
			case <-done:
			default:
				exited <- fmt.Errorf("dsh worker %s ended early (%v): %.2000s", name, err, stderr.String())
			}
		}()
		defer func() {
			close(done)
			w.Process.Kill()
		}()
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.Parse("bench.yaml", []byte(yaml), getenv)
	if err != nil {
		return err
	}
	rt, err := cfg.Build(ctx, dshcase.Quiet, session.NewMemoryBackend(), getenv)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	acp, err := acpchild.New(acpchild.Config{Options: childproc.Options{Name: "acp", Command: bin, Args: []string{"acp"}, Env: env}, DepthEnv: "DSH_DEPTH"})
	if err != nil {
		return err
	}
	if _, err := rt.Subagents.Register(acp); err != nil {
		return err
	}
	parent, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: tmp, Options: cfg.Agent})
	if err != nil {
		return err
	}
	fmt.Printf("temporal children vs spawn and acp, %s %s/%s GOMAXPROCS=%d, %d runs per provider, two workers × %d, load average %.2f\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runs, concurrency, measure.LoadAvg())
	fmt.Printf("test server: %s\n", serverSettings())

	var fleetIDs []string // the session ids of the temporal children
	one := func(name string) (ready, result, dispose time.Duration, err error) {
		p, _ := rt.Subagents.Provider(name)
		t0 := time.Now()
		r, err := p.Start(ctx, subagent.StartRequest{Prompt: []content.Block{content.Text("say ok")}, Parent: parent, Depth: 1})
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s: start: %w", name, err)
		}
		if name == "fleet" {
			fleetIDs = append(fleetIDs, r.ID())
		}
		ready = time.Since(t0)
		t1 := time.Now()
		res, err := r.Wait(ctx)
		result = time.Since(t1)
		if err == nil && (res.StopReason != subagent.Completed || strings.TrimSpace(content.JoinText(res.Output)) != "ok") {
			err = fmt.Errorf("%s: %s %q (%s)", name, res.StopReason, content.JoinText(res.Output), res.Diagnostic)
		}
		t2 := time.Now()
		if derr := r.Dispose(ctx); err == nil {
			err = derr
		}
		return ready, result, time.Since(t2), err
	}
	list := []*sample{{name: "spawn"}, {name: "acp"}, {name: "fleet"}}
	if err := awaitWorkers(ctx, one, exited); err != nil {
		return err
	}
	for _, s := range list { // warm-up
		if _, _, _, err := one(s.name); err != nil {
			return err
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	for i := range runs {
		for j := range list {
			s := list[(i+j)%len(list)]
			ready, result, dispose, err := one(s.name)
			if err != nil {
				return err
			}
			s.ready, s.result, s.dispos = append(s.ready, ms(ready)), append(s.result, ms(result)), append(s.dispos, ms(dispose))
		}
	}
	fmt.Printf("\n%-9s %28s %28s %22s\n", "provider", "ready ms (median, p90)", "result ms (median, p90)", "dispose ms (median)")
	for _, s := range list {
		r, w, d := stats.Of(s.ready), stats.Of(s.result), stats.Of(s.dispos)
		name := s.name
		if name == "fleet" {
			name = "temporal"
		}
		fmt.Printf("%-9s %19.2f, %7.2f %19.2f, %7.2f %22.2f\n", name, r.Median, r.P90, w.Median, w.P90, d.Median)
	}
	cluster, err := client.Dial(client.Options{HostPort: hostPort, Namespace: namespace, Logger: sdklog.NewStructuredLogger(dshcase.Quiet)})
	if err != nil {
		return err
	}
	defer cluster.Close()
	if err := printPhases(ctx, cluster, fleetIDs[len(fleetIDs)-runs:]); err != nil {
		return err
	}
	if history {
		events, err := fetchHistory(ctx, cluster, temporal.WorkflowID(fleetIDs[len(fleetIDs)-1]))
		if err != nil {
			return err
		}
		fmt.Printf("\nhistory of the last temporal child (ms after its workflow's start):\n")
		printHistory(events)
	}
	if children > 0 {
		p, _ := rt.Subagents.Provider("fleet")
		procs := map[string][]int{"server": {serverPid}, "workers": workerPids, "bench": {os.Getpid()}}
		return throughput(ctx, p, parent, children, concurrency, procs, cluster)
	}
	return nil
}

// awaitWorkers retries a temporal child until the workers poll, and stops
// at once, with the worker's words, when one has ended.
func awaitWorkers(ctx context.Context, one func(string) (time.Duration, time.Duration, time.Duration, error), exited <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-exited:
			return err
		default:
		}
		_, _, _, err := one("fleet")
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// throughput starts n temporal children at once and reports how many
// settle per second, and the CPU time each group of procs used meanwhile.
func throughput(ctx context.Context, p subagent.Provider, parent *agent.Agent, n, concurrency int, procs map[string][]int, cluster client.Client) error {
	cpu := func() map[string]time.Duration {
		m := map[string]time.Duration{}
		for name, pids := range procs {
			for _, pid := range pids {
				m[name] += cpuTime(pid)
			}
		}
		return m
	}
	cpu0 := cpu()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ids := make([]string, n)
	t0 := time.Now()
	for i := range n {
		wg.Go(func() {
			r, err := p.Start(ctx, subagent.StartRequest{Prompt: []content.Block{content.Text(fmt.Sprintf("child %d: say ok", i))}, Parent: parent, Depth: 1})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = r.ID()
			defer r.Dispose(ctx)
			if res, err := r.Wait(ctx); err != nil || res.StopReason != subagent.Completed {
				errs <- &childError{id: r.ID(), err: fmt.Errorf("child %d: %v %s %s", i, err, res.StopReason, res.Diagnostic)}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		if ce, ok := err.(*childError); ok {
			if events, herr := fetchHistory(ctx, cluster, temporal.WorkflowID(ce.id)); herr == nil {
				fmt.Printf("\nhistory of the failed child (ms after its workflow's start):\n")
				printHistory(events)
			}
		}
		return err
	}
	cpu1 := cpu()
	fmt.Printf("\n%d temporal children started at once, two workers × %d: all settled and disposed in %.2f s: %.1f children/s (load average %.2f)\n",
		n, concurrency, elapsed.Seconds(), float64(n)/elapsed.Seconds(), measure.LoadAvg())
	fmt.Printf("CPU time meanwhile, per child (Linux):")
	for _, name := range []string{"server", "workers", "bench"} {
		fmt.Printf(" %s %.1f ms", name, float64((cpu1[name]-cpu0[name]).Microseconds())/1e3/float64(n))
	}
	fmt.Println()
	return printPhases(ctx, cluster, ids)
}

// serverSettings names the test server's settings that the environment
// gives it ($DSH_TESTSERVER_*), so that each figure says which server it is
// of.
func serverSettings() string {
	var set []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DSH_TESTSERVER_") {
			set = append(set, kv)
		}
	}
	if len(set) == 0 {
		return "the default (temporaltest: in-memory SQLite, one history shard)"
	}
	slices.Sort(set)
	return strings.Join(set, " ")
}

// childError is a child of the burst that did not complete.
type childError struct {
	id  string
	err error
}

func (e *childError) Error() string { return e.err.Error() }

// startServer runs the test server and returns its address, namespace and
// process id.
func startServer(path string) (hostPort, namespace string, pid int, stop func(), err error) {
	cmd := exec.Command(path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", "", 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", "", 0, nil, err
	}
	stop = func() {
		stdin.Close()
		cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if _, serr := fmt.Sscan(line, &hostPort, &namespace); err != nil || serr != nil {
		stop()
		return "", "", 0, nil, fmt.Errorf("the test server said %q: %v %v", line, err, serr)
	}
	return hostPort, namespace, cmd.Process.Pid, stop, nil
}

// fetchHistory returns the workflow history of one child.
func fetchHistory(ctx context.Context, c client.Client, workflowID string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, nil
}

// printHistory prints the workflow history of one child: each event with
// its time after the workflow started, then what the child cost the
// cluster (workflow tasks, activity tasks, updates).
func printHistory(events []*historypb.HistoryEvent) {
	var t0 time.Time
	count := map[enumspb.EventType]int{}
	for _, e := range events {
		at := e.GetEventTime().AsTime()
		if t0.IsZero() {
			t0 = at
		}
		count[e.GetEventType()]++
		name := strings.TrimPrefix(e.GetEventType().String(), "EVENT_TYPE_")
		if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
			name += " " + a.GetAcceptedRequest().GetMeta().GetUpdateId()
		}
		fmt.Printf("  %3d %8.1f  %s\n", e.GetEventId(), float64(at.Sub(t0).Microseconds())/1e3, name)
	}
	fmt.Printf("%d events: %d workflow tasks, %d activity tasks, %d updates\n", len(events), count[enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED],
		count[enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED], count[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED])
}

// The phases of a child's workflow, from its history.
var phaseNames = []string{"first workflow task queued", "its run", "activity queued", "activity start → claim", "claim → activity end",
	"activity end → workflow end", "whole"}

// phases returns, in milliseconds, the phases of a child's workflow: its
// first workflow task waiting for a worker (scheduled → started) and
// running there (started → completed: the worker's work and the round
// trips), its activity waiting for a worker, from the activity's start to
// the claim (the child built, its first checkpoint accepted), from there to
// the activity's end (the model call, the outcome), from there to the
// workflow's end (the last workflow task), and the whole workflow.
func phases(events []*historypb.HistoryEvent) map[string]float64 {
	out := map[string]float64{}
	at := map[int64]time.Time{}
	ms := func(from, to time.Time) float64 { return float64(to.Sub(from).Microseconds()) / 1e3 }
	var actStart, claim time.Time
	for _, e := range events {
		t := e.GetEventTime().AsTime()
		at[e.GetEventId()] = t
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if _, ok := out["first workflow task queued"]; !ok {
				out["first workflow task queued"] = ms(at[e.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()], t)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if _, ok := out["its run"]; !ok {
				out["its run"] = ms(at[e.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId()], t)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			actStart = t
			out["activity queued"] = ms(at[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()], t)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			if claim.IsZero() {
				claim = t
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if !claim.IsZero() {
				out["claim → activity end"] = ms(claim, t)
			}
			at[-1] = t
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			out["activity end → workflow end"] = ms(at[-1], t)
			out["whole"] = ms(at[1], t)
		}
	}
	if !claim.IsZero() && !actStart.IsZero() { // the activity's start is recorded with its end
		out["activity start → claim"] = ms(actStart, claim)
	}
	return out
}

// printPhases prints the median and p90 of each phase over the children's
// workflows.
func printPhases(ctx context.Context, c client.Client, ids []string) error {
	all := map[string][]float64{}
	for _, id := range ids {
		events, err := fetchHistory(ctx, c, temporal.WorkflowID(id))
		if err != nil {
			return err
		}
		for name, v := range phases(events) {
			all[name] = append(all[name], v)
		}
	}
	fmt.Printf("temporal children's workflows, from their histories (ms, median / p90 over %d children):", len(ids))
	for _, name := range phaseNames {
		st := stats.Of(all[name])
		fmt.Printf(" %s %.1f / %.1f;", name, st.Median, st.P90)
	}
	fmt.Println()
	return nil
}
