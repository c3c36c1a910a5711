package subagent

import (
	"fmt"
	"strings"
)

// Code is a stable error code of the seam.
type Code string

// The seam's error codes.
const (
	CodeNoProvider             Code = "NO_PROVIDER"
	CodeDuplicateProvider      Code = "DUPLICATE_PROVIDER"
	CodeUnsupportedCapability  Code = "UNSUPPORTED_CAPABILITY"
	CodeDepthExceeded          Code = "DEPTH_EXCEEDED"
	CodeUnsupportedSchema      Code = "UNSUPPORTED_SCHEMA"
	CodeInvalidRequest         Code = "INVALID_REQUEST"
	CodeAbortedBeforeReadiness Code = "ABORTED_BEFORE_READY"
	CodeLimitReached           Code = "LIMIT_REACHED" // a cap on children is reached: the tree's live ones, or one turn's starts

	// The codes of continuable children.
	CodeContinuationUnavailable Code = "CONTINUATION_UNAVAILABLE"   // the service was given no agents to continue children with
	CodePersistenceUnavailable  Code = "PERSISTENCE_UNAVAILABLE"    // sessions do not outlive the process
	CodeDuplicateChild          Code = "DUPLICATE_CHILD"            // a reserved child id is live or stored
	CodeNotResumable            Code = "NOT_RESUMABLE"              // unknown or unreadable child, no continuable descriptor, or rebuild failure
	CodeUnauthorized            Code = "UNAUTHORIZED"               // the caller is not the child's live direct parent (or ancestor)
	CodeDraining                Code = "DRAINING"                   // the service is tearing continuable children down
	CodeActivationClosing       Code = "ACTIVATION_CLOSING"         // the target's or parent's teardown began
	CodeTeardownFailed          Code = "ACTIVATION_TEARDOWN_FAILED" // a settled child's flush or detach failed (Result.Teardown)
	CodeParentUnavailable       Code = "PARENT_UNAVAILABLE"         // a report's parent is not live
	CodeCancelled               Code = "CANCELLED"                  // a listing's ctx ended
)

// Capability names, as UNSUPPORTED_CAPABILITY errors report them.
const (
	CapOutputSchema = "outputSchema"
	CapDepthLimit   = "depthLimit"
	CapToolFilter   = "toolFilter"
	CapPersona      = "persona"
	CapPolicy       = "policy"
)

// Error is a seam failure. Match it with errors.Is against a sentinel
// (ErrNoProvider, …) or with errors.As to read its fields.
type Error struct {
	Code       Code
	Provider   string   // the provider involved, when any
	Capability string   // UNSUPPORTED_CAPABILITY: the missing capability
	Attempted  int      // DEPTH_EXCEEDED: the child depth
	Max        int      // DEPTH_EXCEEDED: the cap
	Violations []string // UNSUPPORTED_SCHEMA: every violation
	Msg        string
	Err        error // the cause, when any
}

func (e *Error) Error() string {
	msg := "subagent: " + e.Msg
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable code, which a tool result keeps.
func (e *Error) ErrorCode() string { return string(e.Code) }

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrNoProvider            = &Error{Code: CodeNoProvider}
	ErrDuplicateProvider     = &Error{Code: CodeDuplicateProvider}
	ErrUnsupportedCapability = &Error{Code: CodeUnsupportedCapability}
	ErrDepthExceeded         = &Error{Code: CodeDepthExceeded}
	ErrUnsupportedSchema     = &Error{Code: CodeUnsupportedSchema}
	ErrInvalidRequest        = &Error{Code: CodeInvalidRequest}
	ErrAbortedBeforeReady    = &Error{Code: CodeAbortedBeforeReadiness}
	ErrLimitReached          = &Error{Code: CodeLimitReached}
	ErrNotResumable          = &Error{Code: CodeNotResumable}
	ErrUnauthorized          = &Error{Code: CodeUnauthorized}
	ErrDraining              = &Error{Code: CodeDraining}
	ErrPersistence           = &Error{Code: CodePersistenceUnavailable}
	ErrDuplicateChild        = &Error{Code: CodeDuplicateChild}
	ErrActivationClosing     = &Error{Code: CodeActivationClosing}
	ErrParentUnavailable     = &Error{Code: CodeParentUnavailable}
	ErrTeardownFailed        = &Error{Code: CodeTeardownFailed}
)

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

func unsupported(provider, capability string) *Error {
	return &Error{Code: CodeUnsupportedCapability, Provider: provider, Capability: capability,
		Msg: fmt.Sprintf("provider %q does not support the %s capability", provider, capability)}
}

func depthExceeded(attempted, max int) *Error {
	return &Error{Code: CodeDepthExceeded, Attempted: attempted, Max: max,
		Msg: fmt.Sprintf("subagent depth %d exceeds maxDepth %d", attempted, max)}
}

func schemaError(violations []string) *Error {
	return &Error{Code: CodeUnsupportedSchema, Violations: violations,
		Msg: "unsupported JSON schema: " + strings.Join(violations, "; ")}
}

// AbortedBeforeReady returns the error a provider reports when ctx ended
// before its child was ready; cause is context.Cause(ctx).
func AbortedBeforeReady(provider string, cause error) error {
	return &Error{Code: CodeAbortedBeforeReadiness, Provider: provider,
		Msg: fmt.Sprintf("provider %q: aborted before the child was ready", provider), Err: cause}
}

// TeardownFailed returns the ACTIVATION_TEARDOWN_FAILED error of a child
// that settled but could not be disposed (its log's flush or its detach
// failed: cause), which Result.Teardown carries beside the outcome.
func TeardownFailed(provider, child string, cause error) error {
	return &Error{Code: CodeTeardownFailed, Provider: provider,
		Msg: fmt.Sprintf("child %s: teardown failed after it settled", child), Err: cause}
}

// ConfigError is a provider configuration that a provider's constructor
// rejects: Field is the offending YAML key of its block, so that the
// configuration loader can point at the file and line.
type ConfigError struct {
	Kind     string // the provider kind, e.g. "codex"
	Provider string // the provider's name
	Field    string // the offending key, e.g. "permissionMode"
	Msg      string
}

// CodeInvalidConfig is the code of a ConfigError.
const CodeInvalidConfig Code = "INVALID_CONFIG"

// ErrorCode returns CodeInvalidConfig.
func (e *ConfigError) ErrorCode() string { return string(CodeInvalidConfig) }

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s provider %s: %s: %s", e.Kind, e.Provider, e.Field, e.Msg)
}
