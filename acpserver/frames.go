package acpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/jsonrpcframe"
)

// DefaultMaxFrame is the default limit in bytes of one client frame.
const DefaultMaxFrame = 8 << 20

// sdkMaxFrame is the longest line acp-go-sdk v0.13.0 reads: a line of
// 10 MiB ends its connection, and with it `dsh acp`. Larger limits are
// clamped below it.
const sdkMaxFrame = 10<<20 - 1<<10

// gate reads the client's frames before the SDK does, and answers those
// that would otherwise break the connection or go unanswered: a frame over
// the limit gets an error reply instead of ending the connection, invalid
// JSON a -32700 parse error, a request before initialize an error, a second
// prompt for a busy session an error that leaves the first alone. Client
// notifications are handled here in order (session/cancel) or dropped, so
// that a flood of them cannot overflow the SDK's notification queue, which
// would also end the connection. Everything else passes to the SDK
// unchanged, one frame per line.
type gate struct {
	limit int
	reply io.Writer // the client's side, shared with the SDK's writes
	log   *slog.Logger
	// admit decides whether a session/prompt request may reach the SDK,
	// claiming its session; cancel handles session/cancel.
	admit  func(params json.RawMessage) *acpsdk.RequestError
	cancel func(params json.RawMessage)
	// passed is told of each request passed to the SDK, by id.
	passed func(id json.RawMessage)

	initialized bool
}

// run passes frames from in to sdk until in ends. It returns nil at the
// end of in, and the error of a failed read or of a write to sdk.
func (g *gate) run(in io.Reader, sdk io.Writer) error {
	return jsonrpcframe.Relay(in, sdk, g.limit, g.overLimit, g.handle)
}

// message is a JSON-RPC message as the SDK decodes it.
type message struct {
	ID     *json.RawMessage     `json:"id,omitempty"`
	Method string               `json:"method,omitempty"`
	Params json.RawMessage      `json:"params,omitempty"`
	Result json.RawMessage      `json:"result,omitempty"`
	Error  *acpsdk.RequestError `json:"error,omitempty"`
}

// handle decides about one frame within the limit, without the white
// space around it. It returns the frame to pass to the SDK, or nil when
// the frame was answered or dropped here.
func (g *gate) handle(frame []byte) []byte {
	var m message
	if err := json.Unmarshal(frame, &m); err != nil {
		if !json.Valid(frame) {
			g.send(nil, acpsdk.NewParseError(fmt.Sprintf("invalid JSON: %v", err)))
			return nil
		}
		id, _, _ := jsonrpcframe.Peek(frame)
		g.send(id, acpsdk.NewInvalidRequest(fmt.Sprintf("not a JSON-RPC message (batches are not supported): %v", err)))
		return nil
	}
	switch {
	case m.Method == "" && m.ID == nil:
		g.send(nil, acpsdk.NewInvalidRequest("a message needs a method or an id"))
		return nil
	case m.ID != nil && !jsonrpcframe.ValidID(*m.ID):
		if m.Method != "" { // a response with such an id answers nothing of ours
			g.send(nil, acpsdk.NewInvalidRequest(fmt.Sprintf("the id must be a string or a number, not %s", clip(string(*m.ID), 40))))
		}
		return nil
	case m.Method == "": // a response to one of our requests
		return frame
	case m.ID == nil:
		return g.notification(m, frame)
	case !g.initialized && m.Method != acpsdk.AgentMethodInitialize:
		g.send(*m.ID, acpsdk.NewInvalidRequest(fmt.Sprintf("%s before initialize: send initialize first", m.Method)))
		return nil
	}
	switch m.Method {
	case acpsdk.AgentMethodInitialize:
		var p acpsdk.InitializeRequest
		g.initialized = g.initialized || json.Unmarshal(m.Params, &p) == nil && p.Validate() == nil
	case acpsdk.AgentMethodSessionPrompt:
		if err := g.admit(m.Params); err != nil {
			g.send(*m.ID, err)
			return nil
		}
	}
	if g.passed != nil {
		g.passed(*m.ID)
	}
	return frame
}

// notification handles a client notification: session/cancel here, in
// order; $/cancel_request goes to the SDK, which handles it at once without
// queueing it; any other is dropped, as ACP says unknown notifications are.
// It returns the frame to pass on, or nil.
func (g *gate) notification(m message, frame []byte) []byte {
	switch {
	case !g.initialized:
		g.log.Debug("acp: notification before initialize dropped", "method", m.Method)
	case m.Method == acpsdk.AgentMethodSessionCancel:
		g.cancel(m.Params)
	case m.Method == "$/cancel_request":
		return frame
	default:
		g.log.Debug("acp: notification dropped", "method", m.Method)
	}
	return nil
}

// overLimit answers a frame over the limit. A request gets an error reply
// (with its id when its first bytes name one, else id null). A response to
// one of our requests reaches the SDK as an error response, so that the
// request fails at once instead of waiting.
func (g *gate) overLimit(frame []byte, size int) []byte {
	g.log.Warn("acp: over-limit frame refused", "bytes", size, "limit", g.limit)
	return jsonrpcframe.OverLimit(frame, size, g.limit,
		func(msg string) *acpsdk.RequestError { return acpsdk.NewInvalidRequest(msg) }, g.send)
}

// send writes an error response for id (null when nil) to the client.
func (g *gate) send(id json.RawMessage, e *acpsdk.RequestError) {
	jsonrpcframe.WriteError(g.reply, g.log, "acp", id, e)
}

// errServerClosed ends the SDK's input when Serve returns.
var errServerClosed = errors.New("acp: server closed")
