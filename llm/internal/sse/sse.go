// Package sse reads the data of server-sent events, as the model
// endpoints stream them.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// MaxEvent caps a single SSE line and a single event's data.
const MaxEvent = 8 << 20

// ErrTooLarge is the error of a line or event past MaxEvent.
var ErrTooLarge = errors.New("SSE line or event exceeds 8 MiB")

// Reader splits a server-sent-events stream into the data of its events.
type Reader struct {
	r    *bufio.Reader
	line []byte // a line longer than the bufio buffer
	data []byte
	err  error // sticky
}

// NewReader reads the events of r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the data of the next event, its data lines joined by "\n";
// events without data are skipped and the other fields ignored. The result
// is valid until the next call. At the end of input an unterminated event is
// still returned, then io.EOF.
func (s *Reader) Next() ([]byte, error) {
	s.data = s.data[:0]
	seen := false
	for {
		line, err := s.readLine()
		switch {
		case err != nil:
			if err == io.EOF && len(s.data) > 0 {
				return s.data, nil
			}
			return nil, err
		case len(line) == 0: // blank line: dispatch
			if len(s.data) > 0 {
				return s.data, nil
			}
			seen = false
			continue
		case line[0] == ':': // comment: activity only
			continue
		}
		field, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if seen {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > MaxEvent {
			s.err = ErrTooLarge
			return nil, s.err
		}
		s.data = append(s.data, value...)
		seen = true
	}
}

// readLine returns the next line without its LF or CRLF terminator.
func (s *Reader) readLine() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	line, err := s.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		s.line = append(s.line[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = s.r.ReadSlice('\n')
			if len(s.line)+len(line) > MaxEvent {
				err = ErrTooLarge
				break
			}
			s.line = append(s.line, line...)
		}
		line = s.line
	}
	if err != nil {
		s.err = err
		if err != io.EOF || len(line) == 0 {
			return nil, err
		}
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}
