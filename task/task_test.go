package task_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/task"
)

func ids(snaps []task.Snapshot) []string {
	var out []string
	for _, s := range snaps {
		out = append(out, s.ID)
	}
	return out
}

func TestIDsUsePerKindCounters(t *testing.T) {
	e := newEnv(t, envConfig{})
	a, b := e.agent(), e.agent()
	var got []string
	for _, s := range []struct {
		kind  string
		owner *agent.Agent
	}{{"bash", a}, {"subagent", a}, {"bash", b}, {"bash", nil}, {"subagent", b}} {
		got = append(got, start(t, e.rt.Tasks, spec(s.kind, "work", s.owner, newProducer(t, false))))
	}
	want := []string{"bash-1", "subagent-1", "bash-2", "bash-3", "subagent-2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ids (-want +got):\n%s", diff)
	}
}

func TestStartRefusesInvalidSpecs(t *testing.T) {
	r := task.New(nil, nil, 0)
	t.Cleanup(func() { r.Close(context.Background()) })
	p := newProducer(t, false)
	for _, tc := range []struct {
		name string
		spec task.Spec
	}{
		{"empty kind", task.Spec{Label: "work", Run: p.Run}},
		{"empty label", task.Spec{Kind: "bash", Run: p.Run}},
		{"blank label", task.Spec{Kind: "bash", Label: " \n\t ", Run: p.Run}},
		{"nil producer", task.Spec{Kind: "bash", Label: "work"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := r.Start(tc.spec)
			if code(err) != task.CodeInvalid || id != "" {
				t.Fatalf("Start = %q, %v; want code %s", id, err, task.CodeInvalid)
			}
			if !errors.Is(err, &task.Error{Code: task.CodeInvalid}) {
				t.Fatalf("errors.Is(%v, INVALID_TASK) = false", err)
			}
		})
	}
	select {
	case <-p.ran:
		t.Fatal("a refused spec ran its producer")
	default:
	}
	if got := r.List(nil); len(got) != 0 {
		t.Fatalf("refused specs left tasks: %+v", got)
	}
	// Refusals consume no id.
	if id := start(t, r, spec("bash", "work", nil, p)); id != "bash-1" {
		t.Fatalf("first valid id %q, want bash-1", id)
	}
}

func TestStartRefusesDisposedOwner(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	if err := a.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, false)
	id, err := e.rt.Tasks.Start(spec("bash", "work", a, p))
	if code(err) != task.CodeInvalid || id != "" {
		t.Fatalf("Start for a disposed owner = %q, %v; want %s", id, err, task.CodeInvalid)
	}
	select {
	case <-p.ran:
		t.Fatal("the producer ran for a disposed owner")
	default:
	}
}

func TestLabelIsFoldedOntoOneLine(t *testing.T) {
	r := task.New(nil, nil, 0)
	t.Cleanup(func() { r.Close(context.Background()) })
	id := start(t, r, spec("bash", "  run\tthe\n\n  tests \r\n now ", nil, newProducer(t, false)))
	s, err := r.Get(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Label != "run the tests now" {
		t.Fatalf("label %q", s.Label)
	}
}

func TestSnapshotWhileRunningAndSettled(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	s, err := e.rt.Tasks.Get(id, a)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != id || s.Kind != "bash" || s.Label != "work" || s.Status != task.Running || s.Owner != a.ID() ||
		s.StartedAt.IsZero() || !s.FinishedAt.IsZero() || s.Reported || s.Detail != "" {
		t.Fatalf("running snapshot %+v", s)
	}
	p.complete("out")
	s = settled(t, e.rt.Tasks, id, a)
	if s.Status != task.Completed || s.FinishedAt.IsZero() || s.FinishedAt.Before(s.StartedAt) || s.Reported {
		t.Fatalf("settled snapshot %+v", s)
	}
}

func TestOutcomeStatuses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		run        func(ctx context.Context, done func(task.Outcome))
		status     task.Status
		detail     string
		wantOutput string
	}{
		{"completed", send(task.Outcome{Status: task.Completed, Output: "all good"}), task.Completed, "", "all good"},
		{"failed", send(task.Outcome{Status: task.Failed, Detail: "exit status 2", Output: "partial"}), task.Failed, "exit status 2", "partial"},
		{"killed by itself", send(task.Outcome{Status: task.Killed, Detail: "gave up"}), task.Killed, "gave up", ""},
		{"non-terminal running", send(task.Outcome{Status: task.Running, Output: "lost"}), task.Failed, `the producer reported status "running"`, ""},
		{"non-terminal stopping", send(task.Outcome{Status: task.Stopping}), task.Failed, `the producer reported status "stopping"`, ""},
		{"empty status", send(task.Outcome{Output: "lost"}), task.Failed, `the producer reported status ""`, ""},
		{"only the first outcome counts", func(_ context.Context, done func(task.Outcome)) {
			done(task.Outcome{Status: task.Completed, Output: "first"})
			done(task.Outcome{Status: task.Failed, Output: "second"})
		}, task.Completed, "", "first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := task.New(nil, nil, 0)
			t.Cleanup(func() { r.Close(context.Background()) })
			id := start(t, r, task.Spec{Kind: "k", Label: "l", Run: tc.run})
			s := settled(t, r, id, nil)
			if s.Status != tc.status || s.Detail != tc.detail {
				t.Fatalf("settled as %s (%q), want %s (%q)", s.Status, s.Detail, tc.status, tc.detail)
			}
			out, _, err := r.Read(id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if out.Status != tc.status || out.Detail != tc.detail || out.Output != tc.wantOutput {
				t.Fatalf("outcome %+v", out)
			}
		})
	}
}

// send returns a producer that reports out at once.
func send(out task.Outcome) func(context.Context, func(task.Outcome)) {
	return func(_ context.Context, done func(task.Outcome)) { done(out) }
}

func TestAdmissionPerOwner(t *testing.T) {
	e := newEnv(t, envConfig{MaxPerOwner: 2})
	a, b := e.agent(), e.agent()
	pa := []*producer{newProducer(t, false), newProducer(t, false)}
	first := start(t, e.rt.Tasks, spec("bash", "one", a, pa[0]))
	start(t, e.rt.Tasks, spec("bash", "two", a, pa[1]))

	refused := newProducer(t, false)
	id, err := e.rt.Tasks.Start(spec("bash", "three", a, refused))
	if code(err) != task.CodeAdmission || id != "" {
		t.Fatalf("third Start = %q, %v; want %s", id, err, task.CodeAdmission)
	}
	if !strings.Contains(err.Error(), "task_kill") || !strings.Contains(err.Error(), "limit 2") {
		t.Fatalf("admission message %q should mention the limit and task_kill", err)
	}
	select {
	case <-refused.ran:
		t.Fatal("a refused task ran its producer")
	default:
	}
	// Another owner and unowned tasks have their own buckets.
	start(t, e.rt.Tasks, spec("bash", "b's", b, newProducer(t, false)))
	start(t, e.rt.Tasks, spec("bash", "unowned", nil, newProducer(t, false)))

	// Once one of a's tasks finished, a new one is admitted.
	pa[0].complete("done")
	settled(t, e.rt.Tasks, first, a)
	if id := start(t, e.rt.Tasks, spec("bash", "four", a, newProducer(t, false))); id != "bash-5" {
		t.Fatalf("admitted id %q, want bash-5 (refusals consume no id)", id)
	}
}

func TestAdmissionUnownedBucket(t *testing.T) {
	e := newEnv(t, envConfig{MaxPerOwner: 1})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "one", nil, p))
	if _, err := e.rt.Tasks.Start(spec("bash", "two", nil, newProducer(t, false))); code(err) != task.CodeAdmission {
		t.Fatalf("second unowned Start: %v, want %s", err, task.CodeAdmission)
	}
	start(t, e.rt.Tasks, spec("bash", "owned", a, newProducer(t, false)))
	p.complete("")
	settled(t, e.rt.Tasks, id, nil)
	start(t, e.rt.Tasks, spec("bash", "three", nil, newProducer(t, false)))
}

func TestAdmissionCountsStoppingTasks(t *testing.T) {
	e := newEnv(t, envConfig{MaxPerOwner: 1})
	a := e.agent()
	p := newProducer(t, true)
	id := start(t, e.rt.Tasks, spec("bash", "slow to stop", a, p))
	if _, _, err := e.rt.Tasks.Kill(id, a, ""); err != nil {
		t.Fatal(err)
	}
	<-p.cancelled
	if _, err := e.rt.Tasks.Start(spec("bash", "next", a, newProducer(t, false))); code(err) != task.CodeAdmission {
		t.Fatalf("Start while the only task is stopping: %v, want %s", err, task.CodeAdmission)
	}
	p.release()
	settled(t, e.rt.Tasks, id, a)
	start(t, e.rt.Tasks, spec("bash", "next", a, newProducer(t, false)))
}

func TestDefaultMaxPerOwner(t *testing.T) {
	r := task.New(nil, nil, 0)
	t.Cleanup(func() { r.Close(context.Background()) })
	for i := range task.DefaultMaxPerOwner {
		start(t, r, spec("bash", fmt.Sprint(i), nil, newProducer(t, false)))
	}
	_, err := r.Start(spec("bash", "one too many", nil, newProducer(t, false)))
	if code(err) != task.CodeAdmission || !strings.Contains(err.Error(), fmt.Sprintf("limit %d", task.DefaultMaxPerOwner)) {
		t.Fatalf("Start past the default limit: %v", err)
	}
}

func TestAccessIsFencedByOwner(t *testing.T) {
	e := newEnv(t, envConfig{})
	a, other := e.agent(), e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "mine", a, p))
	r := e.rt.Tasks

	for name, caller := range map[string]*agent.Agent{"another agent": other, "no agent": nil} {
		checks := map[string]error{}
		_, checks["Get"] = r.Get(id, caller)
		_, _, checks["Read"] = r.Read(id, caller)
		_, checks["Wait"] = r.Wait(context.Background(), id, caller, time.Hour)
		_, _, checks["Kill"] = r.Kill(id, caller, "")
		for op, err := range checks {
			if code(err) != task.CodeForbidden || !strings.Contains(err.Error(), "belongs to another session") {
				t.Errorf("%s by %s: %v, want %s", op, name, err, task.CodeForbidden)
			}
		}
	}
	if p.wasCancelled() {
		t.Fatal("a forbidden Kill cancelled the task")
	}
	if s, err := r.Get(id, a); err != nil || s.Reported {
		t.Fatalf("owner Get = %+v, %v", s, err)
	}

	checks := map[string]error{}
	_, checks["Get"] = r.Get("bash-99", a)
	_, _, checks["Read"] = r.Read("bash-99", a)
	_, checks["Wait"] = r.Wait(context.Background(), "bash-99", a, time.Hour)
	_, _, checks["Kill"] = r.Kill("bash-99", a, "")
	for op, err := range checks {
		if code(err) != task.CodeUnknown || err.Error() != "unknown task bash-99" {
			t.Errorf("%s of an unknown id: %v, want %s", op, err, task.CodeUnknown)
		}
	}
}

func TestUnownedTasksAreVisibleToEveryone(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "shared", nil, p))
	for name, caller := range map[string]*agent.Agent{"an agent": a, "no agent": nil} {
		if s, err := e.rt.Tasks.Get(id, caller); err != nil || s.Owner != "" {
			t.Fatalf("Get by %s = %+v, %v", name, s, err)
		}
	}
	if finished, _, err := e.rt.Tasks.Kill(id, a, "not needed"); err != nil || finished {
		t.Fatalf("Kill = %v, %v", finished, err)
	}
	if got := p.killReason(t); got != "not needed" {
		t.Fatalf("kill reason %q", got)
	}
}

func TestListShowsOwnAndUnownedOldestFirst(t *testing.T) {
	e := newEnv(t, envConfig{})
	a, b := e.agent(), e.agent()
	for _, s := range []struct {
		kind  string
		owner *agent.Agent
	}{{"a", a}, {"u", nil}, {"b", b}, {"a", a}, {"u", nil}} {
		start(t, e.rt.Tasks, spec(s.kind, "work", s.owner, newProducer(t, false)))
	}
	for _, tc := range []struct {
		name   string
		caller *agent.Agent
		want   []string
	}{
		{"a", a, []string{"a-1", "u-1", "a-2", "u-2"}},
		{"b", b, []string{"u-1", "b-1", "u-2"}},
		{"nobody", nil, []string{"u-1", "u-2"}},
	} {
		if diff := cmp.Diff(tc.want, ids(e.rt.Tasks.List(tc.caller))); diff != "" {
			t.Errorf("List for %s (-want +got):\n%s", tc.name, diff)
		}
	}
	// Finished tasks stay listed with their status.
	fresh := e.agent()
	if got := e.rt.Tasks.List(fresh); len(got) != 2 {
		t.Fatalf("List for a new agent: %v", ids(got))
	}
}

func TestReadIsEmptyWhileRunningThenFinalAndIdempotent(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	out, s, err := e.rt.Tasks.Read(id, a)
	if err != nil || out.Output != "" || out.Status != "" || s.Status != task.Running || s.Reported {
		t.Fatalf("Read while running = %+v, %+v, %v", out, s, err)
	}
	if s, _ := e.rt.Tasks.Get(id, a); s.Reported {
		t.Fatal("a read while running marked the task reported")
	}
	p.finish <- task.Outcome{Status: task.Completed, Output: "the output"}
	settled(t, e.rt.Tasks, id, a)
	for i := range 2 {
		out, s, err := e.rt.Tasks.Read(id, a)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != task.Completed || out.Output != "the output" {
			t.Fatalf("read %d: outcome %+v", i, out)
		}
		if s.Status != task.Completed || !s.Reported {
			t.Fatalf("read %d: snapshot %+v", i, s)
		}
	}
	if s, _ := e.rt.Tasks.Get(id, a); !s.Reported {
		t.Fatal("a final read did not mark the task reported")
	}
}

func TestWaitTimeoutLeavesTaskRunning(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	s, err := e.rt.Tasks.Wait(context.Background(), id, a, time.Millisecond)
	if err != nil || s.Status != task.Running || s.ID != id {
		t.Fatalf("timed-out Wait = %+v, %v", s, err)
	}
	if p.wasCancelled() {
		t.Fatal("a timed-out Wait cancelled the task")
	}
	p.complete("late")
	if s := settled(t, e.rt.Tasks, id, a); s.Status != task.Completed {
		t.Fatalf("after the wait the task settled as %s", s.Status)
	}
}

func TestWaitReturnsWhenTaskSettles(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	got := make(chan task.Snapshot, 1)
	go func() {
		s, _ := e.rt.Tasks.Wait(context.Background(), id, a, time.Hour)
		got <- s
	}()
	p.complete("x")
	if s := <-got; s.Status != task.Completed {
		t.Fatalf("Wait returned %+v", s)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	stop := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(stop)
	if _, err := e.rt.Tasks.Wait(ctx, id, a, time.Hour); !errors.Is(err, stop) {
		t.Fatalf("Wait with a cancelled ctx: %v, want its cause", err)
	}
	if p.wasCancelled() {
		t.Fatal("an abandoned Wait cancelled the task")
	}
}

func TestKillRunningTask(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, true)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	finished, s, err := e.rt.Tasks.Kill(id, a, "no longer needed")
	if err != nil || finished {
		t.Fatalf("Kill = %v, %v", finished, err)
	}
	if s.Status != task.Stopping || !s.Reported {
		t.Fatalf("Kill snapshot %+v, want stopping and reported", s)
	}
	if got := p.killReason(t); got != "no longer needed" {
		t.Fatalf("kill reason %q", got)
	}
	if s, _ := e.rt.Tasks.Get(id, a); s.Status != task.Stopping {
		t.Fatalf("status %s while the producer winds down, want stopping", s.Status)
	}
	// Killing a stopping task again is still a request.
	if finished, s, err := e.rt.Tasks.Kill(id, a, "again"); err != nil || finished || s.Status != task.Stopping {
		t.Fatalf("second Kill = %v, %+v, %v", finished, s, err)
	}
	p.release()
	s = settled(t, e.rt.Tasks, id, a)
	if s.Status != task.Killed || s.Detail != "no longer needed" || !s.Reported {
		t.Fatalf("settled %+v", s)
	}
}

func TestKillDefaultReason(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	if _, _, err := e.rt.Tasks.Kill(id, a, ""); err != nil {
		t.Fatal(err)
	}
	if got := p.killReason(t); got != "killed by its owner" {
		t.Fatalf("default kill reason %q", got)
	}
	if err := p.cause; err.Error() != "task killed: killed by its owner" {
		t.Fatalf("KillError text %q", err)
	}
}

func TestKillFinishedTask(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	p.complete("out")
	settled(t, e.rt.Tasks, id, a)
	finished, s, err := e.rt.Tasks.Kill(id, a, "too late")
	if err != nil || !finished {
		t.Fatalf("Kill of a finished task = %v, %v", finished, err)
	}
	if s.Status != task.Completed || !s.Reported {
		t.Fatalf("snapshot %+v", s)
	}
	if p.wasCancelled() {
		t.Fatal("killing a finished task cancelled its producer")
	}
}

func TestDoneEmittedOnceWhenTaskSettles(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	p := newProducer(t, false)
	before := goleak.IgnoreCurrent()
	id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
	p.finish <- task.Outcome{Status: task.Failed, Detail: "boom", Output: "trace"}
	d := e.done.next(t, id)
	if d.Owner != a || d.Task.Status != task.Failed || d.Task.Detail != "boom" || d.Task.Reported || d.Task.Owner != a.ID() {
		t.Fatalf("Done %+v", d)
	}
	if d.EventType() != "task/done" {
		t.Fatalf("event type %q", d.EventType())
	}
	// Reading it does not announce it again.
	if _, _, err := e.rt.Tasks.Read(id, a); err != nil {
		t.Fatal(err)
	}
	quiesce(t, before)
	if n := len(e.done.of(id)); n != 1 {
		t.Fatalf("%d Done events, want 1", n)
	}
}

func TestDoneForUnownedTaskHasNoOwner(t *testing.T) {
	e := newEnv(t, envConfig{})
	p := newProducer(t, false)
	id := start(t, e.rt.Tasks, spec("bash", "work", nil, p))
	p.complete("")
	if d := e.done.next(t, id); d.Owner != nil || d.Task.Owner != "" || d.Task.Status != task.Completed {
		t.Fatalf("Done %+v", d)
	}
}

func TestNoDoneAfterKill(t *testing.T) {
	for _, finishFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("finished=%v", finishFirst), func(t *testing.T) {
			e := newEnv(t, envConfig{})
			a := e.agent()
			p := newProducer(t, false)
			before := goleak.IgnoreCurrent()
			id := start(t, e.rt.Tasks, spec("bash", "work", a, p))
			if finishFirst {
				// Let the task settle unseen: its Done is emitted, and a
				// later Kill adds nothing.
				p.complete("")
				e.done.next(t, id)
			}
			if _, _, err := e.rt.Tasks.Kill(id, a, ""); err != nil {
				t.Fatal(err)
			}
			settled(t, e.rt.Tasks, id, a)
			quiesce(t, before)
			want := 0
			if finishFirst {
				want = 1
			}
			if n := len(e.done.of(id)); n != want {
				t.Fatalf("%d Done events, want %d", n, want)
			}
		})
	}
}

func TestDisposingOwnerCancelsAwaitsAndForgetsItsTasks(t *testing.T) {
	e := newEnv(t, envConfig{MaxPerOwner: 2})
	a, b := e.agent(), e.agent()
	running := newProducer(t, false)
	finished := newProducer(t, false)
	theirs := newProducer(t, false)
	unowned := newProducer(t, false)
	before := goleak.IgnoreCurrent()
	idRunning := start(t, e.rt.Tasks, spec("bash", "running", a, running))
	idFinished := start(t, e.rt.Tasks, spec("bash", "finished", a, finished))
	idTheirs := start(t, e.rt.Tasks, spec("bash", "b's", b, theirs))
	idUnowned := start(t, e.rt.Tasks, spec("bash", "unowned", nil, unowned))
	finished.complete("")
	e.done.next(t, idFinished)

	if err := a.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !running.wasCancelled() {
		t.Fatal("Dispose returned before the owner's task saw its cancellation")
	}
	if got := running.killReason(t); got != "its owner was disposed" {
		t.Fatalf("kill reason %q", got)
	}
	for _, id := range []string{idRunning, idFinished} {
		if _, err := e.rt.Tasks.Get(id, a); code(err) != task.CodeUnknown {
			t.Errorf("Get(%s) after its owner was disposed: %v, want %s", id, err, task.CodeUnknown)
		}
	}
	if diff := cmp.Diff([]string{idUnowned}, ids(e.rt.Tasks.List(a))); diff != "" {
		t.Errorf("List for the disposed owner (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{idTheirs, idUnowned}, ids(e.rt.Tasks.List(b))); diff != "" {
		t.Errorf("List for another agent (-want +got):\n%s", diff)
	}
	if theirs.wasCancelled() || unowned.wasCancelled() {
		t.Fatal("disposing an agent cancelled tasks it did not own")
	}
	if _, err := e.rt.Tasks.Start(spec("bash", "late", a, newProducer(t, false))); code(err) != task.CodeInvalid {
		t.Fatalf("Start for the disposed owner: %v, want %s", err, task.CodeInvalid)
	}
	// The teardown's kill is silent.
	theirs.complete("")
	unowned.complete("")
	settled(t, e.rt.Tasks, idTheirs, b)
	settled(t, e.rt.Tasks, idUnowned, nil)
	quiesce(t, before)
	if n := len(e.done.of(idRunning)); n != 0 {
		t.Fatalf("%d Done events for a task killed by its owner's disposal", n)
	}
}

func TestRuntimeCloseCancelsEverything(t *testing.T) {
	e := newEnv(t, envConfig{})
	a := e.agent()
	owned, unowned := newProducer(t, false), newProducer(t, false)
	before := goleak.IgnoreCurrent()
	start(t, e.rt.Tasks, spec("bash", "owned", a, owned))
	start(t, e.rt.Tasks, spec("bash", "unowned", nil, unowned))
	if err := e.rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !owned.wasCancelled() || !unowned.wasCancelled() {
		t.Fatal("Close returned before every task saw its cancellation")
	}
	if got := owned.killReason(t); got != "its owner was disposed" {
		t.Fatalf("owned task's kill reason %q", got)
	}
	if got := unowned.killReason(t); got != "the runtime is closing" {
		t.Fatalf("unowned task's kill reason %q", got)
	}
	quiesce(t, before)
	if n := len(e.done.all()); n != 0 {
		t.Fatalf("closing announced %d tasks", n)
	}
}

func TestTaskRuntimeCloseStopsWaitingWhenContextEnds(t *testing.T) {
	r := task.New(nil, nil, 0)
	p := newProducer(t, true)
	id := start(t, r, spec("bash", "stubborn", nil, p))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := r.Close(ctx)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "tasks still running") {
		t.Fatalf("Close with an ended ctx: %v", err)
	}
	<-p.cancelled
	p.release()
	settled(t, r, id, nil)
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestErrorIsMatchesByCode(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &task.Error{Code: task.CodeAdmission, Msg: "full"})
	if !errors.Is(err, &task.Error{Code: task.CodeAdmission}) || errors.Is(err, &task.Error{Code: task.CodeUnknown}) {
		t.Fatal("task.Error.Is does not match by code")
	}
	if got := (&task.Error{Code: task.CodeUnknown, Msg: "unknown task x"}).Error(); got != "unknown task x" {
		t.Fatalf("Error() = %q", got)
	}
	for s, terminal := range map[task.Status]bool{task.Running: false, task.Stopping: false, task.Completed: true,
		task.Killed: true, task.Failed: true, "": false} {
		if s.Terminal() != terminal {
			t.Errorf("%q.Terminal() = %v", s, !terminal)
		}
	}
}

// A producer whose Run panics must leave nothing registered (the spec: "a
// throw leaves nothing registered"). Start registers the record before it
// calls Run, so when the panic is recovered (tool.Scope.Execute recovers tool
// panics) the record stays running forever: it holds an admission slot, and
// disposing its owner or closing the runtime waits for it for ever.
func TestStartRunPanicLeavesNothingRegistered(t *testing.T) {
	r := task.New(nil, nil, 1)
	func() {
		defer func() { recover() }()
		r.Start(task.Spec{Kind: "bash", Label: "boom", Run: func(context.Context, func(task.Outcome)) { panic("boom") }})
	}()
	if got := r.List(nil); len(got) != 0 {
		t.Errorf("a panicking producer left %+v", got)
	}
	p := newProducer(t, false)
	if _, err := r.Start(spec("bash", "next", nil, p)); err != nil {
		t.Errorf("Start after a panicking producer: %v", err)
	}
	// Bounded, so that the test fails rather than hangs while the bug is there.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
