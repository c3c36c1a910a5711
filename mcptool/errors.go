package mcptool

import "fmt"

// Error codes of MCP tools, as tool results carry them.
const (
	// CodeConfig: a server block is invalid.
	CodeConfig = "MCP_CONFIG"
	// CodeUnavailable: the server could not be started or reached, or it
	// crashed; it is restarted on a later call, after a backoff.
	CodeUnavailable = "MCP_UNAVAILABLE"
	// CodeProtocol: the server answered the call with a protocol error
	// (an unknown tool, invalid arguments, an internal error).
	CodeProtocol = "MCP_ERROR"
	// CodeToolError: the tool ran and reported an error (isError).
	CodeToolError = "MCP_TOOL_ERROR"
	// CodeTimeout: the call outlived the server's callTimeout.
	CodeTimeout = "MCP_TIMEOUT"
	// CodeClosed: the server set was closed (dsh is shutting down).
	CodeClosed = "MCP_CLOSED"
)

// Error is a failed MCP tool call or server start.
type Error struct {
	Code   string
	Server string
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("MCP server %s: %s", e.Server, e.Msg) }

// ErrorCode returns the stable code, which the tool result keeps.
func (e *Error) ErrorCode() string { return e.Code }

// Is matches another *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}
