// Package temporal is the subagent provider whose children run as Temporal
// workflows on a pool of `dsh worker` processes, and the worker side that
// runs them. A child is durable: a worker that dies or stops mid-child does
// not lose it, the child goes on on another worker.
//
// How a child runs. The parent starts a workflow (WorkflowName) whose input
// carries the task and everything the in-process driver applies (persona,
// tool filter, output schema, depth and its cap, the parent's permission
// policy). The workflow runs one activity attempt at a time (ActivityName);
// an attempt builds the child with the worker's models, tools and
// workspace and runs its turn. The child's session log is the source of
// truth and lives in the workflow's history: the attempt adds to it
// through one update (CheckpointUpdate) per step boundary, before each
// model call and before each tool call runs, each applied before the child
// goes on; the first carries the session header and claims the log for
// the attempt (for a new child, that is readiness). The rest of the turn
// (the answer and the turn's end) comes back with the attempt's outcome
// (Outcome.Tail), which the workflow adds to the log: a one-shot child
// costs the cluster one update and three workflow tasks. The workflow
// accepts a checkpoint only from its current attempt while it runs, and
// only if it continues the log exactly, so a worker cut off from the
// cluster cannot write into a child that has moved on.
//
// Durability. When a worker dies or hangs (its heartbeat stops:
// HeartbeatTimeout) or stops (SIGTERM hands its children back at once), the
// workflow starts
// the next attempt, which reads the log from the history, closes its open
// turn as crash repair does, and tells the child to continue: the model
// calls and tool results already in the log are not redone; the model
// call in flight is, and a tool call that was running is reported to the
// model as of unknown outcome; a worker that died after the turn ended but
// before its attempt completed leaves the last model call to be redone.
// MaxResumes bounds the attempts.
//
// Bounds. Each update adds five events to the history (its acceptance and
// completion, and a workflow task), a step one to two updates; the step
// cap (agent.maxSteps, default 100) keeps a one-shot child far under
// Temporal's 51,200-event limit, so no continue-as-new is needed. Payloads are the log's events, shipped in
// checkpoints of at most 1 MiB (Temporal refuses payloads over 2 MiB); a
// single event larger than that fails the child with a clear diagnostic,
// and the workflow refuses checkpoints once its history passes 40 MiB
// (Temporal's limit is 50 MiB). Cancellation reaches a running child
// through the activity's heartbeat: within the worker's heartbeatInterval
// (default 1s) plus one round trip.
//
// The parent follows the workflow's history (a long poll): the accepted
// checkpoints are copied into a session of the parent's store
// (session.Store.Replicate) as they come, so `dsh sessions` shows the
// child with its lineage and the parent's event bus gets its progress.
package temporal

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// Kind is the provider kind's name in configuration files.
const Kind = "temporal"

// Defaults of Config.
const (
	DefaultHostPort          = "localhost:7233"
	DefaultNamespace         = "default"
	DefaultTaskQueue         = "dsh-children"
	DefaultHeartbeatTimeout  = 10 * time.Second
	DefaultHeartbeatInterval = time.Second
	DefaultRunTimeout        = 24 * time.Hour
	DefaultMaxResumes        = 3
)

// Config configures a temporal provider, and the `dsh worker` that reads
// the same block: where the cluster is, which task queue the children go
// through, and how a child is watched.
type Config struct {
	// Name is the provider's registry name (default "temporal").
	Name string `yaml:"-"`
	// HostPort is the cluster's frontend (default localhost:7233, the
	// Temporal CLI's dev server); Namespace (default "default").
	HostPort  string `yaml:"hostPort"`
	Namespace string `yaml:"namespace"`
	// TaskQueue is where children wait for a worker (default dsh-children).
	TaskQueue string `yaml:"taskQueue"`
	// TLS connects over TLS (implied by apiKeyEnv, caFile and certFile);
	// ServerName overrides the name checked in the server's certificate.
	TLS        bool   `yaml:"tls"`
	ServerName string `yaml:"serverName"`
	// CAFile is a PEM bundle of the CAs to trust (default: the system's);
	// CertFile and KeyFile are a client certificate (mTLS).
	CAFile   string `yaml:"caFile"`
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// APIKeyEnv names the variable holding a Temporal Cloud API key. dsh
	// takes it out of its environment at start-up and never logs it.
	APIKeyEnv string `yaml:"apiKeyEnv"`
	// HeartbeatTimeout is how long a child's worker may stay silent before
	// the child continues on another worker (default 10s).
	HeartbeatTimeout time.Duration `yaml:"heartbeatTimeout"`
	// HeartbeatInterval is how often a worker reports on each child
	// (default 1s): it bounds how long a cancellation takes to reach it.
	HeartbeatInterval time.Duration `yaml:"heartbeatInterval"`
	// RunTimeout bounds a child's whole run (default 24h).
	RunTimeout time.Duration `yaml:"runTimeout"`
	// MaxResumes bounds how often a child continues on another worker
	// after its worker died or stopped (default 3).
	MaxResumes int `yaml:"maxResumes"`
	// ChildTimeouts: ReadyTimeout bounds the wait until a worker has
	// claimed the child (default 30s); CancelGrace is how long a cancelled
	// child may take to stop before its workflow is terminated (default
	// 5s). eofGrace and termGrace do not apply.
	subagent.ChildTimeouts `yaml:",inline"`

	// Sessions is the parent's session store, which keeps a copy of each
	// child's log with its lineage (nil: a copy lives only as long as its
	// run).
	Sessions *session.Store `yaml:"-"`
	// Client, when set, is used instead of connecting to HostPort (for
	// programs and tests that hold one); Close leaves it open.
	Client client.Client `yaml:"-"`
	// Getenv reads APIKeyEnv (nil: no key can be read).
	Getenv func(string) string `yaml:"-"`
	// Log receives the Temporal SDK's log (default slog.Default()).
	Log *slog.Logger `yaml:"-"`
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	c.Name = cmp.Or(c.Name, Kind)
	c.HostPort = cmp.Or(c.HostPort, DefaultHostPort)
	c.Namespace = cmp.Or(c.Namespace, DefaultNamespace)
	c.TaskQueue = cmp.Or(c.TaskQueue, DefaultTaskQueue)
	c.HeartbeatTimeout = cmp.Or(c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.RunTimeout = cmp.Or(c.RunTimeout, DefaultRunTimeout)
	c.MaxResumes = cmp.Or(c.MaxResumes, DefaultMaxResumes)
	c.ChildTimeouts = c.ChildTimeouts.WithDefaults()
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// Check validates c as New and the worker read it, without connecting.
func (c Config) Check() error {
	raw := c
	c = c.withDefaults()
	bad := func(field, format string, args ...any) error {
		return &subagent.ConfigError{Kind: Kind, Provider: c.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	key, d := c.Negative()
	switch {
	case key != "":
		return bad(key, "must be positive, got %s", d)
	case raw.EOFGrace != 0 || raw.TermGrace != 0:
		return bad("eofGrace", "eofGrace and termGrace do not apply to a temporal child (it is no process of this host)")
	case c.HeartbeatTimeout < 0 || c.HeartbeatInterval < 0 || c.RunTimeout < 0:
		return bad("heartbeatTimeout", "heartbeatTimeout, heartbeatInterval and runTimeout must be positive")
	case c.HeartbeatInterval*2 > c.HeartbeatTimeout:
		return bad("heartbeatInterval", "must be at most half of heartbeatTimeout (%s), got %s", c.HeartbeatTimeout, c.HeartbeatInterval)
	case c.MaxResumes < 0:
		return bad("maxResumes", "must not be negative, got %d", c.MaxResumes)
	case (c.CertFile == "") != (c.KeyFile == ""):
		return bad("certFile", "certFile and keyFile go together")
	}
	_, err := c.tlsConfig()
	if err != nil {
		return bad("caFile", "%v", err)
	}
	return nil
}

// Provider runs children as Temporal workflows.
type Provider struct {
	cfg    Config
	client client.Client
	owned  bool // the provider dialed client

	// checking admits one worker check at a time; seen is when the last
	// one found workers (guarded by checking).
	checking chan struct{}
	seen     time.Time
}

// New validates cfg and returns a provider. It does not connect: the first
// start does.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Provider{cfg: cfg, client: cfg.Client, checking: make(chan struct{}, 1)}
	if p.client == nil {
		c, err := dial(cfg, true)
		if err != nil {
			return nil, &subagent.ConfigError{Kind: Kind, Provider: cfg.Name, Field: "hostPort", Msg: err.Error()}
		}
		p.client, p.owned = c, true
	}
	return p, nil
}

// Close closes the connection the provider made to the cluster. Runs still
// live can no longer be followed.
func (p *Provider) Close() {
	if p.owned {
		p.client.Close()
	}
}

// Name implements subagent.Provider.
func (p *Provider) Name() string { return p.cfg.Name }

// Capabilities implements subagent.Provider: the worker runs the child with
// the in-process driver, which applies the output schema, depth cap, tool
// filter and persona. Policy is not declared: the parent's own policy goes
// with every child, but hooks are commands of the parent's host, which a
// worker cannot run.
func (p *Provider) Capabilities() subagent.Capabilities {
	return subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true}
}

// InheritsParentContext implements subagent.Provider: false.
func (p *Provider) InheritsParentContext() bool { return false }

// Error codes of this provider.
const (
	// CodeNoWorker: no worker polls the task queue, or none claimed the
	// child within readyTimeout.
	CodeNoWorker = "NO_WORKER"
	// CodeCluster: the cluster could not be reached or refused a call.
	CodeCluster = "CLUSTER_UNAVAILABLE"
	// CodeRefused: a worker could not start the child (a route, tool or
	// persona its configuration lacks): the error says why.
	CodeRefused = "CHILD_REFUSED"
)

// Error is a failure of this provider with a stable code.
type Error struct {
	Code string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "temporal: " + e.Msg + ": " + e.Err.Error()
	}
	return "temporal: " + e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// Start starts the child's workflow and returns once a worker has claimed
// it. With no worker polling the task queue it fails at once (NO_WORKER);
// a start ctx cancelled before the claim terminates the workflow and fails
// with ABORTED_BEFORE_READY.
func (p *Provider) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	if err := subagent.CheckLineage(p.cfg.Name, req); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
	}
	in, err := p.input(req)
	if err != nil {
		return nil, err
	}
	if err := p.checkWorkers(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, subagent.AbortedBeforeReady(p.cfg.Name, context.Cause(ctx))
		}
		return nil, err
	}
	wf, err := p.startWorkflow(ctx, in)
	if err != nil {
		return nil, err
	}
	r := newRun(p, req, in, wf.GetID(), wf.GetRunID())
	if err := r.awaitReady(ctx); err != nil {
		return nil, err
	}
	r.relayCancel(ctx)
	return r, nil
}

// startWorkflow starts the child's workflow. The start is not cut short
// by ctx: whether the workflow exists must be known, to terminate it if ctx
// ended meanwhile. A call the SDK gave up on (it waits at most 10s for one
// call) while the cluster was overloaded by a burst of starts is made
// again, within readyTimeout: if the first call did start the workflow,
// the next one returns it (its id is the child's fresh session id, so it
// can be no other's).
func (p *Provider) startWorkflow(ctx context.Context, in Input) (client.WorkflowRun, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ReadyTimeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		wf, err := p.client.ExecuteWorkflow(sctx, client.StartWorkflowOptions{
			ID:                       WorkflowID(in.SessionID),
			TaskQueue:                p.cfg.TaskQueue,
			WorkflowExecutionTimeout: p.cfg.RunTimeout,
			// A stuck worker holds a workflow task this long before another
			// worker gets it: no longer than it takes to notice it is stuck.
			WorkflowTaskTimeout:      min(p.cfg.HeartbeatTimeout, 10*time.Second),
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		}, WorkflowName, in)
		if err == nil {
			return wf, nil
		}
		var timedOut *serviceerror.DeadlineExceeded
		if !errors.As(err, &timedOut) && status.Code(err) != codes.DeadlineExceeded || sctx.Err() != nil {
			return nil, &Error{Code: CodeCluster, Msg: "start the child's workflow on " + p.cfg.HostPort, Err: err}
		}
		p.cfg.Log.Debug("temporal: the start of a child timed out; starting it again", "workflow", WorkflowID(in.SessionID), "err", err)
		select {
		case <-time.After(backoff):
		case <-sctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// input is the workflow input of req.
func (p *Provider) input(req subagent.StartRequest) (Input, error) {
	in := Input{SessionID: uuid.NewString(), ParentSession: req.Parent.ID(), Depth: req.Depth,
		MaxDepth: req.MaxDepth, Label: req.Label, Prompt: req.Prompt, AgentOptions: req.AgentOptions, ToolFilter: req.ToolFilter,
		Persona: req.Persona, Policy: req.Parent.Policy(), HeartbeatTimeout: p.cfg.HeartbeatTimeout, RunTimeout: p.cfg.RunTimeout,
		MaxResumes: p.cfg.MaxResumes}
	if req.Policy != nil {
		in.Policy = in.Policy.NarrowBy(*req.Policy)
	}
	if used, budget := req.Parent.TokensUsed(); budget > 0 {
		in.TokenBudget = max(budget-used, 1)
	}
	if req.OutputSchema != nil {
		b, err := json.Marshal(req.OutputSchema)
		if err != nil {
			return Input{}, fmt.Errorf("temporal: output schema: %w", err)
		}
		in.OutputSchema = b
	}
	if req.Cwd != "" {
		return Input{}, &subagent.Error{Code: subagent.CodeInvalidRequest, Provider: p.cfg.Name,
			Msg: fmt.Sprintf("provider %q runs a child in its worker's workspace: a working directory of this host (%s) cannot go with it", p.cfg.Name, req.Cwd)}
	}
	if !req.Hooks.Empty() {
		return Input{}, &subagent.Error{Code: subagent.CodeUnsupportedCapability, Provider: p.cfg.Name, Capability: subagent.CapPolicy,
			Msg: fmt.Sprintf("provider %q cannot run hooks: they are commands of the parent's host", p.cfg.Name)}
	}
	return in, nil
}

// pollerWindow is how recent a poll must be for its worker to count as
// alive: a poll lasts up to about a minute.
const pollerWindow = 90 * time.Second

// workersFresh is how long a check that found workers stands for the
// starts that follow it: a burst of children costs the cluster one check,
// not two calls per child.
const workersFresh = 5 * time.Second

// checkWorkers fails fast when no worker polls the task queue. Starts wait
// for a check under way and take its finding.
func (p *Provider) checkWorkers(ctx context.Context) error {
	select {
	case p.checking <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-p.checking }()
	if !p.seen.IsZero() && time.Since(p.seen) < workersFresh {
		return nil
	}
	if err := p.describeWorkers(ctx); err != nil {
		return err
	}
	p.seen = time.Now()
	return nil
}

// describeWorkers asks the cluster whether workers poll the task queue.
func (p *Provider) describeWorkers(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, p.cfg.ReadyTimeout)
	defer cancel()
	for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := p.client.DescribeTaskQueue(cctx, p.cfg.TaskQueue, typ)
		if err != nil {
			return &Error{Code: CodeCluster, Msg: fmt.Sprintf("describe task queue %s on %s", p.cfg.TaskQueue, p.cfg.HostPort), Err: err}
		}
		alive := false
		for _, poller := range resp.GetPollers() {
			alive = alive || time.Since(poller.GetLastAccessTime().AsTime()) < pollerWindow
		}
		if !alive {
			return &Error{Code: CodeNoWorker, Msg: fmt.Sprintf("no worker polls task queue %s in namespace %s on %s: start one with `dsh worker`",
				p.cfg.TaskQueue, p.cfg.Namespace, p.cfg.HostPort)}
		}
	}
	return nil
}
