package task_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// envConfig configures newEnv.
type envConfig struct {
	MaxPerOwner int
	Tools       *task.ToolOptions // nil: the task tools are not mounted
	Script      []scripted.Entry  // the agents' model
}

// env is a dsh runtime with a scripted model and a recorder of task.Done
// events. When the tools are mounted, the recorder is subscribed after them,
// so a recorded Done means its notice was already delivered.
type env struct {
	t     *testing.T
	rt    *dsh.Runtime
	model *scripted.Model
	done  *recorder
}

func newEnv(t *testing.T, cfg envConfig) *env {
	t.Helper()
	rt, err := dsh.New(dsh.Options{MaxTasksPerOwner: cfg.MaxPerOwner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	e := &env{t: t, rt: rt, model: scripted.New(cfg.Script...)}
	if _, err := rt.LLM.Register("test", e.model); err != nil {
		t.Fatal(err)
	}
	if cfg.Tools != nil {
		if _, err := task.Mount(rt.Tasks, rt.Tools, rt.Prompt, *cfg.Tools); err != nil {
			t.Fatal(err)
		}
	}
	e.done = record(rt.Events)
	t.Cleanup(e.done.stop)
	return e
}

// agent creates an agent on the scripted model.
func (e *env) agent() *agent.Agent {
	e.t.Helper()
	a, err := e.rt.Agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// call executes a task tool on behalf of a.
func call(a *agent.Agent, name, args string) tool.Result {
	return a.Tools().Execute(context.Background(), tool.Call{ID: "call-1", Name: name, Arguments: json.RawMessage(args), Caller: a})
}

func text(r tool.Result) string { return content.JoinText(r.Content) }

// recorder records task.Done events.
type recorder struct {
	mu     sync.Mutex
	events []task.Done
	ch     chan task.Done
	stop   func()
}

func record(bus *event.Bus) *recorder {
	r := &recorder{ch: make(chan task.Done, 128)}
	r.stop = event.On(bus, func(d task.Done) {
		r.mu.Lock()
		r.events = append(r.events, d)
		r.mu.Unlock()
		r.ch <- d
	})
	return r
}

// all returns the Done events recorded so far.
func (r *recorder) all() []task.Done {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]task.Done(nil), r.events...)
}

// of returns the Done events recorded for task id.
func (r *recorder) of(id string) []task.Done {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []task.Done
	for _, d := range r.events {
		if d.Task.ID == id {
			out = append(out, d)
		}
	}
	return out
}

// next returns the next recorded Done event, which must be for id.
func (r *recorder) next(t *testing.T, id string) task.Done {
	t.Helper()
	d := <-r.ch
	if d.Task.ID != id {
		t.Fatalf("Done for %s, want %s", d.Task.ID, id)
	}
	return d
}

// producer is a controllable task body. It ends with the outcome sent on
// finish, or, once its ctx is cancelled, records the cause, waits for hold
// and reports killed with the KillError's reason as detail.
type producer struct {
	finish    chan task.Outcome
	hold      chan struct{}
	holdOnce  sync.Once
	ran       chan struct{} // closed when Run is called
	cancelled chan struct{} // closed once the producer saw its ctx cancelled
	cause     error         // the ctx's cause, set before cancelled closes
}

// newProducer returns a producer; holding makes it wait for release after
// cancellation before it reports its outcome.
func newProducer(t *testing.T, holding bool) *producer {
	p := &producer{finish: make(chan task.Outcome, 1), hold: make(chan struct{}), ran: make(chan struct{}),
		cancelled: make(chan struct{})}
	if !holding {
		p.release()
	}
	t.Cleanup(p.release)
	return p
}

func (p *producer) release() { p.holdOnce.Do(func() { close(p.hold) }) }

func (p *producer) Run(ctx context.Context, done func(task.Outcome)) {
	close(p.ran)
	go func() {
		select {
		case out := <-p.finish:
			done(out)
		case <-ctx.Done():
			p.cause = context.Cause(ctx)
			close(p.cancelled)
			<-p.hold
			out := task.Outcome{Status: task.Killed}
			if ke := (*task.KillError)(nil); errors.As(p.cause, &ke) {
				out.Detail = ke.Reason
			}
			done(out)
		}
	}()
}

func (p *producer) complete(output string) {
	p.finish <- task.Outcome{Status: task.Completed, Output: output}
}

// wasCancelled reports whether the producer has seen its ctx cancelled.
func (p *producer) wasCancelled() bool {
	select {
	case <-p.cancelled:
		return true
	default:
		return false
	}
}

// killReason returns the reason of the KillError the producer was cancelled
// with; the producer must have been cancelled.
func (p *producer) killReason(t *testing.T) string {
	t.Helper()
	<-p.cancelled
	var ke *task.KillError
	if !errors.As(p.cause, &ke) {
		t.Fatalf("cancel cause %v (%T), want a *task.KillError", p.cause, p.cause)
	}
	return ke.Reason
}

func spec(kind, label string, owner *agent.Agent, p *producer) task.Spec {
	return task.Spec{Kind: kind, Label: label, Owner: owner, Run: p.Run}
}

func start(t *testing.T, r *task.Runtime, s task.Spec) string {
	t.Helper()
	id, err := r.Start(s)
	if err != nil {
		t.Fatalf("start %s: %v", s.Label, err)
	}
	return id
}

// settled waits for a task to settle and returns its snapshot.
func settled(t *testing.T, r *task.Runtime, id string, caller *agent.Agent) task.Snapshot {
	t.Helper()
	s, err := r.Wait(context.Background(), id, caller, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Status.Terminal() {
		t.Fatalf("%s: status %s after an unbounded wait", id, s.Status)
	}
	return s
}

// quiesce waits until every goroutine started since snapshot has ended (a
// task's producer and settling goroutine), so that whatever a settling task
// emits has been emitted.
func quiesce(t *testing.T, snapshot goleak.Option) {
	t.Helper()
	if err := goleak.Find(snapshot); err != nil {
		t.Fatal(err)
	}
}

func code(err error) string {
	var te *task.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}
