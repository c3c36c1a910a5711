// Command guard checks the figures a feature can quietly make worse against
// thresholds written in one place (limits below), as quantities that stay
// put on a loaded 2-core machine: bytes and allocation counts, never wall
// time. It exits 1 naming every figure over its limit, and 2 when a check
// cannot run. It takes well under a minute with a warm build cache.
//
//   - fan-out: live heap + goroutine stacks per parked child, N = 1,000
//     background children through the subagent tool (`go run ./cmd/fanout
//     -n 1000`, read from its json line);
//   - eino: bytes allocated per delegation, dsh / eino agent-as-tool (`go
//     run ./cmd/compare -json`, one short run);
//   - default road: allocations and bytes per delegation of the runtime a
//     default `dsh run` builds (config.Default: JSONL sessions, continuable
//     spawn through the subagent tool), measured here: a parent turn whose
//     model calls the subagent tool once, the child answering at once.
//
// A limit is the figure measured when it was set plus about 10 % (the
// project's rule: no more than 10 % slower or bigger); when a change makes a
// figure smaller, lower its limit in the same commit.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
)

// The limits, the one place they are written (issue 33's targets in the
// comments: the limits are today's figures plus ~10 %, to be lowered as
// the cuts land).
const (
	// Live heap + stacks per parked fan-out child, bytes (target ≤ 10 KB;
	// 11,190–11,240 B after BENCHMARKS.md §12, 10,251–10,255 B after §15).
	maxFanoutPerChild = 11_300
	// Bytes per delegation, dsh / eino agent-as-tool (target ≤ 0.30; 0.341
	// after §7.10, 0.298 after §13, 0.286–0.287 after §15).
	maxEinoByteRatio = 0.32
	// Allocations per default-road delegation (532 after §7.10; 512 after
	// §11, a child's session in its parent's file; 474–476 after §13 alone;
	// 330–331 after §16, lines encoded without reflection; 325 with §15 too).
	maxRoadAllocs = 365
	// Bytes allocated per default-road delegation (214 KB after §7.10,
	// 210 KB after §13, 40–42 KB after §16; 39.3 KB with §15 too).
	maxRoadBytes = 46_500
)

// limit is one checked figure.
type limit struct {
	name     string
	got, max float64
	unit     string
	err      error
}

func main() {
	only := flag.String("only", "fanout,eino,road", "checks to run, comma separated: fanout, eino, road")
	flag.Parse()
	t0 := time.Now()
	var checks []limit
	for _, name := range strings.Split(*only, ",") {
		switch name {
		case "fanout":
			got, err := fanout()
			checks = append(checks, limit{name: "fan-out heap+stacks per live child (N=1,000)", got: got, max: maxFanoutPerChild, unit: "B", err: err})
		case "eino":
			got, err := einoRatio()
			checks = append(checks, limit{name: "bytes per delegation, dsh/eino", got: got, max: maxEinoByteRatio, unit: "×", err: err})
		case "road":
			allocs, bytes, err := road(context.Background(), 30)
			checks = append(checks,
				limit{name: "default-road delegation: allocations", got: allocs, max: maxRoadAllocs, unit: "allocs", err: err},
				limit{name: "default-road delegation: bytes", got: bytes, max: maxRoadBytes, unit: "B", err: err})
		default:
			fmt.Fprintf(os.Stderr, "guard: unknown check %q (want fanout, eino, road)\n", name)
			os.Exit(2)
		}
	}
	fmt.Print(report(checks))
	fmt.Printf("guard: %s, %s\n", time.Since(t0).Round(time.Second), runtime.Version())
	os.Exit(verdict(checks))
}

// report renders one line per check: ok, OVER (with how far and what to
// do) or ERROR.
func report(checks []limit) string {
	var sb strings.Builder
	for _, c := range checks {
		switch {
		case c.err != nil:
			fmt.Fprintf(&sb, "ERROR %-46s %v\n", c.name, c.err)
		case c.got > c.max:
			fmt.Fprintf(&sb, "OVER  %-46s %12.3f %s, limit %.3f (+%.1f %%): a change made it bigger; find the cause (BENCHMARKS.md §7) or, if it is wanted, raise the limit in bench/cmd/guard\n",
				c.name, c.got, c.unit, c.max, 100*(c.got/c.max-1))
		default:
			fmt.Fprintf(&sb, "ok    %-46s %12.3f %s, limit %.3f\n", c.name, c.got, c.unit, c.max)
		}
	}
	return sb.String()
}

// verdict is the exit code: 2 when a check could not run, 1 when a figure
// is over its limit, else 0.
func verdict(checks []limit) int {
	code := 0
	for _, c := range checks {
		switch {
		case c.err != nil:
			return 2
		case c.got > c.max:
			code = 1
		}
	}
	return code
}

// goRun runs another command of this module and returns its stdout.
func goRun(args ...string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"run"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go run %s: %v\n%.2000s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// fanout returns the live heap + stacks per parked child at N = 1,000.
func fanout() (float64, error) {
	out, err := goRun("./cmd/fanout", "-n", "1000", "-think", "1s")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "json: "); ok {
			var v struct {
				PerChild float64 `json:"heap_stack_per_child_b"`
				Settled  bool    `json:"settled"`
			}
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				return 0, fmt.Errorf("fanout: %w", err)
			}
			if !v.Settled {
				return 0, errors.New("fanout: the children did not settle")
			}
			return v.PerChild, nil
		}
	}
	return 0, fmt.Errorf("fanout printed no json line:\n%.2000s", out)
}

// einoRatio returns dsh's bytes per delegation over eino's.
func einoRatio() (float64, error) {
	out, err := goRun("./cmd/compare", "-json", "-runs", "1", "-rounds", "20", "-warmup", "3", "-batch", "10", "-impls", "dsh,eino")
	if err != nil {
		return 0, err
	}
	var v struct {
		Ratios []struct {
			Versus string  `json:"versus"`
			Bytes  float64 `json:"bytes"`
		} `json:"ratios"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &v); err != nil || len(v.Ratios) != 1 || v.Ratios[0].Versus != "eino" {
		return 0, fmt.Errorf("compare printed %.500q (%v)", out, err)
	}
	return v.Ratios[0].Bytes, nil
}

// road returns the allocations and bytes per delegation of n default-road
// delegations, after a warm-up.
func road(ctx context.Context, n int) (allocs, bytes float64, err error) {
	home, err := os.MkdirTemp("", "dsh-guard-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(home)
	getenv := func(k string) string {
		switch k {
		case "DSH_HOME", "HOME":
			return home
		}
		return ""
	}
	var bad atomic.Int64
	cfg := config.Default(getenv)
	cfg.ModelOverride = llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		e := scripted.ToolCalls("", scripted.Call{ID: "call_1", Name: "subagent", Arguments: `{"description":"guard","prompt":"do X"}`})
		last := req.Messages[len(req.Messages)-1]
		switch _, _, child := prompt.SplitChildTask(content.JoinText(req.Messages[0].Content)); {
		case child:
			e = scripted.Text("child answer")
		case last.Source.Kind == content.SourceTool:
			if text := content.JoinText(last.Content[0].Content); !strings.HasSuffix(text, "child answer") {
				bad.Add(1)
			}
			e = scripted.Text("parent done")
		}
		return scripted.New(e).Stream(ctx, req)
	})
	rt, err := cfg.Build(ctx, slog.New(slog.DiscardHandler), nil, getenv)
	if err != nil {
		return 0, 0, err
	}
	defer rt.Close(ctx)
	one := func() error {
		parent, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: home, Options: agent.Options{Provider: cfg.Models[0].Name}})
		if err != nil {
			return err
		}
		end, err := parent.Run(ctx, content.UserText("delegate"))
		if err == nil && end.Reason.Kind != session.EndCompleted {
			err = fmt.Errorf("parent turn ended %+v", end.Reason)
		}
		return errors.Join(err, parent.Dispose(ctx))
	}
	for range 3 {
		if err := one(); err != nil {
			return 0, 0, err
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		if err := one(); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	if b := bad.Load(); b > 0 {
		return 0, 0, fmt.Errorf("%d tool results were not the child's answer", b)
	}
	return float64(after.Mallocs-before.Mallocs) / float64(n), float64(after.TotalAlloc-before.TotalAlloc) / float64(n), nil
}
