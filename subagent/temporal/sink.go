package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/dsh-go/dsh/session"
)

// execution names a child's workflow run.
type execution struct{ id, runID string }

// logStore is where an attempt reads and extends its child's log: the
// child's workflow.
type logStore interface {
	// read returns the first n events of the log.
	read(ctx context.Context, wf execution, n int) ([]session.Event, error)
	// write adds cp to the log. The workflow's refusal is a
	// *temporal.ApplicationError of type ErrSuperseded or ErrHistoryFull.
	write(ctx context.Context, wf execution, cp Checkpoint) error
}

// clusterLog is a worker's logStore: the workflow's history, and its
// checkpoint update.
type clusterLog struct{ c client.Client }

func (l clusterLog) read(ctx context.Context, wf execution, n int) ([]session.Event, error) {
	it := l.c.GetWorkflowHistory(ctx, wf.id, wf.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var r logReader
	var out []session.Event
	for len(out) < n && it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		cp, err := r.add(e)
		if err != nil {
			return nil, err
		}
		if cp != nil {
			out = append(out, cp.Events...)
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("the history of %s holds %d of the log's %d events", wf.id, len(out), n)
	}
	return out[:n], nil
}

func (l clusterLog) write(ctx context.Context, wf execution, cp Checkpoint) error {
	h, err := l.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     fmt.Sprintf("%d.%d.%d", cp.Attempt, cp.From, len(cp.Events)),
		WorkflowID:   wf.id,
		RunID:        wf.runID,
		UpdateName:   CheckpointUpdate,
		Args:         []any{cp},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// Checkpoint sizes: Temporal refuses payloads over 2 MiB and warns over
// 512 KiB.
const (
	maxCheckpointBytes = 1 << 20
	maxEventBytes      = 2<<20 - 64<<10
)

// sink persists the session of a child this worker runs. The runtime
// creates the session through it (open); then it adds the session's events
// to the log at each step boundary (see shipsAt), before the child goes
// on: the agent flushes its session before each model call and each tool
// call. The first checkpoint of an attempt carries the session header: it
// claims the log for the attempt (readiness, for a new child). What the
// turn adds after its last boundary (the answer and the turn's end) is not
// written through an update: the attempt returns it with its outcome
// (finish), which saves the cluster a workflow task per child. It skips the
// events the log holds already (the seed of a child that continues).
type sink struct {
	store   logStore
	wf      execution
	attempt int
	ctx     context.Context // governs writes; a cancelled child still writes its end
	timeout time.Duration   // bounds each write

	silenced atomic.Bool // the worker is handing the child back: what follows is not the child's

	mu       sync.Mutex
	next     int // the log's length on the cluster
	buffered []session.Event
	header   *session.Header // set by open; the first checkpoint carries it
	claimed  bool            // a checkpoint of this attempt was accepted
	err      error           // sticky: the first failed write
}

// open routes the child's session, whose header is h, to the sink; the
// first checkpoint claims the log with h.
func (s *sink) open(h session.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = &h
}

// isOpen reports whether the runtime created the child's session through
// the sink.
func (s *sink) isOpen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.header != nil
}

// Append implements session.Persister.
func (s *sink) Append(events []session.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	ship := false
	for _, e := range events {
		if e.Seq < int64(s.next) {
			continue
		}
		if want := int64(s.next + len(s.buffered)); e.Seq != want {
			return fmt.Errorf("temporal: session event has seq %d, want %d", e.Seq, want)
		}
		s.buffered = append(s.buffered, e)
		ship = ship || shipsAt(e.Type)
	}
	if !ship {
		return nil
	}
	return s.ship(0)
}

// shipsAt reports whether an event ends a batch of the log: a step about
// to call the model (the steps before it are then in the log, and are not
// redone) and a tool call about to run. The turn's end is not one: it goes
// with the attempt's outcome.
func shipsAt(typ string) bool {
	switch typ {
	case session.TypeStepStart, session.TypeToolCall:
		return true
	}
	return false
}

// Close implements session.Persister. What is buffered stays for finish.
func (s *sink) Close() error { return s.failure() }

// finish returns the checkpoint that goes with the attempt's outcome: the
// events not yet in the log (nil when there are none). What does not fit
// one checkpoint is written first.
func (s *sink) finish() (*Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if s.silenced.Load() || len(s.buffered) == 0 {
		return nil, nil
	}
	if err := s.ship(maxCheckpointBytes); err != nil {
		return nil, err
	}
	cp := s.checkpoint(len(s.buffered))
	s.next += len(s.buffered)
	s.buffered = nil
	return &cp, nil
}

// silence drops what the session writes from now on.
func (s *sink) silence() { s.silenced.Store(true) }

// failure returns the first failed write, if any.
func (s *sink) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// length returns the length of the log on the cluster.
func (s *sink) length() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// checkpoint is the checkpoint of the first n buffered events; the
// attempt's first carries the header. s.mu must be held.
func (s *sink) checkpoint(n int) Checkpoint {
	cp := Checkpoint{Attempt: s.attempt, From: s.next, Events: s.buffered[:n:n]}
	if !s.claimed {
		cp.Header = s.header
	}
	return cp
}

// ship writes the buffered events in checkpoints of at most
// maxCheckpointBytes, until no more than keep bytes of them are left.
// s.mu must be held.
func (s *sink) ship(keep int) error {
	for len(s.buffered) > 0 {
		if s.silenced.Load() {
			s.buffered = nil
			return nil
		}
		n, size, total, full := 0, 0, 0, false
		for _, e := range s.buffered {
			b, err := e.MarshalJSON()
			if err != nil {
				return s.fail(err)
			}
			if len(b) > maxEventBytes {
				return s.fail(temporal.NewNonRetryableApplicationError(fmt.Sprintf(
					"event %d (%s) is %d bytes: larger than a Temporal payload may be", e.Seq, e.Type, len(b)), ErrChild, nil))
			}
			if full = full || n > 0 && size+len(b) > maxCheckpointBytes; full && keep == 0 {
				break
			}
			if !full {
				n, size = n+1, size+len(b)
			}
			total += len(b)
		}
		if keep > 0 && total <= keep {
			return nil
		}
		if err := s.write(s.checkpoint(n)); err != nil {
			return err
		}
		s.claimed = true
		s.next += n
		s.buffered = s.buffered[n:]
	}
	s.buffered = nil
	return nil
}

// write writes cp, remembering a failure. s.mu must be held.
func (s *sink) write(cp Checkpoint) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	if err := s.store.write(ctx, s.wf, cp); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *sink) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// superseded reports whether err is the workflow's refusal of a checkpoint
// from an attempt that no longer runs the child.
func superseded(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ErrSuperseded
}

// sessions is the session backend of a worker's runtime: the session of
// each child the worker runs goes to the child's workflow through its sink;
// every other session (the in-process children of those children) goes to
// the worker's own store.
type sessions struct {
	inner session.Backend
	mu    sync.Mutex
	sinks map[string]*sink         // by session id
	gone  map[string]chan struct{} // by session id: closed when its sink is forgotten
}

// expect routes the session id to s until forget. While an earlier attempt
// on this worker still holds id (its heartbeat timed out, and it is
// stopping its child), it waits for that attempt's forget, or for ctx.
func (b *sessions) expect(ctx context.Context, id string, s *sink) error {
	for {
		b.mu.Lock()
		if b.sinks == nil {
			b.sinks, b.gone = map[string]*sink{}, map[string]chan struct{}{}
		}
		gone, held := b.gone[id]
		if !held {
			b.sinks[id], b.gone[id] = s, make(chan struct{})
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-gone:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// forget ends what expect began: id goes to the worker's store again, and
// an attempt waiting for it may take it.
func (b *sessions) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gone, ok := b.gone[id]; ok {
		close(gone)
	}
	delete(b.sinks, id)
	delete(b.gone, id)
}

// Create implements session.Backend: a child's session goes to its sink.
func (b *sessions) Create(h session.Header) (session.Persister, error) {
	b.mu.Lock()
	s := b.sinks[h.ID]
	b.mu.Unlock()
	if s == nil {
		return b.inner.Create(h)
	}
	s.open(h)
	return s, nil
}

// Load implements session.Backend.
func (b *sessions) Load(id string) (session.Header, []session.Event, session.Persister, error) {
	return b.inner.Load(id)
}

// List implements session.Backend.
func (b *sessions) List() ([]session.Header, error) { return b.inner.List() }
