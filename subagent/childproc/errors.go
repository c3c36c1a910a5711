package childproc

import (
	"fmt"
	"strings"
	"time"
)

// The codes of the kit's errors (see ErrorCode).
const (
	CodeStartFailed  = "START_FAILED"
	CodeReadyTimeout = "READY_TIMEOUT"
	CodeChildExited  = "CHILD_EXITED"
	CodeLineTooLong  = "LINE_TOO_LONG"
)

// StartError is a Start that failed before the run was ready: nothing of
// it is left running when Start returns it.
type StartError struct {
	Kind     string // the provider kind, e.g. "codex"
	Provider string // the provider's name
	// Stage is where it failed, e.g. "request", "cwd", "spawn",
	// "handshake" or "ready".
	Stage string
	Err   error
	// Diagnostic describes the child's exit and stderr tail when it had
	// been spawned (bounded, see subagent.Diagnostic).
	Diagnostic string
}

// Error implements error.
func (e *StartError) Error() string {
	msg := fmt.Sprintf("%s provider %s: %s: %v", e.Kind, e.Provider, e.Stage, e.Err)
	if e.Diagnostic != "" && !strings.Contains(msg, e.Diagnostic) {
		msg += " (" + e.Diagnostic + ")"
	}
	return msg
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }

// ErrorCode returns CodeStartFailed.
func (e *StartError) ErrorCode() string { return CodeStartFailed }

// ReadyTimeoutError is the cause of a StartError when the child was not
// ready within the ready timeout.
type ReadyTimeoutError struct {
	After   time.Duration
	Waiting string // what never came, e.g. "an answer to the handshake"
}

// Error implements error.
func (e *ReadyTimeoutError) Error() string { return fmt.Sprintf("no %s within %s", e.Waiting, e.After) }

// ErrorCode returns CodeReadyTimeout.
func (e *ReadyTimeoutError) ErrorCode() string { return CodeReadyTimeout }

// ExitError is the cause of a failure when the child exited (or closed its
// stdout) while it was starting or working.
type ExitError struct {
	Program    string // e.g. "codex"
	During     string // e.g. "the handshake", "startup" or "the turn"
	Diagnostic string // exit status and stderr tail
}

// Error implements error.
func (e *ExitError) Error() string {
	return fmt.Sprintf("%s exited during %s: %s", e.Program, e.During, e.Diagnostic)
}

// ErrorCode returns CodeChildExited.
func (e *ExitError) ErrorCode() string { return CodeChildExited }

// LineTooLongError is a line on the child's stdout longer than the
// reader's limit; the run fails rather than buffer it.
type LineTooLongError struct {
	Protocol string // e.g. "stream-json"
	Limit    int
}

// Error implements error.
func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("%s protocol error: a line exceeds %d bytes", e.Protocol, e.Limit)
}

// ErrorCode returns CodeLineTooLong.
func (e *LineTooLongError) ErrorCode() string { return CodeLineTooLong }
