package acpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/jsonrpcframe"
)

// DefaultDrainTimeout is how long the server goes on answering the
// client's pending requests after its input ended, before it cancels the
// turns still running (see Options.DrainTimeout).
const DefaultDrainTimeout = 10 * time.Second

// errInputClosed is the cause of the server's input context once the
// client's input has ended: nothing the server asks can be answered then.
var errInputClosed = errors.New("the client's input closed")

// inflight holds the ids of the client's requests passed to the SDK and
// not answered yet, so that the end of the client's input does not drop
// them: `echo '<initialize>' | dsh acp` always gets its answer.
type inflight struct {
	mu      sync.Mutex
	ids     map[string]int
	changed chan struct{} // closed and replaced at each answer
}

func newInflight() *inflight {
	return &inflight{ids: map[string]int{}, changed: make(chan struct{})}
}

func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// add records a request passed to the SDK.
func (f *inflight) add(id json.RawMessage) {
	f.mu.Lock()
	f.ids[idKey(id)]++
	f.mu.Unlock()
}

// answered records a response written to the client.
func (f *inflight) answered(id json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := idKey(id)
	if f.ids[k] == 0 {
		return
	}
	if f.ids[k]--; f.ids[k] == 0 {
		delete(f.ids, k)
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *inflight) pending() (int, chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids), f.changed
}

// wait returns true once every recorded request is answered, false when
// ctx ends first.
func (f *inflight) wait(ctx context.Context) bool {
	for {
		n, changed := f.pending()
		if n == 0 {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// answerWatch writes the server's frames to w, telling f and after of
// each response to a request of the client's.
type answerWatch struct {
	w     io.Writer
	f     *inflight
	after func(frame []byte)
}

func (a answerWatch) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	if pending, _ := a.f.pending(); pending > 0 {
		if id, isResponse, isRequest := jsonrpcframe.Peek(p); isResponse && !isRequest && id != nil {
			a.f.answered(id)
			if a.after != nil && err == nil {
				a.after(p)
			}
		}
	}
	return n, err
}

// drain runs once the client's input has ended cleanly: what the server
// would ask the client fails at once, the pending requests are answered
// (prompts finish their turns) for at most DrainTimeout, then the turns
// still running are cancelled, and their prompts answered cancelled.
func (s *server) drain(ctx context.Context, f *inflight) {
	s.closeInput(errInputClosed)
	wait, cancel := context.WithTimeout(ctx, s.opts.DrainTimeout)
	defer cancel()
	if f.wait(wait) || ctx.Err() != nil {
		return
	}
	s.opts.Log.Warn("acp: the client's input ended with requests pending; cancelling the running turns", "after", s.opts.DrainTimeout)
	s.mu.Lock()
	var sessions []*acpSession
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		s.Cancel(context.Background(), acpCancel(ss))
	}
	last, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	f.wait(last)
}

func acpCancel(ss *acpSession) acpsdk.CancelNotification {
	return acpsdk.CancelNotification{SessionId: ss.id}
}
