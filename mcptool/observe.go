package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// observer reads the messages a server sends as they arrive, for what the
// SDK drops or hands over late: a tools/list_changed notification, seen
// before the response that follows it on the wire (the SDK runs
// notification handlers apart from responses), so that a call that
// changed the tools returns only once they are listed again; and the
// tools a listing marks execution.taskSupport "required", which the SDK's
// Tool does not carry.
type observer struct {
	stale atomic.Bool // the server said its tools changed since they were listed

	mu           sync.Mutex
	taskRequired map[string]bool
}

const toolListChanged = "notifications/tools/list_changed"

func newObserver() *observer { return &observer{taskRequired: map[string]bool{}} }

// message notes what m says.
func (o *observer) message(m jsonrpc.Message) {
	switch m := m.(type) {
	case *jsonrpc.Request:
		if !m.ID.IsValid() && m.Method == toolListChanged {
			o.stale.Store(true)
		}
	case *jsonrpc.Response:
		if bytes.Contains(m.Result, []byte(`"taskSupport"`)) {
			o.listing(m.Result)
		}
	}
}

// listing notes the task support of the tools of a tools/list result.
func (o *observer) listing(raw json.RawMessage) {
	var res struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(raw, &res) != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range res.Tools {
		if t.Execution.TaskSupport == "required" {
			o.taskRequired[t.Name] = true
		} else {
			delete(o.taskRequired, t.Name)
		}
	}
}

// requiresTask reports whether a listing marked the tool task-required.
func (o *observer) requiresTask(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.taskRequired[name]
}

// observed is a transport whose connection shows o what it reads. The
// streamable HTTP transport is not wrapped: the SDK gives its connection
// session updates through an unexported interface a wrapper would hide.
type observed struct {
	mcp.Transport
	o *observer
}

func (t observed) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return observedConn{c, t.o}, nil
}

type observedConn struct {
	mcp.Connection
	o *observer
}

func (c observedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.o.message(m)
	}
	return m, err
}
