package claudecode

import (
	"fmt"
	"time"

	"github.com/dsh-go/dsh/subagent"
)

// ConfigError is a Config that New rejects.
type ConfigError = subagent.ConfigError

// StartError is a Start that failed before the run was ready: nothing of
// it is left running when Start returns it.
type StartError struct {
	Provider string
	// Stage is where it failed: "request", "cwd", "config dir", "spawn"
	// or "ready".
	Stage string
	Err   error
	// Diagnostic describes the child's exit and stderr tail when it had
	// been spawned (bounded, see subagent.Diagnostic).
	Diagnostic string
}

// Error implements error.
func (e *StartError) Error() string {
	msg := fmt.Sprintf("claude-code provider %s: %s: %v", e.Provider, e.Stage, e.Err)
	if e.Diagnostic != "" {
		msg += " (" + e.Diagnostic + ")"
	}
	return msg
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }

// ReadyTimeoutError is the cause of a StartError when Claude Code sent no
// system/init message within Config.ReadyTimeout.
type ReadyTimeoutError struct{ After time.Duration }

// Error implements error.
func (e *ReadyTimeoutError) Error() string {
	return fmt.Sprintf("no system/init message within %s", e.After)
}

// ExitError is the cause of a failure when Claude Code exited (or closed
// its stdout) before it was ready or before its result message.
type ExitError struct {
	During     string // "startup" or "the turn"
	Diagnostic string // exit status and stderr tail
}

// Error implements error.
func (e *ExitError) Error() string {
	return fmt.Sprintf("claude exited during %s: %s", e.During, e.Diagnostic)
}

// LineTooLongError is a line on Claude Code's stdout longer than the
// reader's limit (MaxLine); the run fails rather than buffer it.
type LineTooLongError struct{ Limit int }

// Error implements error.
func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("stream-json protocol error: a line exceeds %d bytes", e.Limit)
}
