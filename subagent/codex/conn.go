package codex

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"
)

// handler receives what Codex sends on its own initiative. Both methods run
// on the connection's reading goroutine, in order, and must not block.
type handler interface {
	// notify handles a notification.
	notify(method string, params json.RawMessage)
	// request answers a server request with a result, or with an error
	// when it cannot be answered.
	request(method string, params json.RawMessage) (any, *wireError)
}

// conn is a JSON-RPC connection to Codex over its stdio.
type conn struct {
	w  io.Writer
	rd *reader
	h  handler

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan reply

	done chan struct{} // closed when serve returns
	err  error         // why serve returned (io.EOF at a clean end), set before done closes

	// async answers each server request on a goroutine of its own (set
	// before serve): a shared process's requests do not wait on one
	// another's permission asks. Such a goroutine ends with its ask, which
	// its run's cancellation ends.
	async bool
}

type reply struct {
	result json.RawMessage
	err    *wireError
}

// outgoing is a message we write. Like Codex, we omit "jsonrpc".
type outgoing struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params any             `json:"params,omitempty"`
	Result any             `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

func newConn(w io.Writer, r io.Reader, maxLine int, h handler) *conn {
	return &conn{w: w, rd: newReader(r, maxLine), h: h, pending: map[int64]chan reply{}, done: make(chan struct{})}
}

// serve reads and dispatches messages until the stream ends or breaks.
func (c *conn) serve() {
	defer close(c.done)
	for {
		m, err := c.rd.next()
		if err != nil {
			c.err = err
			return
		}
		switch m.kind() {
		case kindResponse:
			id, ok := m.intID()
			if !ok {
				continue // not one of ours
			}
			c.mu.Lock()
			ch := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- reply{result: m.Result, err: m.Error}
			}
		case kindNotification:
			c.h.notify(m.Method, m.Params)
		case kindRequest:
			if c.async {
				go c.answer(m)
			} else {
				c.answer(m)
			}
		}
	}
}

// answer answers a server request through the handler.
func (c *conn) answer(m message) {
	result, werr := c.h.request(m.Method, m.Params)
	out := outgoing{ID: m.ID, Error: werr}
	if werr == nil {
		out.Result = result
		if result == nil {
			out.Result = struct{}{}
		}
	}
	c.write(out) // a failed write surfaces as the end of the stream
}

// closed returns why the stream ended, once done is closed.
func (c *conn) closed() error {
	if c.err == nil || c.err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return c.err
}

// call sends a request and decodes its result into out (when non-nil).
func (c *conn) call(ctx context.Context, method string, params, out any) error {
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	ch := make(chan reply, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(outgoing{ID: rawID(id), Method: method, Params: params}); err != nil {
		return err
	}
	var r reply
	select {
	case r = <-ch:
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.done:
		select {
		case r = <-ch:
		default:
			return c.closed()
		}
	}
	if r.err != nil {
		return &RPCError{Method: method, Code: r.err.Code, Message: r.err.Message, Data: r.err.Data}
	}
	if out != nil && len(r.result) > 0 {
		if err := json.Unmarshal(r.result, out); err != nil {
			return &ProtocolError{Msg: "bad " + method + " result (" + err.Error() + ")", Line: quote(r.result)}
		}
	}
	return nil
}

// send writes a request whose answer is not awaited (it is dropped).
func (c *conn) send(method string, params any) error {
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	c.mu.Unlock()
	return c.write(outgoing{ID: rawID(id), Method: method, Params: params})
}

// notify writes a notification.
func (c *conn) notify(method string, params any) error {
	return c.write(outgoing{Method: method, Params: params})
}

func (c *conn) write(m outgoing) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(b, '\n'))
	return err
}

func rawID(id int64) json.RawMessage { return json.RawMessage(strconv.FormatInt(id, 10)) }
