package codex

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/dsh-go/dsh/subagent/childproc"
)

// MaxLine bounds one line of Codex's stdout, in bytes (newline excluded).
const MaxLine = 16 << 20

// excerpt bounds how much of an offending line an error quotes.
const excerpt = 200

// kind classifies a message.
type kind int

const (
	kindResponse     kind = iota + 1 // id, no method
	kindRequest                      // id and method (server → client)
	kindNotification                 // method, no id
)

// message is one JSON-RPC message as Codex writes it: JSON-RPC 2.0
// semantics, one object per line, without the "jsonrpc" member (which is
// ignored when present).
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *wireError      `json:"error,omitempty"`
}

// wireError is a JSON-RPC error object.
type wireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// hasID reports whether m carries a non-null id.
func (m *message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// kind classifies m, or returns 0 when it is no JSON-RPC message.
func (m *message) kind() kind {
	switch {
	case m.Method != "" && m.hasID():
		return kindRequest
	case m.Method != "":
		return kindNotification
	case m.hasID():
		return kindResponse
	}
	return 0
}

// intID is m's id as one of our request ids, when it is an integer.
func (m *message) intID() (int64, bool) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	return id, err == nil
}

// decode parses one non-blank line into a message.
func decode(line []byte) (message, error) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, &ProtocolError{Msg: "not a JSON object (" + err.Error() + ")", Line: quote(line)}
	}
	if m.kind() == 0 {
		return message{}, &ProtocolError{Msg: "neither a request, a response nor a notification", Line: quote(line)}
	}
	return m, nil
}

// quote is the start of line, cut on a rune boundary, for an error.
func quote(line []byte) string {
	if len(line) <= excerpt {
		return string(line)
	}
	n := excerpt
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return string(line[:n]) + "…"
}

// reader splits Codex's stdout into messages. It holds at most max bytes
// of one line (plus bufio's buffer), failing with *childproc.LineTooLongError beyond.
type reader struct{ lines *childproc.LineReader }

func newReader(r io.Reader, max int) *reader {
	return &reader{lines: childproc.NewLineReader(r, max, "codex")}
}

// next returns the next message, skipping blank lines; io.EOF at the end.
// After any other error the reader is unusable.
func (r *reader) next() (message, error) {
	for {
		line, err := r.lines.Next()
		if err != nil {
			return message{}, err
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return decode(line)
		}
	}
}
