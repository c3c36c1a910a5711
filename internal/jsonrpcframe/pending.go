package jsonrpcframe

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// Pending holds the ids of a client's requests passed to a server's SDK
// and not answered yet, so that the end of the client's input does not
// drop them: a gate adds each request it passes, the server's writer
// (Watch) marks each response, and the end of the input waits for none
// to be left (`echo '<initialize>' | dsh acp` always gets its answer).
type Pending struct {
	mu      sync.Mutex
	ids     map[string]int
	changed chan struct{} // closed and replaced at each answer
}

// NewPending returns an empty Pending.
func NewPending() *Pending {
	return &Pending{ids: map[string]int{}, changed: make(chan struct{})}
}

func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// Add records a request passed to the SDK.
func (p *Pending) Add(id json.RawMessage) {
	p.mu.Lock()
	p.ids[idKey(id)]++
	p.mu.Unlock()
}

// answered records a response written to the client.
func (p *Pending) answered(id json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := idKey(id)
	if p.ids[k] == 0 {
		return
	}
	if p.ids[k]--; p.ids[k] == 0 {
		delete(p.ids, k)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Pending) state() (int, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids), p.changed
}

// Wait returns true once every recorded request is answered, false when
// ctx ends first.
func (p *Pending) Wait(ctx context.Context) bool {
	for {
		n, changed := p.state()
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

// Watch returns a writer to w that marks each response to a recorded
// request as answered, and then, when the write succeeded, calls after
// (if not nil) with the frame.
func (p *Pending) Watch(w io.Writer, after func(frame []byte)) io.Writer {
	return watch{w: w, p: p, after: after}
}

type watch struct {
	w     io.Writer
	p     *Pending
	after func(frame []byte)
}

func (a watch) Write(b []byte) (int, error) {
	n, err := a.w.Write(b)
	if pending, _ := a.p.state(); pending > 0 {
		if id, isResponse, isRequest := Peek(b); isResponse && !isRequest && id != nil {
			a.p.answered(id)
			if a.after != nil && err == nil {
				a.after(b)
			}
		}
	}
	return n, err
}
