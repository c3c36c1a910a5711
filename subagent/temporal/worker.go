package temporal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// WorkerOptions configure a worker.
type WorkerOptions struct {
	// Config is a temporal provider block: the cluster, the task queue and
	// the heartbeat interval (the other fields are the parent's).
	Config Config
	// Concurrency is how many children the worker runs at once (default 8).
	Concurrency int
	// Identity names the worker on the cluster (default: the SDK's,
	// pid@host).
	Identity string
	// StopTimeout bounds how long a stopping worker waits for its children
	// to be handed back (default 10s).
	StopTimeout time.Duration
}

// DefaultConcurrency is WorkerOptions.Concurrency when unset.
const DefaultConcurrency = 8

// Worker runs children from a task queue: `dsh worker`. Build its
// runtime's session store over Sessions and wrap the runtime's subagent
// providers with CapDepth, then Run it.
type Worker struct {
	opts     WorkerOptions
	sessions *sessions
	caps     *depthCaps
}

// NewWorker validates opts and returns a worker.
func NewWorker(opts WorkerOptions) (*Worker, error) {
	if err := opts.Config.Check(); err != nil {
		return nil, err
	}
	if opts.Concurrency < 0 || opts.StopTimeout < 0 {
		return nil, errors.New("temporal worker: concurrency and stop timeout must not be negative")
	}
	opts.Config = opts.Config.withDefaults()
	opts.Concurrency = cmp.Or(opts.Concurrency, DefaultConcurrency)
	opts.StopTimeout = cmp.Or(opts.StopTimeout, 10*time.Second)
	return &Worker{opts: opts, sessions: &sessions{inner: session.NewMemoryBackend()}, caps: &depthCaps{}}, nil
}

// Sessions returns the session backend to build the worker's runtime
// with: each child's session goes to its workflow, every other session to
// inner. Call it once, before Run.
func (w *Worker) Sessions(inner session.Backend) session.Backend {
	w.sessions.inner = inner
	return w.sessions
}

// CapDepth wraps a provider of the worker's runtime so that a child the
// worker runs cannot delegate deeper than its parent's cap allows.
func (w *Worker) CapDepth(p subagent.Provider) subagent.Provider {
	return capped{Provider: p, caps: w.caps}
}

// Run connects to the cluster and runs children until ctx ends. Then it
// stops polling and hands the children it runs back to the cluster, which
// gives them to another worker; it returns once they are handed back.
func (w *Worker) Run(ctx context.Context, host Host) error {
	if host.Agents == nil {
		return errors.New("temporal worker: the host has no agent registry")
	}
	cfg := w.opts.Config
	c := cfg.Client
	if c == nil {
		var err error
		if c, err = dial(cfg, false); err != nil {
			return fmt.Errorf("temporal worker: connect to %s: %w", cfg.HostPort, err)
		}
		defer c.Close()
	}
	driver, err := inproc.New(inproc.Config{Name: cfg.Name, Agents: host.Agents})
	if err != nil {
		return err
	}
	tw := worker.New(c, cfg.TaskQueue, w.sdkOptions())
	tw.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	acts := &activities{driver: driver, host: host, store: clusterLog{c}, sessions: w.sessions, caps: w.caps,
		heartbeat: max(cfg.HeartbeatInterval/2, 10*time.Millisecond), timeout: time.Minute}
	tw.RegisterActivityWithOptions(acts.RunChild, activity.RegisterOptions{Name: ActivityName})
	if err := tw.Start(); err != nil {
		return fmt.Errorf("temporal worker: %w", err)
	}
	<-ctx.Done()
	tw.Stop()
	return nil
}

// sdkOptions are the options of the worker's SDK worker.
func (w *Worker) sdkOptions() worker.Options {
	cfg := w.opts.Config
	wft, act := pollers(w.opts.Concurrency)
	return worker.Options{
		MaxConcurrentActivityExecutionSize: w.opts.Concurrency,
		MaxHeartbeatThrottleInterval:       cfg.HeartbeatInterval,
		WorkerStopTimeout:                  w.opts.StopTimeout,
		Identity:                           w.opts.Identity,
		// A dead worker's workflow tasks wait this long on its sticky
		// queue before another worker gets them: keep it within half the
		// time it takes to notice the death (the SDK's default is 5s).
		StickyScheduleToStartTimeout:     min(cfg.HeartbeatTimeout/2, 5*time.Second),
		MaxConcurrentWorkflowTaskPollers: wft,
		MaxConcurrentActivityTaskPollers: act,
	}
}

// pollers returns how many workflow-task and activity-task polls a worker
// running concurrency children at once keeps open. Each child costs three
// workflow tasks (its start, its claim, its end) and one activity task;
// the SDK's 2 and 2 leave children of a busy worker waiting in the queue
// while the worker has room.
func pollers(concurrency int) (workflowTasks, activityTasks int) {
	return min(max(concurrency/4, 2), 16), min(max(concurrency/8, 2), 8)
}
