package claudecode

import (
	"io"
	"sync"
)

// writer feeds the child's stdin from its own goroutine, so that no caller
// ever blocks on a child that stopped reading: send and closeInput only
// queue. A write blocked on a full pipe ends when the process is stopped
// (which closes stdin).
type writer struct {
	w    io.WriteCloser
	kick chan struct{} // capacity 1: there is something queued
	quit chan struct{} // closed by stop
	done chan struct{} // closed when the goroutine has ended

	mu     sync.Mutex
	queue  [][]byte
	eof    bool // closeInput was called: close after the queue drains
	closed bool // no more writes
}

func newWriter(w io.WriteCloser) *writer {
	wr := &writer{w: w, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go wr.loop()
	return wr
}

// send queues one line; it is dropped once stdin is closed or failed.
func (w *writer) send(line []byte) {
	if line == nil {
		return
	}
	w.mu.Lock()
	if !w.closed && !w.eof {
		w.queue = append(w.queue, line)
	}
	w.mu.Unlock()
	w.signal()
}

// closeInput closes stdin once the queued lines are written.
func (w *writer) closeInput() {
	w.mu.Lock()
	w.eof = true
	w.mu.Unlock()
	w.signal()
}

func (w *writer) signal() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// stop ends the goroutine and waits for it. Call it after the process has
// been stopped, so that a blocked write has returned.
func (w *writer) stop() {
	close(w.quit)
	<-w.done
}

func (w *writer) loop() {
	defer close(w.done)
	for {
		select {
		case <-w.kick:
		case <-w.quit:
			return
		}
		for {
			w.mu.Lock()
			if w.closed {
				w.mu.Unlock()
				break
			}
			if len(w.queue) == 0 {
				eof := w.eof
				if eof {
					w.closed = true
				}
				w.mu.Unlock()
				if eof {
					w.w.Close()
				}
				break
			}
			line := w.queue[0]
			w.queue = w.queue[1:]
			w.mu.Unlock()
			if _, err := w.w.Write(line); err != nil {
				w.mu.Lock()
				w.closed, w.queue = true, nil
				w.mu.Unlock()
			}
		}
	}
}
