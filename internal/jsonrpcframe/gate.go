package jsonrpcframe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// peekLen is how much of an over-limit frame is kept to find its id.
const peekLen = 64 << 10

// Relay passes frames from in to sdk until in ends. It reads each line of
// in as Read does, with limit, and hands a line over limit to overLimit,
// with its whole size in bytes, and any other that is not blank to handle,
// without the white space around it. A frame either returns is written to
// sdk as one line. Relay returns nil at the end of in, and the error of a
// failed read or of a write to sdk.
func Relay(in io.Reader, sdk io.Writer, limit int, overLimit func(frame []byte, size int) []byte, handle func(frame []byte) []byte) error {
	r := bufio.NewReaderSize(in, peekLen)
	var buf []byte
	for {
		frame, size, rerr := Read(r, buf[:0], limit)
		buf = frame[:0]
		if size > 0 {
			var fwd []byte
			if size > limit {
				fwd = overLimit(frame, size)
			} else if frame = bytes.TrimSpace(frame); len(frame) > 0 {
				fwd = handle(frame)
			}
			if fwd != nil {
				if _, err := sdk.Write(append(fwd, '\n')); err != nil {
					return err
				}
			}
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
}

// OverLimit answers a frame of size bytes over limit (frame holds its
// first bytes) with the error object refuse makes of a message naming both
// sizes. A request gets it through send, to its id when its first bytes
// name one, else to nil (id null). A response to one of the server's own
// requests is returned as an error response to its id, to pass to the SDK
// so that the request fails at once instead of waiting; nil without an id.
func OverLimit[E any](frame []byte, size, limit int, refuse func(msg string) E, send func(id json.RawMessage, e E)) []byte {
	id, isResponse, isRequest := Peek(frame[:min(len(frame), peekLen)])
	e := refuse(fmt.Sprintf("frame of %d bytes is over the limit of %d bytes", size, limit))
	if isResponse && !isRequest {
		if id == nil {
			return nil
		}
		b, _ := json.Marshal(reply{JSONRPC: "2.0", ID: id, Error: e})
		return b
	}
	send(id, e)
	return nil
}

// reply is a JSON-RPC error response written by a gate.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   any             `json:"error"`
}

// WriteError writes to w, as one line in one Write, a JSON-RPC error
// response to id (null when nil) with the error object e. It logs a
// response it cannot encode as an error, and one it cannot write at debug
// level, in messages that begin with prefix (as "acp").
func WriteError(w io.Writer, log *slog.Logger, prefix string, id json.RawMessage, e any) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(reply{JSONRPC: "2.0", ID: id, Error: e})
	if err != nil {
		log.Error(prefix+": cannot encode a reply", "err", err)
		return
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		log.Debug(prefix+": reply not delivered", "err", err)
	}
}

// Writer serializes writes to the client: the SDK writes each frame with
// one Write, and so does a gate, so frames never interleave. Its Close
// does nothing: the client's side stays open.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Close does nothing and returns nil.
func (w *Writer) Close() error { return nil }
