package codex

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/internal/warm"
)

// run is one Codex child running one turn.
type run struct {
	cfg   Config
	id    string
	codex *codexProc // the process of the run's thread
	lease *warm.Lease[*codexProc]
	proc  *childproc.Process
	conn  *conn
	turn  *turnState
	model string // as thread/start reported it

	mu       sync.Mutex
	threadID string // Codex's, private to the run; set once the thread exists
	broken   bool   // Codex ignored the interrupt: its process takes no more children

	// writers are the goroutines that write to Codex for the run: drive
	// never waits on a write (a child that stops reading stdin could block
	// it), teardown waits on them once closing stdin has unblocked them.
	writers sync.WaitGroup

	cancelled  chan struct{} // closed when the run is cancelled
	cancelOnce sync.Once
	stopParent func() bool

	subagent.Settlement

	disposeOnce sync.Once
	disposeErr  error
}

// RemoteSession implements subagent.RemoteRun: the Codex thread id.
func (r *run) RemoteSession() string { return r.threadID }

// start ties the run to ctx and sends the turn.
func (r *run) start(ctx context.Context, input []inputItem) {
	r.stopParent = context.AfterFunc(ctx, r.cancel)
	go r.drive(input)
}

func (r *run) cancel() {
	r.cancelOnce.Do(func() {
		r.turn.markCancelled()
		close(r.cancelled)
	})
}

// drive runs the turn and settles the run.
func (r *run) drive(input []inputItem) {
	res := r.await(input)
	r.stopParent()
	r.turn.settle()
	if u := r.turn.totalUsage(); !u.IsZero() {
		res.Usage = map[string]content.Usage{"codex/" + r.model: u}
	}
	r.Settle(res)
}

// await sends turn/start and waits for the turn to end, Codex to go away,
// a fault on our side, or a cancellation (which interrupts the turn and,
// if Codex ignores that for CancelGrace, stops the process).
func (r *run) await(input []inputItem) subagent.Result {
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	pending := make(chan error, 1)
	r.writers.Go(func() {
		var resp struct {
			Turn turnInfo `json:"turn"`
		}
		err := r.conn.call(sctx, "turn/start", map[string]any{"threadId": r.threadID, "input": input}, &resp)
		if err == nil {
			r.turn.setTurn(resp.Turn.ID)
		}
		pending <- err
	})

	cancelled, aborted, interrupted := r.cancelled, false, false
	interrupt := func() {
		if id := r.turn.turn(); id != "" && !interrupted {
			interrupted = true
			r.writers.Go(func() { r.conn.send("turn/interrupt", map[string]any{"threadId": r.threadID, "turnId": id}) })
		}
	}
	abort := func() subagent.Result { return subagent.Result{StopReason: subagent.Aborted, Output: r.turn.partial()} }
	var grace <-chan time.Time
	for {
		select {
		case err := <-pending:
			pending = nil
			switch {
			case err == nil:
				if aborted {
					interrupt()
				}
			case aborted:
				return abort()
			case lostConnection(err):
				return r.lost()
			default:
				return subagent.Result{StopReason: subagent.Failed, Diagnostic: subagent.Diagnostic("turn/start: " + err.Error())}
			}
		case t := <-r.turn.completed:
			if aborted {
				return abort()
			}
			return r.turn.outcome(t)
		case reason := <-r.turn.fault:
			if aborted {
				return abort()
			}
			interrupt() // stop Codex working until the run is disposed
			return subagent.Result{StopReason: subagent.Failed, Output: r.turn.partial(), Diagnostic: subagent.Diagnostic(reason)}
		case <-r.conn.done:
			select { // the turn may have ended just before the stream
			case t := <-r.turn.completed:
				if !aborted {
					return r.turn.outcome(t)
				}
			default:
			}
			if aborted {
				return abort()
			}
			return r.lost()
		case <-cancelled:
			select { // an already completed turn stays completed
			case t := <-r.turn.completed:
				return r.turn.outcome(t)
			default:
			}
			cancelled, aborted = nil, true
			interrupt()
			timer := time.NewTimer(r.cfg.CancelGrace)
			defer timer.Stop()
			grace = timer.C
		case <-grace:
			if !r.lease.Pooled {
				r.proc.Stop(r.cfg.EOFGrace, r.cfg.TermGrace) // Dispose reports its error
			} else { // the process of other children: retired, not stopped
				r.mu.Lock()
				r.broken = true
				r.mu.Unlock()
			}
			return abort()
		}
	}
}

// lost is the result of a run whose connection to Codex ended mid-turn.
func (r *run) lost() subagent.Result {
	res := subagent.Result{StopReason: subagent.Failed, Output: r.turn.partial()}
	if err := r.conn.closed(); !lostConnection(err) { // Codex wrote something we cannot read
		res.Diagnostic = subagent.Diagnostic(fmt.Sprintf("%v; codex %s", err, r.proc.Diagnostic()))
		return res
	}
	r.proc.Exited(childproc.ExitGrace)
	program := "codex"
	if r.lease.Pooled {
		program = "codex (a warm process, whose exit fails every child it serves)"
	}
	res.Diagnostic = subagent.Diagnostic((&childproc.ExitError{Program: program, During: "the turn", Diagnostic: r.proc.Diagnostic()}).Error())
	return res
}

// How a run leaves its process (see release).
type ending int

const (
	keep   ending = iota // the process serves the next child
	retire               // it serves no new child, and stops after its last
	kill                 // it is stopped now: it does not answer
)

// release ends the run's use of its process. A process of its own is
// stopped (eofGrace, then the ladder) and the writers are waited for. A
// warm one is told that the thread is over (thread/unsubscribe, within
// CancelGrace) and kept for the next child, unless end says otherwise or
// it does not answer, which stops it.
func (r *run) release(end ending, eofGrace time.Duration) error {
	c := r.codex
	r.mu.Lock()
	thread := r.threadID
	r.mu.Unlock()
	if !r.lease.Pooled {
		err := c.stop(eofGrace)
		r.writers.Wait()
		r.lease.Release(false)
		return err
	}
	if thread != "" {
		if end == keep && r.endThread(thread) != nil {
			end = kill
		}
		c.detach(thread)
	}
	if end == kill {
		c.Stop() // its other children fail, as at any exit
	}
	r.writers.Wait()
	r.lease.Release(end != keep)
	return nil
}

// endThread tells Codex that the run's thread is over; an error other than
// Codex's answer means the process does not serve.
func (r *run) endThread(thread string) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.CancelGrace)
	defer cancel()
	err := r.conn.call(ctx, "thread/unsubscribe", map[string]any{"threadId": thread}, nil)
	var rpc *RPCError
	if errors.As(err, &rpc) {
		return nil // answered
	}
	return err
}

// ID implements subagent.Run: minted in the parent's namespace, never
// Codex's thread id.
func (r *run) ID() string { return r.id }

// LocalAgent implements subagent.Run: nil, the child is remote.
func (r *run) LocalAgent() *agent.Agent { return nil }

// Dispose implements subagent.Run: it cancels the turn and waits for the
// run to settle (at most CancelGrace plus the ladder). A process of its
// own is stopped (stdin EOF, on which Codex exits, then SIGTERM and SIGKILL
// to its process group) and a temporary CODEX_HOME removed; a warm one is
// told the thread is over (thread/unsubscribe) and stays for the next
// child. Its time is bounded by the config, so ctx is not consulted.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		r.cancel()
		<-r.Done()
		r.mu.Lock()
		end := keep
		if r.broken {
			end = retire
		}
		r.mu.Unlock()
		r.disposeErr = r.release(end, r.cfg.EOFGrace)
	})
	return r.disposeErr
}
