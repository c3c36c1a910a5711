package claudecode

import (
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
)

// ConfigError is a Config that New rejects.
type ConfigError = subagent.ConfigError

// The kit's errors, as the provider reports them.
type (
	// StartError is a Start that failed before the run was ready.
	StartError = childproc.StartError
	// ReadyTimeoutError is the cause of a StartError when Claude Code sent
	// no system/init message within Config.ReadyTimeout.
	ReadyTimeoutError = childproc.ReadyTimeoutError
	// ExitError is the cause of a failure when Claude Code exited (or
	// closed its stdout) before it was ready or before its result.
	ExitError = childproc.ExitError
	// LineTooLongError is a line on Claude Code's stdout longer than
	// MaxLine.
	LineTooLongError = childproc.LineTooLongError
)
