package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/internal/jsonrpcframe"
)

// DefaultMaxFrame is the default limit in bytes of one client frame over
// stdio, as `dsh acp`'s.
const DefaultMaxFrame = 8 << 20

// DefaultDrainTimeout is how long ServeStdio goes on answering the client's
// pending requests after its input ended, as `dsh acp` does.
const DefaultDrainTimeout = 10 * time.Second

// maxDepth bounds how deeply a frame's JSON nests; the SDK ends the
// connection on a frame nested deeper than 1000.
const maxDepth = 512

// JSON-RPC error codes the gate answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// ServeStdio serves one client over newline-delimited JSON-RPC on in and
// out, as Run does over an mcp.IOTransport, but through a gate that reads
// the client's lines first: a line the SDK would end the connection on
// (invalid JSON or UTF-8, a batch, a message that is not JSON-RPC 2.0, an
// id that is neither a string nor a number, nesting deeper than 512, more
// than Options.MaxFrame bytes) gets a JSON-RPC error response instead,
// and the connection, with its calls in flight, goes on. When the input
// ends, the requests it held are answered (for at most
// Options.DrainTimeout) before the connection closes.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	pending := jsonrpcframe.NewPending()
	w := jsonrpcframe.NewWriter(pending.Watch(out, nil))
	sdkIn, gateOut := io.Pipe()
	g := &gate{limit: s.opts.MaxFrame, reply: w, log: s.opts.Log, passed: pending.Add}
	go func() {
		err := g.run(in, gateOut)
		if err == nil {
			wait, cancel := context.WithTimeout(ctx, cmp.Or(s.opts.DrainTimeout, DefaultDrainTimeout))
			if !pending.Wait(wait) && ctx.Err() == nil {
				s.opts.Log.Warn("mcpserver: the client's input ended with requests pending; closing", "after", cmp.Or(s.opts.DrainTimeout, DefaultDrainTimeout))
			}
			cancel()
		}
		gateOut.CloseWithError(err)
	}()
	defer sdkIn.Close() // ends the gate at its next frame
	// The gate bounds every line: the SDK needs no cap of its own.
	return s.Run(ctx, &mcp.IOTransport{Reader: sdkIn, Writer: w, MaxLineLength: -1})
}

// gate reads the client's frames before the SDK does, answers those that
// would otherwise end the connection, and passes every other one to the
// SDK unchanged, one frame per line.
type gate struct {
	limit int
	reply io.Writer // the client's side, shared with the SDK's writes
	log   *slog.Logger
	// passed is told of each request passed to the SDK, by id.
	passed func(id json.RawMessage)
}

// run passes frames from in to sdk until in ends. It returns nil at the
// end of in, and the error of a failed read or of a write to sdk.
func (g *gate) run(in io.Reader, sdk io.Writer) error {
	return jsonrpcframe.Relay(in, sdk, g.limit, g.overLimit, g.handle)
}

// handle decides about one frame within the limit, without the white
// space around it. It returns the frame to pass to the SDK, or nil when
// it was answered here.
func (g *gate) handle(frame []byte) []byte {
	if !utf8.Valid(frame) {
		g.send(nil, codeParseError, "invalid UTF-8")
		return nil
	}
	var raw json.RawMessage
	if err := json.Unmarshal(frame, &raw); err != nil {
		g.send(nil, codeParseError, fmt.Sprintf("invalid JSON: %v", err))
		return nil
	}
	if d := jsonrpcframe.Depth(frame); d > maxDepth {
		g.send(nil, codeInvalidRequest, fmt.Sprintf("JSON nested %d deep, deeper than %d", d, maxDepth))
		return nil
	}
	if frame[0] != '{' {
		msg := "a JSON-RPC message is an object"
		if frame[0] == '[' {
			msg = "batches are not supported"
		}
		g.send(nil, codeInvalidRequest, msg)
		return nil
	}
	if err := checkMessage(frame); err != nil {
		id, _, _ := jsonrpcframe.Peek(frame)
		g.send(id, codeInvalidRequest, err.Error())
		return nil
	}
	if id, _, isRequest := jsonrpcframe.Peek(frame); isRequest && id != nil && g.passed != nil {
		g.passed(id)
	}
	return frame
}

// checkMessage checks that a JSON object is a JSON-RPC 2.0 message the SDK
// decodes: version "2.0", an id that is a string or a number (or none), a
// string method or else an id (a response), and an error object of the
// right shape. Members are matched by their exact names, as the SDK does.
func checkMessage(frame []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(frame, &m); err != nil {
		return fmt.Errorf("not a JSON-RPC message: %v", err)
	}
	var version string
	if json.Unmarshal(m["jsonrpc"], &version) != nil || version != "2.0" {
		return fmt.Errorf(`"jsonrpc" must be "2.0"`)
	}
	id, hasID := m["id"]
	hasID = hasID && string(id) != "null"
	if hasID && !jsonrpcframe.ValidID(id) {
		return fmt.Errorf(`"id" must be a string or a number, not %s`, clipJSON(id))
	}
	if method, ok := m["method"]; ok {
		var s *string
		if json.Unmarshal(method, &s) != nil {
			return fmt.Errorf(`"method" must be a string, not %s`, clipJSON(method))
		}
	} else if !hasID {
		return fmt.Errorf("a message needs a method or an id")
	}
	if e, ok := m["error"]; ok {
		var we *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(e, &we) != nil {
			return fmt.Errorf(`"error" must be an object with an integer "code" and a string "message"`)
		}
	}
	return nil
}

// clipJSON is a JSON value shortened for an error message.
func clipJSON(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "…"
	}
	return string(v)
}

// overLimit answers a frame over the limit. A request gets an error reply
// (with its id when its first bytes name one, else id null). A response to
// one of our requests reaches the SDK as an error response, so that the
// request fails at once instead of waiting.
func (g *gate) overLimit(frame []byte, size int) []byte {
	g.log.Warn("mcpserver: over-limit frame refused", "bytes", size, "limit", g.limit)
	return jsonrpcframe.OverLimit(frame, size, g.limit,
		func(msg string) replyError { return replyError{Code: codeInvalidRequest, Message: msg} },
		func(id json.RawMessage, e replyError) { g.send(id, e.Code, e.Message) })
}

// replyError is the error object of an error response written by the gate.
type replyError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// send writes an error response for id (null when nil) to the client.
func (g *gate) send(id json.RawMessage, code int, msg string) {
	g.log.Debug("mcpserver: frame refused", "code", code, "err", msg)
	jsonrpcframe.WriteError(g.reply, g.log, "mcpserver", id, replyError{Code: code, Message: msg})
}
