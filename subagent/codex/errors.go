package codex

import (
	"encoding/json"
	"fmt"

	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
)

// ConfigError is a Config that New rejects.
type ConfigError = subagent.ConfigError

// The kit's errors, as the provider reports them.
type (
	// StartError is a Start that failed before the run was ready.
	StartError = childproc.StartError
	// ReadyTimeoutError is the cause of a StartError when Codex did not
	// finish the handshake within Config.ReadyTimeout.
	ReadyTimeoutError = childproc.ReadyTimeoutError
	// ExitError is the cause of a failure when Codex exited (or closed
	// its stdout) during the handshake or a turn.
	ExitError = childproc.ExitError
	// LineTooLongError is a line on Codex's stdout longer than MaxLine.
	LineTooLongError = childproc.LineTooLongError
)

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
