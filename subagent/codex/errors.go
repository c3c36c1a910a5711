package codex

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-go/dsh/subagent"
)

// ConfigError is a Config that New rejects.
type ConfigError = subagent.ConfigError

// StartError is a Start that failed before the run was ready: nothing of
// it is left running when Start returns it.
type StartError struct {
	Provider string
	// Stage is where it failed: "request", "cwd", "codex home", "spawn"
	// or "handshake".
	Stage string
	Err   error
	// Diagnostic describes the child's exit and stderr tail when it had
	// been spawned (bounded, see subagent.Diagnostic).
	Diagnostic string
}

// Error implements error.
func (e *StartError) Error() string {
	msg := fmt.Sprintf("codex provider %s: %s: %v", e.Provider, e.Stage, e.Err)
	if e.Diagnostic != "" && !strings.Contains(msg, e.Diagnostic) {
		msg += " (" + e.Diagnostic + ")"
	}
	return msg
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }

// ReadyTimeoutError is the cause of a StartError when Codex did not finish
// the handshake within Config.ReadyTimeout.
type ReadyTimeoutError struct{ After time.Duration }

// Error implements error.
func (e *ReadyTimeoutError) Error() string {
	return fmt.Sprintf("no answer to the handshake within %s", e.After)
}

// ExitError is the cause of a failure when Codex exited (or closed its
// stdout) while a request was outstanding or a turn was running.
type ExitError struct {
	During     string // "the handshake" or "the turn"
	Diagnostic string // exit status and stderr tail
}

// Error implements error.
func (e *ExitError) Error() string {
	return fmt.Sprintf("codex exited during %s: %s", e.During, e.Diagnostic)
}

// RPCError is a JSON-RPC error response from Codex.
type RPCError struct {
	Method  string // the request it answers
	Code    int64
	Message string
	Data    json.RawMessage
}

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("codex answered %s with error %d: %s", e.Method, e.Code, e.Message)
}

// ProtocolError is a line on Codex's stdout that is not a JSON-RPC message.
type ProtocolError struct {
	Msg  string
	Line string // the start of the offending line
}

// Error implements error.
func (e *ProtocolError) Error() string {
	return fmt.Sprintf("codex protocol error: %s: %q", e.Msg, e.Line)
}

// LineTooLongError is a line on Codex's stdout longer than the reader's
// limit (MaxLine); the run fails rather than buffer it.
type LineTooLongError struct{ Limit int }

// Error implements error.
func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("codex protocol error: a line exceeds %d bytes", e.Limit)
}
