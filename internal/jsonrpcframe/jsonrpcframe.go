// Package jsonrpcframe reads newline-delimited JSON-RPC frames for the
// gates that stand in front of a protocol SDK's stdio transport (dsh acp,
// dsh mcp): one line at a time, with a size limit that never buffers more
// than the limit, and a look at a frame's first bytes for its id; and
// writes their error replies to the client, between the SDK's frames.
package jsonrpcframe

import (
	"bufio"
	"bytes"
	"encoding/json"
)

// Read reads one line of r into buf, keeping at most limit+1 bytes of it:
// the rest of a longer line is read and dropped. It returns what it kept
// and the line's whole length without the newline. At the end of r it
// returns io.EOF with the last line, if any.
func Read(r *bufio.Reader, buf []byte, limit int) ([]byte, int, error) {
	size := 0
	for {
		chunk, err := r.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		size += len(chunk)
		if room := limit + 1 - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		if err != bufio.ErrBufferFull {
			return buf, size, err
		}
	}
}

// Peek finds, among the top-level members of the JSON object that frame
// begins (it may be cut short), its id if that is a string or a number,
// and whether it has the members of a response or of a request.
func Peek(frame []byte) (id json.RawMessage, isResponse, isRequest bool) {
	dec := json.NewDecoder(bytes.NewReader(frame))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		switch t {
		case "result", "error":
			isResponse = true
		case "method":
			isRequest = true
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if t == "id" && ValidID(v) {
			id = v
		}
	}
	return id, isResponse, isRequest
}

// ValidID reports whether a JSON value is a JSON-RPC request id: a string
// or a number (null, which JSON-RPC discourages, is not).
func ValidID(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || !(v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return false
	}
	var x any
	return json.Unmarshal(v, &x) == nil
}

// Depth returns how deeply frame's arrays and objects nest, as a reader
// that counts brackets outside strings sees it (frame need not be valid).
func Depth(frame []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, b := range frame {
		switch {
		case escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case (b == '}' || b == ']') && depth > 0:
			depth--
		}
	}
	return deepest
}
