// Package task runs background tasks on behalf of agents: a producer (a
// background subagent, a long command) registers a task, the owning agent
// reads, waits for or kills it through the task_* tools, and is told when it
// finishes. Tasks die with their owner.
package task

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/session"
)

// Status is a task's state.
type Status string

// The task statuses.
const (
	Running   Status = "running"
	Stopping  Status = "stopping"
	Completed Status = "completed"
	Killed    Status = "killed"
	Failed    Status = "failed"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool { return s == Completed || s == Killed || s == Failed }

// Outcome is how a producer's work ended.
type Outcome struct {
	Status Status // completed, killed or failed
	Detail string // why it failed or was killed
	Output string // the final output
}

// Spec describes a task to start.
type Spec struct {
	Kind  string       // e.g. "subagent"; ids are <kind>-<n>
	Label string       // one line
	Owner *agent.Agent // the agent that may read and kill it; nil: unowned
	// Run starts the producer and returns. It is called once, after
	// admission; ctx is cancelled (with a *KillError cause) when the task is
	// killed or its owner disposed. The producer calls done once, from any
	// goroutine, after it released everything it held; later calls are
	// ignored. No goroutine of the runtime waits meanwhile.
	Run func(ctx context.Context, done func(Outcome))
}

// KillError is the cancellation cause of a killed task.
type KillError struct{ Reason string }

func (e *KillError) Error() string { return "task killed: " + e.Reason }

// ErrorCode returns CodeKilled.
func (e *KillError) ErrorCode() string { return CodeKilled }

// Snapshot is a task's public state.
type Snapshot struct {
	ID         string
	Kind       string
	Label      string
	Status     Status
	Detail     string
	Owner      string // the owner's id
	StartedAt  time.Time
	FinishedAt time.Time
	Reported   bool // the owner has seen the final outcome
}

// Done is emitted after a task settles, unless its owner already read its
// outcome or killed it.
type Done struct {
	Task  Snapshot
	Owner *agent.Agent
}

// EventType implements event.Event.
func (Done) EventType() string { return "task/done" }

// Error codes of this package.
const (
	CodeUnknown   = "UNKNOWN_TASK"
	CodeForbidden = "FORBIDDEN"
	CodeAdmission = "ADMISSION"
	CodeInvalid   = "INVALID_TASK"
	CodeKilled    = "TASK_KILLED" // the cause of a killed task's context
)

// Error is a task failure with a stable code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// ErrorCode returns the stable code; tool results keep it.
func (e *Error) ErrorCode() string { return e.Code }

// Is matches another *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// DefaultMaxPerOwner is the default cap on an owner's running tasks.
const DefaultMaxPerOwner = 10

// Runtime holds the tasks of one harness.
type Runtime struct {
	bus         *event.Bus
	log         *slog.Logger
	maxPerOwner int

	mu        sync.Mutex
	delivered sync.Cond // on mu: a completion notice's delivery ended
	tasks     map[string]*record
	order     []string
	counters  map[string]int
	hooked    map[*agent.Agent]bool
	live      map[*agent.Agent]int // running and stopping tasks per owner (nil: unowned)
}

type record struct {
	// Context is the task's, handed to its producer: a cancel context with
	// a cause, whose AfterFunc method (the record's) holds one function
	// without the children map and done channel of context.AfterFunc.
	context.Context
	settled sync.Once
	hushed  bool // stopped by the user: its notice waits for the owner's next turn (here, in the Once's padding)
	ended   bool // settled (or its start failed); guarded by Runtime.mu
	// delivering: its completion notice is being sent (deliver); guarded
	// by Runtime.mu. A read of the outcome waits for the send to end, so
	// that a notice it could not yet withdraw is withdrawn before the
	// owner's next step.
	delivering bool
	snap       Snapshot
	owner      *agent.Agent
	cancel     context.CancelCauseFunc // use stop, which also runs after
	mu         sync.Mutex              // guards after
	after      *afterCancel
	done       chan struct{} // made by the first waiter (doneCh), closed at the end; guarded by Runtime.mu
	output     string        // the outcome's output; its status and detail are snap's
	notice     string        // the id of the completion notice sent to the owner
}

// afterCancel is the function a producer registered with the record's
// AfterFunc.
type afterCancel struct{ f func() }

// AfterFunc is the method context.AfterFunc's documentation names, for a
// task's context: f runs in its own goroutine once the task is cancelled
// (at once if it is), unless stop is called first. The record holds one
// function (an in-process child's run registers its abort so: see
// inproc): a cancel context would make a children map and a done channel
// for it, 370 bytes per parked background child. Further functions go to
// context.AfterFunc.
func (rec *record) AfterFunc(f func()) (stop func() bool) {
	rec.mu.Lock()
	if rec.after != nil {
		rec.mu.Unlock()
		return context.AfterFunc(rec.Context, f)
	}
	if rec.Err() != nil {
		rec.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterCancel{f: f}
	rec.after = a
	rec.mu.Unlock()
	return func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.after != a {
			return false
		}
		rec.after = nil
		return true
	}
}

// stop cancels the task's context with cause and starts the function
// registered by AfterFunc.
func (rec *record) stop(cause error) {
	rec.cancel(cause)
	rec.mu.Lock()
	a := rec.after
	rec.after = nil
	rec.mu.Unlock()
	if a != nil {
		go a.f()
	}
}

// doneCh returns a channel closed once rec has settled. It is made for
// the first waiter: a task nobody waits for (a parked background child's)
// holds none. r.mu must be held.
func (rec *record) doneCh() <-chan struct{} {
	if rec.done == nil {
		rec.done = make(chan struct{})
		if rec.ended {
			close(rec.done)
		}
	}
	return rec.done
}

// end marks rec settled and wakes its waiters. r.mu must be held.
func (rec *record) end() {
	rec.ended = true
	if rec.done != nil {
		close(rec.done)
	}
}

// reported marks rec's outcome as seen by its owner and returns the
// completion notice to withdraw, if one was sent. r.mu must be held.
func (rec *record) reported() (notice string) {
	if rec.snap.Reported {
		return ""
	}
	rec.snap.Reported = true
	notice, rec.notice = rec.notice, ""
	return notice
}

// withdraw takes back a completion notice the owner no longer needs: it
// is dropped while still queued, and left alone once a turn read it.
func (rec *record) withdraw(notice string) {
	if notice != "" && rec.owner != nil {
		rec.owner.CancelMessage(notice, session.Cause{Kind: agent.CauseUser, Reason: "the task's outcome was already read"})
	}
}

// New returns a runtime announcing on bus, admitting at most maxPerOwner
// running tasks per owner (DefaultMaxPerOwner when 0).
func New(bus *event.Bus, log *slog.Logger, maxPerOwner int) *Runtime {
	if maxPerOwner <= 0 {
		maxPerOwner = DefaultMaxPerOwner
	}
	if log == nil {
		log = slog.Default()
	}
	if bus == nil {
		bus = event.New(log)
	}
	r := &Runtime{bus: bus, log: log, maxPerOwner: maxPerOwner, tasks: map[string]*record{},
		counters: map[string]int{}, hooked: map[*agent.Agent]bool{}, live: map[*agent.Agent]int{}}
	r.delivered.L = &r.mu
	return r
}

// awaitDelivery waits until no completion notice of rec is being sent: a
// read that marked the outcome reported then knows the sender withdrew
// what it queued. r.mu must be held.
func (r *Runtime) awaitDelivery(rec *record) {
	for rec.delivering {
		r.delivered.Wait()
	}
}

// Start admits and starts a task and returns its id.
func (r *Runtime) Start(spec Spec) (string, error) {
	label := strings.Join(strings.Fields(spec.Label), " ")
	switch {
	case spec.Kind == "" || label == "":
		return "", &Error{Code: CodeInvalid, Msg: "a task needs a kind and a label"}
	case spec.Run == nil:
		return "", &Error{Code: CodeInvalid, Msg: "a task needs a producer"}
	case spec.Owner != nil && spec.Owner.Disposed():
		return "", &Error{Code: CodeInvalid, Msg: "the task's owner is disposed"}
	}
	r.mu.Lock()
	if r.live[spec.Owner] >= r.maxPerOwner {
		r.mu.Unlock()
		return "", &Error{Code: CodeAdmission, Msg: fmt.Sprintf("too many background tasks are running for this agent (limit %d): "+
			"kill one with task_kill or wait for one with task_output, then retry", r.maxPerOwner)}
	}
	if spec.Owner != nil && !r.hooked[spec.Owner] {
		owner := spec.Owner
		if !owner.OnDispose(func() { r.teardown(owner) }) {
			r.mu.Unlock()
			return "", &Error{Code: CodeInvalid, Msg: "the task's owner is disposed"}
		}
		r.hooked[owner] = true
	}
	r.counters[spec.Kind]++
	id := fmt.Sprintf("%s-%d", spec.Kind, r.counters[spec.Kind])
	ctx, cancel := context.WithCancelCause(context.Background())
	rec := &record{Context: ctx, snap: Snapshot{ID: id, Kind: spec.Kind, Label: label, Status: Running, StartedAt: time.Now()},
		owner: spec.Owner, cancel: cancel}
	if spec.Owner != nil {
		rec.snap.Owner = spec.Owner.ID()
	}
	r.tasks[id] = rec
	r.order = append(r.order, id)
	r.live[spec.Owner]++
	r.mu.Unlock()
	if err := run(rec, spec.Run, func(out Outcome) { r.settle(rec, out) }); err != nil {
		rec.stop(err)
		rec.settled.Do(func() {
			r.mu.Lock()
			r.unlive(rec.owner)
			delete(r.tasks, id)
			r.order = slices.DeleteFunc(r.order, func(x string) bool { return x == id })
			rec.end()
			r.mu.Unlock()
		})
		return "", err
	}
	return id, nil
}

// run calls a producer, turning a panic into an error.
func run(ctx context.Context, produce func(context.Context, func(Outcome)), done func(Outcome)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Code: CodeInvalid, Msg: fmt.Sprintf("the task's producer panicked: %v", p)}
		}
	}()
	produce(ctx, done)
	return nil
}

// unlive counts one task of owner as no longer running. r.mu must be held.
func (r *Runtime) unlive(owner *agent.Agent) {
	if r.live[owner]--; r.live[owner] <= 0 {
		delete(r.live, owner)
	}
}

// settle records a task's outcome; only the first call counts.
func (r *Runtime) settle(rec *record, out Outcome) {
	if !out.Status.Terminal() {
		out = Outcome{Status: Failed, Detail: fmt.Sprintf("the producer reported status %q", out.Status)}
	}
	rec.settled.Do(func() {
		r.mu.Lock()
		r.unlive(rec.owner)
		rec.stop(nil)
		rec.output = out.Output
		rec.snap.Status, rec.snap.Detail, rec.snap.FinishedAt = out.Status, out.Detail, time.Now()
		snap, owner := rec.snap, rec.owner
		rec.end()
		r.mu.Unlock()
		if !snap.Reported {
			r.bus.Emit(Done{Task: snap, Owner: owner})
		}
	})
}

// lookup returns id's record if caller may see it.
func (r *Runtime) lookup(id string, caller *agent.Agent) (*record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.tasks[id]
	if !ok {
		return nil, &Error{Code: CodeUnknown, Msg: fmt.Sprintf("unknown task %s", id)}
	}
	if rec.owner != nil && rec.owner != caller {
		return nil, &Error{Code: CodeForbidden, Msg: fmt.Sprintf("task %s belongs to another session", id)}
	}
	return rec, nil
}

// Get returns a task's snapshot.
func (r *Runtime) Get(id string, caller *agent.Agent) (Snapshot, error) {
	rec, err := r.lookup(id, caller)
	if err != nil {
		return Snapshot{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return rec.snap, nil
}

// List returns the tasks caller may see (its own and unowned ones), oldest
// first.
func (r *Runtime) List(caller *agent.Agent) []Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Snapshot
	for _, id := range r.order {
		if rec := r.tasks[id]; rec.owner == nil || rec.owner == caller {
			out = append(out, rec.snap)
		}
	}
	return out
}

// Read returns a task's output: empty while it runs, its final output once
// it settled (which marks it reported).
func (r *Runtime) Read(id string, caller *agent.Agent) (Outcome, Snapshot, error) {
	rec, err := r.lookup(id, caller)
	if err != nil {
		return Outcome{}, Snapshot{}, err
	}
	r.mu.Lock()
	if !rec.snap.Status.Terminal() {
		defer r.mu.Unlock()
		return Outcome{}, rec.snap, nil
	}
	notice := rec.reported()
	r.awaitDelivery(rec)
	snap := rec.snap
	out := Outcome{Status: snap.Status, Detail: snap.Detail, Output: rec.output}
	r.mu.Unlock()
	rec.withdraw(notice)
	return out, snap, nil
}

// Wait waits up to timeout for a task to settle, without cancelling it, and
// returns its snapshot.
func (r *Runtime) Wait(ctx context.Context, id string, caller *agent.Agent, timeout time.Duration) (Snapshot, error) {
	rec, err := r.lookup(id, caller)
	if err != nil {
		return Snapshot{}, err
	}
	r.mu.Lock()
	done := rec.doneCh()
	r.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
		return Snapshot{}, context.Cause(ctx)
	}
	return r.Get(id, caller)
}

// Kill asks a task to stop. It reports whether the task had already
// finished; either way its outcome counts as seen (no completion notice).
func (r *Runtime) Kill(id string, caller *agent.Agent, reason string) (alreadyFinished bool, snap Snapshot, err error) {
	rec, err := r.lookup(id, caller)
	if err != nil {
		return false, Snapshot{}, err
	}
	if reason == "" {
		reason = "killed by its owner"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	notice := rec.reported()
	r.awaitDelivery(rec)
	if rec.snap.Status.Terminal() {
		defer rec.withdraw(notice)
		return true, rec.snap, nil
	}
	rec.snap.Status = Stopping
	rec.stop(&KillError{Reason: reason})
	return false, rec.snap, nil
}

// Stop stops owner's running tasks of kind ("" for every kind) for the
// user: each ends killed with reason, and its completion notice is queued
// for the owner's next turn without waking it. It returns their ids.
func (r *Runtime) Stop(owner *agent.Agent, kind, reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, id := range r.order {
		rec := r.tasks[id]
		if rec.owner != owner || rec.snap.Status.Terminal() || kind != "" && rec.snap.Kind != kind {
			continue
		}
		rec.hushed = true
		rec.snap.Status = Stopping
		rec.stop(&KillError{Reason: reason})
		ids = append(ids, id)
	}
	return ids
}

// teardown cancels and awaits owner's tasks and forgets them.
func (r *Runtime) teardown(owner *agent.Agent) {
	r.mu.Lock()
	var recs []*record
	var dones []<-chan struct{}
	for _, id := range r.order {
		if rec := r.tasks[id]; rec.owner == owner {
			rec.snap.Reported = true
			rec.stop(&KillError{Reason: "its owner was disposed"})
			recs, dones = append(recs, rec), append(dones, rec.doneCh())
		}
	}
	delete(r.hooked, owner)
	r.mu.Unlock()
	for _, done := range dones {
		<-done
	}
	r.mu.Lock()
	for _, rec := range recs {
		delete(r.tasks, rec.snap.ID)
	}
	r.order = slices.DeleteFunc(r.order, func(id string) bool { _, ok := r.tasks[id]; return !ok })
	r.mu.Unlock()
}

// Close cancels every task and waits for all of them to settle.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	var dones []<-chan struct{}
	for _, rec := range r.tasks {
		rec.snap.Reported = true
		rec.stop(&KillError{Reason: "the runtime is closing"})
		dones = append(dones, rec.doneCh())
	}
	r.mu.Unlock()
	for _, done := range dones {
		select {
		case <-done:
		case <-ctx.Done():
			return errors.Join(errors.New("task: close: tasks still running"), context.Cause(ctx))
		}
	}
	return nil
}
