package proc

import (
	"strings"
	"sync"
	"unicode/utf8"
)

const (
	// maxDiagnostic bounds Diagnostic, in bytes.
	maxDiagnostic   = 4096
	truncatedMarker = "…[truncated]"
)

// ring keeps the last len(buf) bytes written to it.
type ring struct {
	mu    sync.Mutex
	buf   []byte
	next  int   // where the next byte goes
	total int64 // bytes ever written
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

// Write records b; it never fails.
func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(b)
	r.total += int64(n)
	if len(b) >= len(r.buf) {
		copy(r.buf, b[len(b)-len(r.buf):])
		r.next = 0
		return n, nil
	}
	c := copy(r.buf[r.next:], b)
	copy(r.buf, b[c:])
	r.next = (r.next + len(b)) % len(r.buf)
	return n, nil
}

// text returns the kept bytes as valid UTF-8 of at most len(buf) bytes,
// starting and ending on rune boundaries, and whether anything written
// earlier is missing from it.
func (r *ring) text() (string, bool) {
	r.mu.Lock()
	var b []byte
	if r.total <= int64(len(r.buf)) {
		b = append(b, r.buf[:r.total]...)
	} else {
		b = append(append(b, r.buf[r.next:]...), r.buf[:r.next]...)
	}
	cut := r.total > int64(len(r.buf))
	r.mu.Unlock()

	if cut { // the oldest kept rune may have lost its first bytes
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	// The newest rune may not be complete yet.
	if i := lastRuneStart(b); i >= 0 && !utf8.FullRune(b[i:]) {
		b = b[:i]
	}
	return suffix(strings.ToValidUTF8(string(b), "\uFFFD"), len(r.buf)), cut
}

// lastRuneStart is the index of the last rune-start byte among the final
// utf8.UTFMax bytes of b, or -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}

// suffix is the longest suffix of s of at most n bytes that starts on a
// rune boundary.
func suffix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - max(n, 0)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// prefix is the longest prefix of s of at most n bytes that ends on a rune
// boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// diagnostic joins status and the stderr tail into at most maxDiagnostic
// bytes, dropping the oldest stderr first and marking any cut.
func diagnostic(status, tail string, cut bool) string {
	tail = strings.TrimSpace(tail)
	if len(status) > maxDiagnostic/2 { // never in practice: leave room for stderr
		status = prefix(status, maxDiagnostic/2-len(truncatedMarker)) + truncatedMarker
	}
	if tail == "" {
		return status
	}
	head := status + "; stderr: "
	if !cut && len(head)+len(tail) <= maxDiagnostic {
		return head + tail
	}
	return head + truncatedMarker + suffix(tail, maxDiagnostic-len(head)-len(truncatedMarker))
}
