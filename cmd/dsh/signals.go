package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/session"
)

// Exit statuses of dsh, documented in `dsh run --help`.
const (
	exitError     = 1
	exitHangup    = 129 // SIGHUP: the terminal or ssh connection closed
	exitInterrupt = 130 // SIGINT: Ctrl-C
	exitPipe      = 141 // stdout closed, as when `dsh run … | head` has read enough
	exitTerm      = 143 // SIGTERM
)

// interruption ends a command from outside: a signal, or stdout closing.
// It is the cause of the command's cancelled context and unwraps to the
// *agent.CancelError that aborts a running turn (cause user, the reason
// naming what happened), so the turn's end is logged like any other.
type interruption struct {
	what   string // SIGINT, SIGTERM, SIGHUP or "stdout closed"
	code   int    // exit status
	cancel *agent.CancelError
}

func newInterruption(what string, code int) *interruption {
	return &interruption{what: what, code: code,
		cancel: &agent.CancelError{Cause: session.Cause{Kind: agent.CauseUser, Reason: what}}}
}

func (i *interruption) Error() string { return "interrupted: " + i.what }

// Unwrap returns the cancellation a running turn sees.
func (i *interruption) Unwrap() error { return i.cancel }

// interruptionOf maps a signal to its interruption; nil for SIGPIPE, which
// dsh takes only so that a write to a closed pipe fails with EPIPE (handled
// where it happens) instead of killing it.
func interruptionOf(sig os.Signal) *interruption {
	switch sig {
	case os.Interrupt:
		return newInterruption("SIGINT", exitInterrupt)
	case syscall.SIGTERM:
		return newInterruption("SIGTERM", exitTerm)
	case syscall.SIGHUP:
		return newInterruption("SIGHUP", exitHangup)
	}
	return nil
}

// exitCode is the status dsh exits with after a command returned err while
// ctx was its context.
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return 0
	}
	var in *interruption
	if errors.As(err, &in) || errors.As(context.Cause(ctx), &in) {
		return in.code
	}
	return exitError
}

// watchSignals cancels the command on the first SIGINT, SIGTERM or SIGHUP
// (cause: its *interruption). A second one exits at once with the first
// one's status, after a best-effort flush of the sessions (bounded by a
// second). stop undoes it.
func watchSignals(cancel context.CancelCauseFunc, last *lastWords, stderr io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var first *interruption
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				in := interruptionOf(sig)
				switch {
				case in == nil:
				case first == nil:
					first = in
					cancel(in)
				default:
					last.run(time.Second)
					fmt.Fprintf(stderr, "dsh: %s again: exiting at once\n", in.what)
					os.Exit(first.code)
				}
			}
		}
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}

// lastWords are the best-effort flushes dsh runs before it exits at once.
// Commands find it in their context (lastWordsFrom).
type lastWords struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

type lastWordsKey struct{}

func withLastWords(ctx context.Context, l *lastWords) context.Context {
	return context.WithValue(ctx, lastWordsKey{}, l)
}

// atExit registers fn to run if dsh must exit at once, until remove is
// called. It does nothing outside main (tests run commands in process).
func atExit(ctx context.Context, fn func()) (remove func()) {
	l, _ := ctx.Value(lastWordsKey{}).(*lastWords)
	if l == nil {
		return func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]func(){}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.fns, id)
	}
}

// run calls every registered fn and waits for them at most timeout.
func (l *lastWords) run(timeout time.Duration) {
	l.mu.Lock()
	fns := make([]func(), 0, len(l.fns))
	for _, fn := range l.fns {
		fns = append(fns, fn)
	}
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, fn := range fns {
			fn()
		}
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}
