// Package jsonrpcframetest helps test the JSON-RPC line gates.
package jsonrpcframetest

import (
	"bytes"
	"sync"
)

// LineWriter records the lines written to it. A Write that is not exactly
// one line panics.
type LineWriter struct{ Lines [][]byte }

func (w *LineWriter) Write(p []byte) (int, error) {
	if len(p) == 0 || p[len(p)-1] != '\n' || bytes.IndexByte(p[:len(p)-1], '\n') >= 0 {
		panic("a write that is not exactly one line: " + string(p))
	}
	w.Lines = append(w.Lines, bytes.Clone(p[:len(p)-1]))
	return len(p), nil
}

// Buffer is a bytes.Buffer that a server's goroutines may write at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
