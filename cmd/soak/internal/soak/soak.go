// Package soak runs many delegations through spawn, fork and acp children
// with cancellations at random phases, then checks that nothing leaked and
// every session is intact. The soak test and cmd/soak both drive it.
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/tool"
)

// Config sets up a soak run.
type Config struct {
	Delegations int    // how many to start (default 2000)
	Concurrency int    // how many at once (default 8)
	Dir         string // sessions folder (required)
	// DshBinary, when set, adds acp children running this dsh in acp mode
	// (ACPShare of the delegations, default 5%).
	DshBinary string
	ACPShare  float64
	Seed      uint64
	Log       *slog.Logger
}

// Phase is when a delegation is cancelled.
type Phase string

// The cancellation phases.
const (
	Never       Phase = "never"
	BeforeReady Phase = "before-ready"
	DuringTool  Phase = "during-tool"
	DuringText  Phase = "during-stream"
	AfterSettle Phase = "after-settle"
)

var phases = [...]Phase{Never, BeforeReady, DuringTool, DuringText, AfterSettle}

// Report says what happened.
type Report struct {
	Started, FailedToStart int
	ByReason               map[subagent.StopReason]int
	ByProvider             map[string]int
	Elapsed                time.Duration
	Sessions               int // session files reloaded and checked
}

func (r Report) String() string {
	return fmt.Sprintf("%d delegations started, %d refused or cancelled before ready, in %s; stop reasons %v; providers %v; %d session files reloaded and balanced",
		r.Started, r.FailedToStart, r.Elapsed.Round(time.Millisecond), r.ByReason, r.ByProvider, r.Sessions)
}

// Child prompts: the child model answers by prompt.
const (
	promptQuick = "quick"
	promptTool  = "use the tool"
	promptSlow  = "stream slowly"
)

// childModel answers children; parents never call it.
func childModel() llm.Model {
	return llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		last := req.Messages[len(req.Messages)-1]
		var e scripted.Entry
		switch text := content.JoinText(last.Content); {
		case last.Source.Kind == content.SourceTool:
			e = scripted.Text("tool finished")
		case strings.HasPrefix(text, promptTool):
			e = scripted.ToolCalls("", scripted.Call{Name: "wait", Arguments: `{}`})
		case strings.HasPrefix(text, promptSlow):
			e = scripted.Hang("partial ")
		default:
			e = scripted.Text("done")
		}
		return scripted.New(e).Stream(ctx, req)
	})
}

// Run performs the soak and checks its invariants: every accepted run has
// exactly one start and one end event, and afterwards every session file
// reloads balanced. Leaked goroutines and processes are for the caller to
// check (the test uses goleak and /proc).
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Delegations == 0 {
		cfg.Delegations = 2000
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 8
	}
	if cfg.ACPShare == 0 {
		cfg.ACPShare = 0.05
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	rt, err := dsh.New(dsh.Options{Logger: cfg.Log, Backend: jsonl.New(cfg.Dir)})
	if err != nil {
		return Report{}, err
	}
	defer rt.Close(context.Background())

	rt.LLM.Register("soak", childModel())
	rt.Tools.Register(tool.Definition{Name: "wait", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		select {
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		case <-time.After(time.Duration(rand.IntN(3)) * time.Millisecond):
			return tool.TextResult("waited"), nil
		}
	}})
	providers := []string{"spawn", "fork"}
	for _, p := range []inproc.Config{{Name: "spawn", Agents: rt.Agents}, {Name: "fork", Agents: rt.Agents, Fork: true}} {
		prov, _ := inproc.New(p)
		rt.Subagents.Register(prov)
	}
	if cfg.DshBinary != "" {
		srv := llmtest.Start(func(r llmtest.Request) llmtest.Reply {
			if strings.HasPrefix(r.LastUser, promptSlow) {
				return llmtest.Reply{Text: "partial ", Hang: true}
			}
			return llmtest.Reply{Text: "done"}
		})
		defer srv.Close()
		prov, err := acpchild.New(acpchild.Config{Options: childproc.Options{Name: "acp", Command: cfg.DshBinary, Args: []string{"acp"},
			Env:           map[string]string{"DSH_HOME": filepath.Join(cfg.Dir, "acp-home"), "DEEPSEEK_API_KEY": "sk-soak", "DEEPSEEK_BASE_URL": srv.URL},
			ChildTimeouts: subagent.ChildTimeouts{EOFGrace: 500 * time.Millisecond, TermGrace: 500 * time.Millisecond, CancelGrace: 2 * time.Second}}})
		if err != nil {
			return Report{}, err
		}
		rt.Subagents.Register(prov)
	}

	var mu sync.Mutex
	started := map[string]subagent.RunInfo{}
	var problems []string
	event.On(rt.Events, func(e subagent.Started) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := started[e.RunID]; dup {
			problems = append(problems, "run "+e.RunID+" started twice")
		}
		started[e.RunID] = e.RunInfo
	})
	ended := map[string]bool{}
	event.On(rt.Events, func(e subagent.Ended) {
		mu.Lock()
		defer mu.Unlock()
		if info, ok := started[e.RunID]; !ok || info != e.RunInfo {
			problems = append(problems, "run "+e.RunID+" ended without a matching start")
		}
		if ended[e.RunID] {
			problems = append(problems, "run "+e.RunID+" ended twice")
		}
		ended[e.RunID] = true
	})

	// Parents with one completed turn each, so that fork children inherit.
	parents := make([]*agent.Agent, cfg.Concurrency)
	for i := range parents {
		rt.LLM.Register(fmt.Sprintf("parent-%d", i), scripted.Repeat(scripted.Text("noted")))
		a, err := rt.Agents.Create(ctx, agent.CreateOptions{Cwd: cfg.Dir, Options: agent.Options{Provider: fmt.Sprintf("parent-%d", i)}})
		if err != nil {
			return Report{}, err
		}
		if _, err := a.Run(ctx, content.UserText("remember this")); err != nil {
			return Report{}, err
		}
		parents[i] = a
	}

	type job struct {
		provider string
		phase    Phase
		prompt   string
		delay    time.Duration
	}
	jobs := make(chan job)
	report := Report{ByReason: map[subagent.StopReason]int{}, ByProvider: map[string]int{}}
	begin := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Concurrency {
		wg.Go(func() {
			parent := parents[w]
			for j := range jobs {
				// Children of these parents run on the soak model.
				opts := agent.Options{Provider: "soak"}
				jctx, cancel := context.WithCancel(ctx)
				if j.phase == BeforeReady {
					go func() { time.Sleep(j.delay); cancel() }()
				}
				run, err := rt.Subagents.Start(jctx, j.provider, subagent.StartRequest{Prompt: []content.Block{content.Text(j.prompt)},
					Parent: parent, AgentOptions: &opts, Label: string(j.phase)})
				mu.Lock()
				if err != nil {
					report.FailedToStart++
					mu.Unlock()
					cancel()
					continue
				}
				report.Started++
				report.ByProvider[j.provider]++
				mu.Unlock()
				switch j.phase {
				case DuringTool, DuringText:
					go func() { time.Sleep(j.delay); cancel() }()
				}
				res, err := run.Wait(context.Background())
				if j.phase == AfterSettle {
					cancel()
				}
				derr := run.Dispose(context.Background())
				cancel()
				mu.Lock()
				if err != nil || derr != nil {
					problems = append(problems, fmt.Sprintf("run %s: wait %v, dispose %v", run.ID(), err, derr))
				}
				report.ByReason[res.StopReason]++
				mu.Unlock()
			}
		})
	}
	for range cfg.Delegations {
		j := job{provider: providers[rng.IntN(len(providers))], phase: phases[rng.IntN(len(phases))],
			delay: time.Duration(rng.IntN(2000)) * time.Microsecond}
		if cfg.DshBinary != "" && rng.Float64() < cfg.ACPShare {
			j.provider = "acp"
		}
		switch j.phase {
		case DuringTool:
			j.prompt = promptTool
		case DuringText:
			j.prompt = promptSlow
		default:
			j.prompt = []string{promptQuick, promptTool}[rng.IntN(2)]
		}
		if j.provider == "acp" && j.phase == DuringTool {
			j.prompt = promptSlow // the acp child's model has no tool
		}
		select {
		case jobs <- j:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	report.Elapsed = time.Since(begin)
	for _, a := range parents {
		if err := a.Dispose(context.Background()); err != nil {
			problems = append(problems, "dispose parent: "+err.Error())
		}
	}
	mu.Lock()
	if len(started) != report.Started || len(ended) != report.Started {
		problems = append(problems, fmt.Sprintf("%d runs accepted but %d start and %d end events", report.Started, len(started), len(ended)))
	}
	mu.Unlock()
	n, err := checkSessions(cfg.Dir)
	report.Sessions = n
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return report, errors.New(strings.Join(problems, "\n"))
	}
	return report, nil
}

// checkSessions reloads every session file under dir and checks that its
// log is balanced once repaired (nothing should need repair).
func checkSessions(dir string) (int, error) {
	store := session.NewStore(jsonl.New(dir), nil)
	headers, err := store.List()
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, h := range headers {
		_, events, err := store.Read(h.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := session.CheckBalanced(events); err != nil {
			errs = append(errs, fmt.Errorf("session %s: %w", h.ID, err))
		}
		if n := len(events); n > 0 && events[n-1].Type == session.TypeTurnEnd {
			if end := events[n-1].Data.(session.TurnEnd); end.Reason.Kind == session.EndInterrupted {
				errs = append(errs, fmt.Errorf("session %s was left with an interrupted turn", h.ID))
			}
		}
	}
	return len(headers), errors.Join(errs...)
}
