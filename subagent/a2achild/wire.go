package a2achild

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
)

// rpcClient speaks A2A 0.3's JSON-RPC binding (message/send,
// message/stream, tasks/get, tasks/cancel) with a2a-go's types. It is the
// provider's own rather than a2a-go's a2aclient, which links gRPC into
// every dsh binary, and its event lines may be as long as a response
// (a2aclient's stop at 64 KiB).
type rpcClient struct {
	url string
	hc  *http.Client
}

// rpcError is the agent's JSON-RPC error answer.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("the agent answered error %d: %s", e.Code, e.Message)
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// post sends one JSON-RPC request and returns the HTTP response, checked
// for status 200.
func (c *rpcClient) post(ctx context.Context, method string, params any, accept string) (*http.Response, error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": uuid.NewString(), "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if resp.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: HTTP %s: %s", method, resp.Status, strings.TrimSpace(string(snippet)))
	}
	return resp, nil
}

// call sends a request and decodes its result into out.
func (c *rpcClient) call(ctx context.Context, method string, params, out any) error {
	resp, err := c.post(ctx, method, params, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r rpcResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("%s: the answer is not JSON-RPC: %w", method, err)
	}
	if r.Error != nil {
		return fmt.Errorf("%s: %w", method, r.Error)
	}
	if err := decode(r.Result, out); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// decode reads an A2A result into out: an *a2a.Event (by its kind) or a
// plain value.
func decode(raw json.RawMessage, out any) error {
	if ev, ok := out.(*a2a.Event); ok {
		e, err := a2a.UnmarshalEventJSON(raw)
		if err != nil {
			return fmt.Errorf("the result is not an A2A event: %w", err)
		}
		*ev = e
		return nil
	}
	return json.Unmarshal(raw, out)
}

// SendMessage is message/send: a task or a message.
func (c *rpcClient) SendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.Event, error) {
	var ev a2a.Event
	if err := c.call(ctx, "message/send", p, &ev); err != nil {
		return nil, err
	}
	switch ev.(type) {
	case *a2a.Task, *a2a.Message:
		return ev, nil
	}
	return nil, fmt.Errorf("message/send: the result is a %T, not a task or a message", ev)
}

// GetTask is tasks/get.
func (c *rpcClient) GetTask(ctx context.Context, p *a2a.TaskQueryParams) (*a2a.Task, error) {
	var t a2a.Task
	return &t, c.call(ctx, "tasks/get", p, &t)
}

// CancelTask is tasks/cancel.
func (c *rpcClient) CancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	var t a2a.Task
	return &t, c.call(ctx, "tasks/cancel", p, &t)
}

// SendStreamingMessage is message/stream: the task's events, read from
// server-sent events whose lines are bounded by MaxResponse.
func (c *rpcClient) SendStreamingMessage(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		resp, err := c.post(ctx, "message/stream", p, "text/event-stream")
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			// An agent may answer a stream request with one JSON-RPC
			// response (an error, typically).
			var r rpcResponse
			if err := json.NewDecoder(io.LimitReader(resp.Body, MaxResponse)).Decode(&r); err != nil {
				yield(nil, fmt.Errorf("message/stream: the answer is %q, neither an event stream nor JSON-RPC", ct))
				return
			}
			if r.Error != nil {
				yield(nil, fmt.Errorf("message/stream: %w", r.Error))
				return
			}
			var ev a2a.Event
			if err := decode(r.Result, &ev); err != nil {
				yield(nil, fmt.Errorf("message/stream: %w", err))
				return
			}
			yield(ev, nil)
			return
		}
		for data, err := range sseData(resp.Body) {
			if err != nil {
				yield(nil, fmt.Errorf("message/stream: %w", err))
				return
			}
			var r rpcResponse
			if err := json.Unmarshal(data, &r); err != nil {
				yield(nil, fmt.Errorf("message/stream: an event is not JSON-RPC: %w", err))
				return
			}
			if r.Error != nil {
				yield(nil, fmt.Errorf("message/stream: %w", r.Error))
				return
			}
			var ev a2a.Event
			if err := decode(r.Result, &ev); err != nil {
				yield(nil, fmt.Errorf("message/stream: %w", err))
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// sseData yields the data of each server-sent event of body (its data
// lines joined with newlines), failing on a line longer than MaxResponse.
func sseData(body io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 64<<10), MaxResponse)
		var data []byte
		have := false
		for sc.Scan() {
			line := sc.Bytes()
			switch {
			case len(line) == 0:
				if have && !yield(data, nil) {
					return
				}
				data, have = data[:0], false
			case bytes.HasPrefix(line, []byte("data:")):
				v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
				if have {
					data = append(data, '\n')
				}
				data, have = append(data, v...), true
			}
			// Comments (":"), ids, event names and retry hints are ignored.
		}
		if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
			yield(nil, fmt.Errorf("an event is longer than %d bytes", MaxResponse))
			return
		} else if err != nil {
			yield(nil, err)
			return
		}
		if have {
			yield(data, nil)
		}
	}
}
