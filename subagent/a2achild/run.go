package a2achild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
)

// run is one task on the agent.
type run struct {
	cfg       Config
	id        string
	http      *httpClient
	ep        endpoint
	transport *rpcClient
	progress  func(subagent.Progress)
	remote    remote // the conversation continued, if any

	subagent.Settlement
	cancelled   chan struct{} // closed when the run is cancelled
	cancelOnce  sync.Once
	stopParent  func() bool
	disposeOnce sync.Once
	wg          sync.WaitGroup // the run's goroutines but drive

	mu      sync.Mutex
	task    a2a.TaskID
	context string
	state   a2a.TaskState
	status  string // the latest status message's text
	out     artifacts
	usage   map[string]content.Usage
}

// ID implements subagent.Run: minted in the parent's namespace.
func (r *run) ID() string { return r.id }

// LocalAgent implements subagent.Run: nil, the child is remote.
func (r *run) LocalAgent() *agent.Agent { return nil }

// RemoteSession implements subagent.RemoteRun: the task's contextId, and
// its id when it waits for input.
func (r *run) RemoteSession() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	rem := remote{context: r.context}
	if r.state == a2a.TaskStateInputRequired || r.state == a2a.TaskStateAuthRequired {
		rem.task = string(r.task)
	}
	return rem.String()
}

// Dispose implements subagent.Run: it cancels the task (tasks/cancel),
// waits for the run to settle and closes its connections.
func (r *run) Dispose(ctx context.Context) error {
	r.disposeOnce.Do(func() {
		r.cancel()
		<-r.Done()
		r.wg.Wait()
		r.http.close()
	})
	return nil
}

func (r *run) cancel() {
	r.cancelOnce.Do(func() { close(r.cancelled) })
}

// drive sends msg and follows the task until it settles: through the
// stream when the agent streams (falling back to polling when the stream
// breaks), else by polling tasks/get.
func (r *run) drive(msg *a2a.MessageSendParams) {
	defer r.stopParent()
	ctx, stop := context.WithCancel(context.Background())
	finish := func(res subagent.Result) {
		stop()
		r.Settle(res)
	}
	events := make(chan a2a.Event)
	ended := make(chan error, 1)
	r.wg.Go(func() {
		if r.ep.streaming {
			r.stream(ctx, msg, events, ended)
		} else {
			r.send(ctx, msg, events, ended)
		}
	})
	var grace <-chan time.Time
	cancelled := r.cancelled
	cancelSent, polling := false, false
	sendCancel := func() {
		if id := r.taskID(); id != "" && !cancelSent {
			cancelSent = true
			r.wg.Go(func() { r.cancelTask(ctx, id) })
		}
	}
	for {
		select {
		case ev := <-events:
			if r.apply(ev) {
				finish(r.outcome(nil, cancelled == nil))
				return
			}
			if cancelled == nil {
				sendCancel()
			}
		case err := <-ended:
			if err == nil && r.settled() {
				finish(r.outcome(nil, cancelled == nil))
				return
			}
			if id := r.taskID(); id != "" && !polling && cancelled != nil {
				// The stream broke before the task ended: follow the task
				// by polling, which fails once the agent is gone.
				polling = true
				r.wg.Go(func() { r.poll(ctx, id, events, ended) })
				continue
			}
			if err == nil {
				err = errors.New("the agent ended the task's stream before a terminal state")
			}
			finish(r.outcome(err, cancelled == nil))
			return
		case <-cancelled:
			cancelled = nil
			sendCancel()
			grace = time.After(r.cfg.CancelGrace)
		case <-grace:
			finish(r.outcome(nil, true))
			return
		}
	}
}

func (r *run) taskID() a2a.TaskID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.task
}

func (r *run) settled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ends(r.state)
}

// ends reports whether the run settles in state: a terminal one, or one
// that waits for the parent.
func ends(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

func (r *run) cancelTask(ctx context.Context, id a2a.TaskID) {
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CancelGrace)
	defer cancel()
	if _, err := r.transport.CancelTask(cctx, &a2a.TaskIDParams{ID: id}); err != nil && ctx.Err() == nil {
		r.report(subagent.Progress{Kind: subagent.ProgressText, Text: fmt.Sprintf("[tasks/cancel failed: %v]", err)})
	}
}

// emit hands ev to the driver unless the run is over.
func emit(ctx context.Context, events chan<- a2a.Event, ev a2a.Event) bool {
	select {
	case events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *run) stream(ctx context.Context, msg *a2a.MessageSendParams, events chan<- a2a.Event, ended chan<- error) {
	for attempt := 1; ; attempt++ {
		got, retry := false, false
		for ev, err := range r.transport.SendStreamingMessage(ctx, msg) {
			if err != nil {
				if !got && r.busyContext(msg, err, attempt) && sleep(ctx, time.Duration(attempt)*followupBackoff) {
					retry = true // the agent may still be closing the conversation's last task
					break
				}
				ended <- err
				return
			}
			got = true
			if !emit(ctx, events, ev) {
				break
			}
		}
		if !retry {
			ended <- nil
			return
		}
	}
}

// A follow-up sent right after the conversation's last task ended can meet
// an agent still closing that task (an internal error before any event):
// it is sent again, at most followupAttempts times, followupBackoff apart
// and more each time.
const (
	followupAttempts = 4
	followupBackoff  = 50 * time.Millisecond
)

// busyContext reports whether err, the answer to attempt of sending msg,
// is worth sending msg again: msg continues a conversation and the agent
// answered an internal error.
func (r *run) busyContext(msg *a2a.MessageSendParams, err error, attempt int) bool {
	var re *rpcError
	return msg.Message.ContextID != "" && attempt < followupAttempts && errors.As(err, &re) && re.Code == -32603
}

// sleep waits d, or reports false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// send is message/send, returning at once with the task, then polling it.
func (r *run) send(ctx context.Context, msg *a2a.MessageSendParams, events chan<- a2a.Event, ended chan<- error) {
	blocking := false
	msg.Config.Blocking = &blocking
	res, err := r.transport.SendMessage(ctx, msg)
	for attempt := 1; err != nil && r.busyContext(msg, err, attempt) && sleep(ctx, time.Duration(attempt)*followupBackoff); attempt++ {
		res, err = r.transport.SendMessage(ctx, msg)
	}
	if err != nil {
		ended <- err
		return
	}
	if !emit(ctx, events, res) {
		ended <- nil
		return
	}
	if t, ok := res.(*a2a.Task); ok && !ends(t.Status.State) {
		r.poll(ctx, t.ID, events, ended)
		return
	}
	ended <- nil
}

// poll calls tasks/get until the task ends, the run is over or a call
// fails.
func (r *run) poll(ctx context.Context, id a2a.TaskID, events chan<- a2a.Event, ended chan<- error) {
	tick := time.NewTicker(r.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			ended <- nil
			return
		case <-tick.C:
		}
		t, err := r.transport.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
		if err != nil {
			ended <- fmt.Errorf("tasks/get %s: %w", id, err)
			return
		}
		if !emit(ctx, events, t) || ends(t.Status.State) {
			ended <- nil
			return
		}
	}
}

// apply records ev and reports its progress; it reports whether the run
// is over.
func (r *run) apply(ev a2a.Event) bool {
	r.mu.Lock()
	var progress []subagent.Progress
	switch ev := ev.(type) {
	case *a2a.Message:
		text := partsText(ev.Parts)
		r.out.add(&a2a.Artifact{ID: "message", Parts: ev.Parts}, false)
		r.state = a2a.TaskStateCompleted
		r.context = ev.ContextID
		progress = append(progress, subagent.Progress{Kind: subagent.ProgressText, Text: text})
	case *a2a.Task:
		r.task, r.context, r.state = ev.ID, ev.ContextID, ev.Status.State
		r.status = messageText(ev.Status.Message)
		for _, a := range ev.Artifacts {
			r.out.add(a, false)
		}
		r.readUsage(ev.Metadata)
	case *a2a.TaskStatusUpdateEvent:
		r.task, r.context, r.state = ev.TaskID, ev.ContextID, ev.Status.State
		if text := messageText(ev.Status.Message); text != "" {
			r.status = text
			progress = append(progress, subagent.Progress{Kind: subagent.ProgressText, Text: text})
		}
		r.readUsage(ev.Metadata)
		if ev.Final && !ends(r.state) {
			r.state = a2a.TaskStateUnknown
		}
	case *a2a.TaskArtifactUpdateEvent:
		r.task, r.context = ev.TaskID, ev.ContextID
		if ev.Artifact != nil {
			r.out.add(ev.Artifact, ev.Append)
			if text := partsText(ev.Artifact.Parts); text != "" {
				progress = append(progress, subagent.Progress{Kind: subagent.ProgressText, Text: text})
			}
		}
	}
	over := ends(r.state) || r.state == a2a.TaskStateUnknown
	r.mu.Unlock()
	for _, p := range progress {
		r.report(p)
	}
	return over
}

func (r *run) readUsage(meta map[string]any) {
	raw, ok := meta[MetaUsage]
	if !ok {
		return
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return
	}
	var u map[string]content.Usage
	if json.Unmarshal(b, &u) == nil && len(u) > 0 {
		r.usage = u
	}
}

func (r *run) report(p subagent.Progress) {
	if r.progress != nil && p.Text != "" {
		r.progress(p)
	}
}

// outcome is the run's result: from the task's state, or err when
// following the task failed.
func (r *run) outcome(err error, cancelled bool) subagent.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.out.text()
	res := subagent.Result{Usage: r.usage}
	diag := func(format string, args ...any) { res.Diagnostic = subagent.Diagnostic(fmt.Sprintf(format, args...)) }
	switch {
	case r.state.Terminal() && r.state != a2a.TaskStateCanceled:
		// The task's own end wins over a cancellation sent too late.
	case cancelled:
		res.StopReason = subagent.Aborted
	case err != nil:
		res.StopReason = subagent.Failed
		diag("agent %q: %v", r.ep.agent, err)
	}
	if res.StopReason == "" {
		switch r.state {
		case a2a.TaskStateCompleted:
			res.StopReason = subagent.Completed
			if out == "" {
				out = r.status
			}
		case a2a.TaskStateCanceled:
			res.StopReason = subagent.Aborted
		case a2a.TaskStateRejected:
			res.StopReason = subagent.Refusal
			diag("agent %q rejected the task: %s", r.ep.agent, r.status)
		case a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
			// The agent waits for its client: the parent decides, and can
			// answer by continuing this child.
			res.StopReason = subagent.Completed
			what := "input"
			if r.state == a2a.TaskStateAuthRequired {
				what = "authorization"
			}
			out = fmt.Sprintf("[The remote agent %q paused its task: it needs %s before it can go on. Answer by continuing this child, or start another.]\n%s",
				r.ep.agent, what, strings.TrimSpace(r.status+"\n"+out))
		case a2a.TaskStateFailed:
			res.StopReason = subagent.Failed
			diag("agent %q: the task failed: %s", r.ep.agent, r.status)
		default:
			res.StopReason = subagent.Failed
			diag("agent %q: the task ended in state %q: %s", r.ep.agent, r.state, r.status)
		}
	}
	if out != "" {
		res.Output = []content.Block{content.Text(out)}
	}
	return res
}

// artifacts collects a task's artifacts in order, bounded by MaxOutput.
type artifacts struct {
	order []a2a.ArtifactID
	parts map[a2a.ArtifactID]*strings.Builder
	size  int
	cut   bool
}

func (a *artifacts) add(art *a2a.Artifact, appendTo bool) {
	if a.parts == nil {
		a.parts = map[a2a.ArtifactID]*strings.Builder{}
	}
	b, ok := a.parts[art.ID]
	if !ok {
		b = new(strings.Builder)
		a.parts[art.ID] = b
		a.order = append(a.order, art.ID)
	} else if !appendTo {
		a.size -= b.Len()
		b.Reset()
	}
	text := partsText(art.Parts)
	if a.size+len(text) > MaxOutput {
		text, a.cut = text[:max(MaxOutput-a.size, 0)], true
	}
	b.WriteString(text)
	a.size += len(text)
}

// text is the final text artifact: the last one with text.
func (a *artifacts) text() string {
	for i := len(a.order) - 1; i >= 0; i-- {
		if s := a.parts[a.order[i]].String(); s != "" {
			if a.cut {
				s += "…[truncated: the agent's output passed " + fmt.Sprint(MaxOutput) + " bytes]"
			}
			return s
		}
	}
	return ""
}

func partsText(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		switch p := p.(type) {
		case a2a.TextPart:
			b.WriteString(p.Text)
		case *a2a.TextPart:
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}
