package temporal

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// suite returns a test suite that logs nothing.
func suite() *testsuite.WorkflowTestSuite {
	s := &testsuite.WorkflowTestSuite{}
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return s
}

// fakeAttempts stands in for the child's activity: it records each
// attempt's input and plays the attempt's script.
type fakeAttempts struct {
	mu    sync.Mutex
	seen  []Attempt
	plays []func(ctx context.Context, at Attempt) (Outcome, error)
}

func (f *fakeAttempts) run(ctx context.Context, at Attempt) (Outcome, error) {
	f.mu.Lock()
	f.seen = append(f.seen, at)
	play := f.plays[min(len(f.seen), len(f.plays))-1]
	f.mu.Unlock()
	return play(ctx, at)
}

func (f *fakeAttempts) attempts() []Attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Attempt(nil), f.seen...)
}

// workflowEnv is a test workflow environment running Workflow over f.
func workflowEnv(f *fakeAttempts) *testsuite.TestWorkflowEnvironment {
	env := suite().NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivityWithOptions(f.run, activity.RegisterOptions{Name: ActivityName})
	return env
}

func testInput() Input {
	return Input{SessionID: "child", ParentSession: "parent", Depth: 1, Prompt: []content.Block{content.Text("task")},
		HeartbeatTimeout: 10 * time.Second, RunTimeout: time.Hour, MaxResumes: 2}
}

// events returns n events numbered from from.
func events(from, n int) []session.Event {
	out := make([]session.Event, n)
	for i := range out {
		out[i] = session.Event{Seq: int64(from + i), Type: session.TypeRequestHeader, Data: session.RequestHeader{Reason: "initial"}}
	}
	return out
}

func outcome(env *testsuite.TestWorkflowEnvironment) (Outcome, error) {
	if !env.IsWorkflowCompleted() {
		return Outcome{}, errors.New("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	err := env.GetWorkflowResult(&out)
	return out, err
}

// The workflow applies a checkpoint only from its current attempt and only
// if it continues the log exactly; the outcome counts what it applied.
func TestWorkflowChecksCheckpoints(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeAttempts{plays: []func(context.Context, Attempt) (Outcome, error){
		func(ctx context.Context, at Attempt) (Outcome, error) {
			<-gate
			return Outcome{StopReason: subagent.Completed}, nil
		}}}
	env := workflowEnv(f)
	type verdict struct {
		name string
		err  error
	}
	var mu sync.Mutex
	var verdicts []verdict
	cases := []struct {
		name string
		cp   Checkpoint
		ok   bool
	}{
		{"claim", Checkpoint{Attempt: 1, Header: &session.Header{ID: "child"}}, true},
		{"first events", Checkpoint{Attempt: 1, From: 0, Events: events(0, 3)}, true},
		{"another attempt", Checkpoint{Attempt: 2, From: 3, Events: events(3, 1)}, false},
		{"a gap", Checkpoint{Attempt: 1, From: 4, Events: events(4, 1)}, false},
		{"a replay", Checkpoint{Attempt: 1, From: 0, Events: events(0, 3)}, false},
		{"seqs that do not follow", Checkpoint{Attempt: 1, From: 3, Events: events(7, 2)}, false},
		{"more events", Checkpoint{Attempt: 1, From: 3, Events: events(3, 2)}, true},
	}
	env.RegisterDelayedCallback(func() {
		for i, c := range cases {
			record := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				verdicts = append(verdicts, verdict{c.name, err})
				if len(verdicts) == len(cases) {
					close(gate)
				}
			}
			env.UpdateWorkflow(CheckpointUpdate, string(rune('a'+i)), &testsuite.TestUpdateCallback{
				OnReject:   record,
				OnComplete: func(_ any, err error) { record(err) },
			}, c.cp)
		}
	}, time.Millisecond)
	env.ExecuteWorkflow(WorkflowName, testInput())
	out, err := outcome(env)
	if err != nil {
		t.Fatal(err)
	}
	if out.StopReason != subagent.Completed || out.LogLen != 5 {
		t.Errorf("outcome %+v: want completed with a log of 5 events", out)
	}
	for i, c := range cases {
		v := verdicts[i]
		var ae *temporal.ApplicationError
		switch {
		case c.ok && v.err != nil:
			t.Errorf("%s: refused: %v", c.name, v.err)
		case !c.ok && (!errors.As(v.err, &ae) || ae.Type() != ErrSuperseded):
			t.Errorf("%s: got %v, want a %s refusal", c.name, v.err, ErrSuperseded)
		}
	}
}

// A workflow near Temporal's history limits refuses checkpoints.
func TestWorkflowRefusesCheckpointsWhenHistoryIsFull(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeAttempts{plays: []func(context.Context, Attempt) (Outcome, error){
		func(ctx context.Context, at Attempt) (Outcome, error) {
			<-gate
			return Outcome{StopReason: subagent.Completed}, nil
		}}}
	env := workflowEnv(f)
	env.SetCurrentHistorySize(maxHistoryBytes + 1)
	var got error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(CheckpointUpdate, "full", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { got = err; close(gate) },
			OnComplete: func(_ any, err error) { got = err; close(gate) },
		}, Checkpoint{Attempt: 1, Events: events(0, 1)})
	}, time.Millisecond)
	env.ExecuteWorkflow(WorkflowName, testInput())
	var ae *temporal.ApplicationError
	if !errors.As(got, &ae) || ae.Type() != ErrHistoryFull {
		t.Errorf("checkpoint into a full history: %v, want %s", got, ErrHistoryFull)
	}
}

// A worker that went silent or stopped leaves the child to the next
// attempt, which starts from the log so far; other failures end the child;
// resumes are bounded.
func TestWorkflowContinuesOnAnotherAttempt(t *testing.T) {
	silent := func(context.Context, Attempt) (Outcome, error) { return Outcome{}, temporal.NewHeartbeatTimeoutError() }
	handedBack := func(context.Context, Attempt) (Outcome, error) {
		return Outcome{}, temporal.NewApplicationError("stopping", ErrHandedBack)
	}
	done := func(context.Context, Attempt) (Outcome, error) { return Outcome{StopReason: subagent.Completed}, nil }
	for _, tc := range []struct {
		name     string
		plays    []func(context.Context, Attempt) (Outcome, error)
		attempts int
		stop     subagent.StopReason
		diag     string
	}{
		{"a silent worker", []func(context.Context, Attempt) (Outcome, error){silent, done}, 2, subagent.Completed, ""},
		{"a stopping worker", []func(context.Context, Attempt) (Outcome, error){handedBack, handedBack, done}, 3, subagent.Completed, ""},
		{"too many resumes", []func(context.Context, Attempt) (Outcome, error){silent}, 3, subagent.Failed, "went silent 3 times"},
		{"a child that cannot start", []func(context.Context, Attempt) (Outcome, error){func(context.Context, Attempt) (Outcome, error) {
			return Outcome{}, temporal.NewNonRetryableApplicationError("no such model route", ErrChild, nil)
		}}, 1, subagent.Failed, "no such model route"},
		{"a checkpoint failure", []func(context.Context, Attempt) (Outcome, error){func(context.Context, Attempt) (Outcome, error) {
			return Outcome{}, temporal.NewApplicationError("cluster gone", ErrCheckpoint)
		}, done}, 2, subagent.Completed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAttempts{plays: tc.plays}
			env := workflowEnv(f)
			env.ExecuteWorkflow(WorkflowName, testInput())
			out, err := outcome(env)
			if err != nil {
				t.Fatal(err)
			}
			if out.StopReason != tc.stop || !strings.Contains(out.Diagnostic, tc.diag) {
				t.Errorf("outcome %+v: want %s with %q", out, tc.stop, tc.diag)
			}
			seen := f.attempts()
			if len(seen) != tc.attempts {
				t.Fatalf("%d attempts, want %d", len(seen), tc.attempts)
			}
			for i, at := range seen {
				if at.Attempt != i+1 || at.From != 0 || at.Input.SessionID != "child" {
					t.Errorf("attempt %d: %+v", i+1, at)
				}
			}
		})
	}
}

// The next attempt starts from the log the previous one wrote.
func TestWorkflowResumesFromTheLog(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeAttempts{plays: []func(context.Context, Attempt) (Outcome, error){
		func(ctx context.Context, at Attempt) (Outcome, error) {
			<-gate
			return Outcome{}, temporal.NewHeartbeatTimeoutError()
		},
		func(ctx context.Context, at Attempt) (Outcome, error) {
			return Outcome{StopReason: subagent.MaxSteps}, nil
		},
	}}
	env := workflowEnv(f)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(CheckpointUpdate, "cp", &testsuite.TestUpdateCallback{
			OnReject:   func(error) { close(gate) },
			OnComplete: func(any, error) { close(gate) },
		}, Checkpoint{Attempt: 1, Events: events(0, 4)})
	}, time.Millisecond)
	env.ExecuteWorkflow(WorkflowName, testInput())
	out, err := outcome(env)
	if err != nil {
		t.Fatal(err)
	}
	seen := f.attempts()
	if len(seen) != 2 || seen[1].Attempt != 2 || seen[1].From != 4 || out.LogLen != 4 || out.StopReason != subagent.MaxSteps {
		t.Errorf("attempts %+v, outcome %+v: want attempt 2 from 4", seen, out)
	}
}

// The tail of an attempt's outcome extends the log, if it continues it: a
// tail that does not fails the child.
func TestWorkflowAppliesTheTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail Checkpoint
		len  int
		stop subagent.StopReason
	}{
		{"a tail", Checkpoint{Attempt: 1, From: 4, Events: events(4, 2)}, 6, subagent.Completed},
		{"a tail with a gap", Checkpoint{Attempt: 1, From: 5, Events: events(5, 2)}, 4, subagent.Failed},
		{"another attempt's tail", Checkpoint{Attempt: 2, From: 4, Events: events(4, 2)}, 4, subagent.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := make(chan struct{})
			f := &fakeAttempts{plays: []func(context.Context, Attempt) (Outcome, error){
				func(ctx context.Context, at Attempt) (Outcome, error) {
					<-gate
					return Outcome{StopReason: subagent.Completed, Tail: &tc.tail}, nil
				},
			}}
			env := workflowEnv(f)
			env.RegisterDelayedCallback(func() {
				env.UpdateWorkflow(CheckpointUpdate, "cp", &testsuite.TestUpdateCallback{
					OnReject:   func(error) { close(gate) },
					OnComplete: func(any, error) { close(gate) },
				}, Checkpoint{Attempt: 1, Events: events(0, 4)})
			}, time.Millisecond)
			env.ExecuteWorkflow(WorkflowName, testInput())
			out, err := outcome(env)
			if err != nil {
				t.Fatal(err)
			}
			if out.LogLen != tc.len || out.StopReason != tc.stop || out.Tail != nil {
				t.Errorf("outcome %+v: want %s with a log of %d and no tail", out, tc.stop, tc.len)
			}
		})
	}
}

// A cancelled workflow cancels its attempt and ends cancelled. (That it
// waits for the attempt to stop is for the e2e tier: the test environment
// completes the workflow first.)
func TestWorkflowCancellation(t *testing.T) {
	stopped := make(chan struct{})
	f := &fakeAttempts{plays: []func(context.Context, Attempt) (Outcome, error){
		func(ctx context.Context, at Attempt) (Outcome, error) {
			for ctx.Err() == nil {
				activity.RecordHeartbeat(ctx)
				time.Sleep(10 * time.Millisecond)
			}
			close(stopped)
			return Outcome{StopReason: subagent.Aborted}, nil
		}}}
	env := workflowEnv(f)
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
		env.RegisterDelayedCallback(env.CancelWorkflow, time.Millisecond)
	})
	in := testInput()
	in.HeartbeatTimeout = 200 * time.Millisecond // the test environment relays a cancellation at heartbeats
	env.ExecuteWorkflow(WorkflowName, in)
	var ce *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &ce) {
		t.Fatalf("workflow error %v, want canceled", err)
	}
	<-stopped // the attempt saw the cancellation
}

// A worker taken for dead may still be alive: the checkpoint it sends once
// it learns so (the end of the child it stopped) can reach the workflow in
// the same workflow task as its attempt's timeout, before the next attempt
// exists (seen on a loaded machine in TestManyChildrenOverTwoWorkers). The
// check refuses a checkpoint of an attempt whose activity has ended.
func TestCheckRefusesAnEndedAttempt(t *testing.T) {
	env := suite().NewTestWorkflowEnvironment()
	var before, after error
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
		running, settle := workflow.NewFuture(ctx)
		l := &logState{attempt: 1, running: running}
		before = l.check(Checkpoint{Attempt: 1, Events: events(0, 1)})
		settle.SetError(temporal.NewHeartbeatTimeoutError())
		after = l.check(Checkpoint{Attempt: 1, Events: events(0, 1)})
		return nil
	}, workflow.RegisterOptions{Name: "check"})
	env.ExecuteWorkflow("check")
	var ae *temporal.ApplicationError
	if before != nil || !errors.As(after, &ae) || ae.Type() != ErrSuperseded {
		t.Errorf("while running: %v; once ended: %v, want %s", before, after, ErrSuperseded)
	}
}

// The same, through the workflow: the ended attempt's late checkpoint is
// refused, and the next attempt starts from the log without it.
func TestWorkflowRefusesAnEndedAttempt(t *testing.T) {
	f := &fakeAttempts{plays: []func(context.Context, Attempt) (Outcome, error){
		func(context.Context, Attempt) (Outcome, error) { return Outcome{}, temporal.NewHeartbeatTimeoutError() },
		func(context.Context, Attempt) (Outcome, error) { return Outcome{StopReason: subagent.Completed}, nil },
	}}
	env := workflowEnv(f)
	var got error
	answered := false
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		if info.Attempt != 1 || answered {
			return
		}
		answered = true
		env.UpdateWorkflow(CheckpointUpdate, "zombie", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { got = err },
			OnComplete: func(_ any, err error) { got = err },
		}, Checkpoint{Attempt: 1, Events: events(0, 1)})
	})
	env.ExecuteWorkflow(WorkflowName, testInput())
	out, err := outcome(env)
	if err != nil {
		t.Fatal(err)
	}
	var ae *temporal.ApplicationError
	if !errors.As(got, &ae) || ae.Type() != ErrSuperseded {
		t.Errorf("the ended attempt's checkpoint: %v, want %s", got, ErrSuperseded)
	}
	if seen := f.attempts(); len(seen) != 2 || seen[1].From != 0 || out.LogLen != 0 {
		t.Errorf("attempts %+v, outcome %+v: want attempt 2 from an empty log", seen, out)
	}
}
