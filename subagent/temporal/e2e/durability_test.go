package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// stepModel is a loopback model that counts its requests per step of the
// child's turn (a step is known by the tool results the request holds):
// steps 0 and 1 each run a bash command that appends to a file of the
// workspace, step 2 answers. The first request of step 2 hangs, and
// inFlight is closed when it arrives.
type stepModel struct {
	mu       sync.Mutex
	counts   map[int]int
	inFlight chan struct{}
}

func newStepModel() *stepModel {
	return &stepModel{counts: map[int]int{}, inFlight: make(chan struct{})}
}

func (m *stepModel) reply(req llmtest.Request) llmtest.Reply {
	step := len(req.ToolResults)
	m.mu.Lock()
	m.counts[step]++
	n := m.counts[step]
	m.mu.Unlock()
	switch step {
	case 0, 1:
		return llmtest.Reply{Reasoning: "work", Text: fmt.Sprintf("step %d", step), ToolCall: &llmtest.ToolCall{Name: "bash",
			Arguments: fmt.Sprintf(`{"command":"echo ran >> step%d.txt && echo did step %d"}`, step, step)}}
	}
	if n == 1 {
		close(m.inFlight)
		return llmtest.Reply{Text: "thinking…", Hang: true}
	}
	return llmtest.Reply{Text: "all three steps done"}
}

func (m *stepModel) count() map[int]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]int{}
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

// durableRun starts the step model's child on worker a, and once its model
// call of step 2 is in flight, stops a with sig (worker b is up by then).
// The child must finish on b with a normal result, having done steps 0 and
// 1 once and repeated only step 2, its log whole in the parent's store.
func durableRun(t *testing.T, sig syscall.Signal) {
	model := newStepModel()
	f := newFleet(t, model.reply)
	a := f.worker("a", 2)
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	bus := event.New(nil)
	var mu sync.Mutex
	var progress []string
	bus.Subscribe(func(e event.Event) {
		if p, ok := e.(subagent.ProgressEvent); ok && p.Kind == subagent.ProgressToolCall {
			mu.Lock()
			progress = append(progress, p.Tool)
			mu.Unlock()
		}
	})
	svc := subagent.NewService(bus, nil)
	if _, err := svc.Register(f.provider(t, parent.Sessions)); err != nil {
		t.Fatal(err)
	}
	run, err := svc.Start(context.Background(), "fleet", subagent.StartRequest{Parent: parent.Agent, Prompt: subagenttest.Prompt("durable")})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Dispose(context.Background())
	<-model.inFlight
	f.worker("b", 2)
	a.kill(t, sig)
	switch sig {
	case syscall.SIGTERM:
		if err := a.wait(); err != nil {
			t.Errorf("worker a stopped with %v, want a clean exit:\n%s", err, a.stderr.String())
		}
	case syscall.SIGKILL:
		a.wait()
	}
	res, err := run.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "all three steps done" || len(res.Usage) == 0 {
		t.Fatalf("result %+v: want completed with the last step's answer and usage", res)
	}
	if got := model.count(); got[0] != 1 || got[1] != 1 || got[2] != 2 {
		t.Errorf("model requests per step %v: want steps 0 and 1 once, the in-flight step 2 twice", got)
	}
	for _, name := range []string{"step0.txt", "step1.txt"} {
		if b, err := os.ReadFile(filepath.Join(f.work, name)); err != nil || string(b) != "ran\n" {
			t.Errorf("%s holds %q (%v): want one run", name, b, err)
		}
	}
	if s := status(t, run.ID()); s != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("workflow status %s", s)
	}
	// The parent's store holds the child's whole log, with its lineage.
	h, events, err := parent.Sessions.Read(run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if h.ParentSession != parent.Agent.ID() || h.DelegationDepth != 1 || h.Origin != session.OriginSubagent {
		t.Errorf("the child's header %+v", h)
	}
	if err := session.CheckBalanced(events); err != nil {
		t.Errorf("the child's log: %v", err)
	}
	var bashRuns int
	for _, e := range events {
		if c, ok := e.Data.(session.ToolCall); ok && c.Name == "bash" {
			bashRuns++
		}
	}
	if bashRuns != 2 {
		t.Errorf("the log holds %d bash calls, want 2", bashRuns)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(progress, []string{"bash", "bash"}) {
		t.Errorf("tool-call progress on the parent's bus: %v", progress)
	}
}

// A worker killed with SIGKILL mid-child: the child finishes on another
// worker once the first one's heartbeat is missed.
func TestDurableAcrossSIGKILL(t *testing.T) { durableRun(t, syscall.SIGKILL) }

// A worker stuck (SIGSTOP) mid-child is taken for dead: the child finishes
// on another worker.
func TestDurableAcrossAStuckWorker(t *testing.T) { durableRun(t, syscall.SIGSTOP) }

// A worker stopped with SIGTERM hands its child back at once: the child
// finishes on another worker, and the stopped worker exits cleanly.
func TestHandBackOnSIGTERM(t *testing.T) { durableRun(t, syscall.SIGTERM) }
