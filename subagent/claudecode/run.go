package claudecode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
)

// interruptID is the request id of the provider's one interrupt request.
const interruptID = "dsh-interrupt"

// run is one Claude Code child.
type run struct {
	cfg       Config
	id        string
	proc      *childproc.Process
	w         *writer
	tmpDir    string // the per-run CLAUDE_CONFIG_DIR to remove, or ""
	progress  func(subagent.Progress)
	authorize func(permission.Request) error // decides by the parent's policy; may block

	ready     chan struct{} // closed at system/init (or an early result)
	readyOnce sync.Once
	resultc   chan struct{} // closed at the first result message
	streamEnd chan struct{} // closed when the reader has ended
	readErr   error         // why the reader ended, unless EOF; set before streamEnd closes

	mu        sync.Mutex
	model     string   // from system/init
	session   string   // from system/init: the session --resume continues
	msgID     string   // the assistant message partial belongs to
	partial   string   // the text of the last assistant message with text
	res       *message // the result message
	junk      string   // the start of the last stdout line that was not a message
	cancelled bool

	cancelc    chan struct{} // closed by cancel
	cancelOnce sync.Once
	stopParent func() bool

	subagent.Settlement
	disposeOnce sync.Once
	disposeErr  error
}

var (
	_ subagent.Run = (*run)(nil)
)

func newRun(cfg Config, child *childproc.Process, tmpDir string, req subagent.StartRequest) *run {
	r := &run{cfg: cfg, id: newRunID(), proc: child, w: newWriter(child.Stdin()), tmpDir: tmpDir, progress: req.Progress,
		ready: make(chan struct{}), resultc: make(chan struct{}), streamEnd: make(chan struct{}),
		cancelc: make(chan struct{})}
	label := subagent.ChildLabel(cfg.Name, req.Label)
	r.authorize = func(ask permission.Request) error {
		return subagent.AuthorizeChild(req.Parent, label, r.cancelc, ask)
	}
	return r
}

// RemoteSession implements subagent.RemoteRun: Claude Code's session id.
func (r *run) RemoteSession() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.session
}

// begin starts watching ctx and the child; the run settles on its own.
func (r *run) begin(ctx context.Context) {
	r.stopParent = context.AfterFunc(ctx, r.cancel)
	go r.drive()
}

// cancel interrupts the turn. The run settles aborted whatever the child
// does.
func (r *run) cancel() {
	r.cancelOnce.Do(func() {
		r.mu.Lock()
		r.cancelled = true
		r.mu.Unlock()
		close(r.cancelc)
		r.w.send(interruptRequest(interruptID))
	})
}

func (r *run) drive() {
	res := r.outcome()
	if usd, ok := r.CostUSD(); ok {
		res.CostUSD = usd
	}
	r.stopParent()
	r.Settle(res)
}

// outcome waits for the result message, the end of the stream or a
// cancellation, and says how the run ended.
func (r *run) outcome() subagent.Result {
	select {
	case <-r.resultc:
		return r.fromResult()
	case <-r.streamEnd:
		select {
		case <-r.resultc: // the result was the last line
			return r.fromResult()
		default:
			return r.lost()
		}
	case <-r.cancelc:
		return r.interrupted()
	}
}

// interrupted waits, up to CancelGrace, for the interrupted child's
// result or exit, and stops it when neither comes.
func (r *run) interrupted() subagent.Result {
	timer := time.NewTimer(r.cfg.CancelGrace)
	defer timer.Stop()
	select {
	case <-r.resultc:
		r.w.closeInput()
	case <-r.streamEnd:
	case <-timer.C:
		r.proc.Stop(r.cfg.EOFGrace, r.cfg.TermGrace) // it ignored the interrupt
	}
	return r.aborted()
}

// aborted is the result of a cancelled run: partial output, and the usage
// of a result message if one came.
func (r *run) aborted() subagent.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := subagent.Result{StopReason: subagent.Aborted, Output: textOutput(r.partial)}
	if r.res != nil {
		out.Usage = r.usage(r.res)
	}
	return out
}

// fromResult maps the result message: completed only for subtype success,
// is_error false and a non-blank result.
func (r *run) fromResult() subagent.Result {
	r.w.closeInput() // claude -p exits on stdin EOF after its result
	r.mu.Lock()
	m, cancelled, partial := r.res, r.cancelled, r.partial
	usage := r.usage(m)
	r.mu.Unlock()
	if cancelled {
		return r.aborted()
	}
	if m.Subtype == subtypeSuccess && !m.IsError && strings.TrimSpace(m.Result) != "" {
		return subagent.Result{StopReason: subagent.Completed, Output: []content.Block{content.Text(m.Result)}, Usage: usage}
	}
	stop := subagent.Failed
	if m.IsError && m.APIError == "max_output_tokens" { // the CLI gave up resuming a cut-off answer
		stop = subagent.MaxTokens
	}
	diag := describe(m)
	if r.proc.Exited(min(r.cfg.EOFGrace, time.Second)) {
		diag += "; claude " + r.proc.Diagnostic()
	}
	return subagent.Result{StopReason: stop, Output: textOutput(partial), Usage: usage, Diagnostic: subagent.Diagnostic(diag)}
}

// lost is the outcome of a stream that ended without a result.
func (r *run) lost() subagent.Result {
	if r.readErr != nil || !r.proc.Exited(childproc.ExitGrace) {
		r.proc.Stop(0, r.cfg.TermGrace) // a protocol failure, or a child that closed its stdout
	}
	r.mu.Lock()
	cancelled, partial, junk := r.cancelled, r.partial, r.junk
	r.mu.Unlock()
	if cancelled {
		return r.aborted()
	}
	var err error = &childproc.ExitError{Program: "claude", During: "the turn", Diagnostic: r.proc.Diagnostic()}
	if r.readErr != nil {
		err = fmt.Errorf("%w; claude %s", r.readErr, r.proc.Diagnostic())
	}
	diag := err.Error()
	if junk != "" {
		diag = joinNonEmpty("; ", diag, fmt.Sprintf("last non-JSON stdout line: %q", junk))
	}
	return subagent.Result{StopReason: subagent.Failed, Output: textOutput(partial), Diagnostic: subagent.Diagnostic(diag)}
}

// usage converts the result's per-model usage (else its total, under the
// init model) into usage keyed "claude-code/<model>". Call it with mu held.
func (r *run) usage(m *message) map[string]content.Usage {
	var sum map[string]content.Usage
	if len(m.ModelUsage) > 0 {
		for model, u := range m.ModelUsage {
			sum = subagent.AddUsage(sum, "claude-code/"+model, content.Usage{Input: u.InputTokens, Output: u.OutputTokens,
				CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheCreationInputTokens, Reasoning: u.ThinkingTokens})
		}
		return sum
	}
	if m.Usage != nil {
		model := r.model
		if model == "" {
			model = r.cfg.Model
		}
		if model == "" {
			model = "unknown"
		}
		sum = subagent.AddUsage(sum, "claude-code/"+model, content.Usage{Input: m.Usage.InputTokens, Output: m.Usage.OutputTokens,
			CacheRead: m.Usage.CacheReadInputTokens, CacheWrite: m.Usage.CacheCreationInputTokens})
	}
	return sum
}

// describe explains a result message that is not a success.
func describe(m *message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "claude result %q", m.Subtype)
	if m.IsError {
		b.WriteString(" with is_error")
	}
	if m.APIErrorStatus != nil {
		fmt.Fprintf(&b, ", API status %d", *m.APIErrorStatus)
	}
	if m.APIError != "" {
		fmt.Fprintf(&b, ", api_error %s", m.APIError)
	}
	if m.TerminalReason != "" {
		fmt.Fprintf(&b, ", terminal_reason %s", m.TerminalReason)
	}
	if text := strings.TrimSpace(m.Result); text != "" {
		b.WriteString(": " + text)
	} else if m.Subtype == subtypeSuccess && !m.IsError {
		b.WriteString(": the result text is blank")
	}
	if len(m.Errors) > 0 {
		b.WriteString("; errors: " + strings.Join(m.Errors, "; "))
	}
	if m.TotalCostUSD != nil {
		b.WriteString("; cost $" + strconv.FormatFloat(*m.TotalCostUSD, 'f', -1, 64))
	}
	return b.String()
}

func textOutput(s string) []content.Block {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return []content.Block{content.Text(s)}
}

// ID implements subagent.Run: minted in the parent's namespace, never
// Claude Code's session id.
func (r *run) ID() string { return r.id }

// LocalAgent implements subagent.Run: nil, the child is remote.
func (r *run) LocalAgent() *agent.Agent { return nil }

// CostUSD is the run's total_cost_usd as Claude Code reported it.
func (r *run) CostUSD() (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.res == nil || r.res.TotalCostUSD == nil {
		return 0, false
	}
	return *r.res.TotalCostUSD, true
}

// Dispose implements subagent.Run: it interrupts the turn, waits for the
// run to settle, stops the process (stdin EOF, SIGTERM, SIGKILL to its
// whole process group) and removes the per-run config directory,
// returning once nothing of the run remains.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		childproc.Settle(r.Done(), r.cancel)
		err := r.proc.Stop(r.cfg.EOFGrace, r.cfg.TermGrace)
		<-r.streamEnd
		r.w.stop()
		r.disposeErr = errors.Join(err, removeTemp(r.tmpDir))
	})
	return r.disposeErr
}
