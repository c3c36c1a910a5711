package childproc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// LineReader reads the newline-delimited lines of a child's stdout, each at
// most a limit long, in memory bounded by that limit.
type LineReader struct {
	r        *bufio.Reader
	max      int
	protocol string
	buf      []byte
	err      error // sticky, after a line over the limit
}

// NewLineReader reads lines of at most max bytes from r; protocol names
// the wire format in a LineTooLongError.
func NewLineReader(r io.Reader, max int, protocol string) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, min(max+1, 64<<10)), max: max, protocol: protocol}
}

// Next returns the next line without its "\n" (and "\r"); a final line
// without a newline counts. It returns io.EOF at the end of the stream and
// a *LineTooLongError for a line over the limit, after which it returns
// that error again. The line is valid until the next call.
func (l *LineReader) Next() ([]byte, error) {
	if l.err != nil {
		return nil, l.err
	}
	if cap(l.buf) > 1<<20 { // do not pin a past large line
		l.buf = nil
	}
	l.buf = l.buf[:0]
	for {
		frag, err := l.r.ReadSlice('\n')
		body := bytes.TrimSuffix(frag, []byte("\n"))
		if len(l.buf)+len(body) > l.max {
			l.err = &LineTooLongError{Protocol: l.protocol, Limit: l.max}
			return nil, l.err
		}
		l.buf = append(grow(l.buf, len(body), l.max), body...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil, errors.Is(err, io.EOF) && len(l.buf) > 0:
			return bytes.TrimSuffix(l.buf, []byte("\r")), nil
		default:
			return nil, err
		}
	}
}

// grow makes room for n more bytes in b without its capacity exceeding
// limit, so that a line's buffer never outgrows the limit.
func grow(b []byte, n, limit int) []byte {
	need := len(b) + n
	if need <= cap(b) {
		return b
	}
	nb := make([]byte, len(b), min(max(2*cap(b), need, 4096), limit))
	copy(nb, b)
	return nb
}

// Cap returns the capacity of the reader's line buffer, for tests of its
// memory bound.
func (l *LineReader) Cap() int { return cap(l.buf) }
