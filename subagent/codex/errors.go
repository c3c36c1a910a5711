package codex

import (
	"encoding/json"
	"fmt"

	"github.com/dsh-go/dsh/subagent"
)

// ConfigError is a Config that New rejects.
type ConfigError = subagent.ConfigError

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
