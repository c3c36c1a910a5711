package main

import (
	"errors"
	"io"
	"strings"
)

// The stable codes of the errors dsh reports on its own account; a --json
// result line carries one (or the code of the error's source: a model
// failure's, such as AUTH or SERVER, or a subagent error's).
const (
	codeUsage       = "USAGE"             // a bad command line: flag, argument, missing prompt
	codeConfig      = "CONFIG"            // the configuration does not load or build
	codeMissingKey  = "MISSING_KEY"       // the model route's key variable is unset
	codeNoSession   = "SESSION_NOT_FOUND" // --resume/--continue found no session
	codeInterrupted = "INTERRUPTED"       // a signal, or stdout closing
	codeAborted     = "ABORTED"
	codeMaxSteps    = "MAX_STEPS"
	codeMaxTokens   = "MAX_TOKENS"
	codeBudget      = "BUDGET"
	codeError       = "ERROR" // anything else
)

// codedError gives an error one of the codes above.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string     { return e.err.Error() }
func (e *codedError) Unwrap() error     { return e.err }
func (e *codedError) ErrorCode() string { return e.code }

// withCode gives err the code, unless it has one already; nil stays nil.
func withCode(code string, err error) error {
	if err == nil {
		return nil
	}
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) && c.ErrorCode() != "" {
		return err
	}
	return &codedError{code: code, err: err}
}

// errorCode is the stable code of err: an interruption's, else the first
// code in its chain, else ERROR.
func errorCode(err error) string {
	var in *interruption
	if errors.As(err, &in) {
		return codeInterrupted
	}
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) && c.ErrorCode() != "" {
		return c.ErrorCode()
	}
	return codeError
}

// reportedError is an error a --json result line has already reported.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// reported marks err as reported on stdout; nil stays nil.
func reported(err error) error {
	if err == nil || isReported(err) {
		return err
	}
	return reportedError{err}
}

func isReported(err error) bool {
	var r reportedError
	return errors.As(err, &r)
}

// reportJSON writes err as the one result line of a --json run that
// ended before it had one (a start-up error: a bad flag, the
// configuration, a missing key) and marks it reported.
func reportJSON(out io.Writer, err error) error {
	if err == nil || isReported(err) {
		return err
	}
	newJSONOutput(out, nil).result(runResult{Status: "error", Err: err})
	return reported(err)
}

// wantsJSON reports whether a command line asks for `dsh run --json` (or
// --output-format json or stream-json):
// main reports the errors cobra finds before the command runs (a bad
// flag, a missing prompt) on stdout too then.
func wantsJSON(args []string) bool {
	run, json := false, false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			return run && json
		case a == "--config" || a == "--log-level":
			i++
		case a == "--json" || a == "--json=true" || a == "--json=1":
			json = true
		case a == "--output-format" && i+1 < len(args):
			i++
			json = json || strings.HasSuffix(args[i], "json")
		case strings.HasPrefix(a, "--output-format="):
			json = json || strings.HasSuffix(a, "json")
		case !strings.HasPrefix(a, "-") && !run:
			if a != "run" {
				return false
			}
			run = true
		}
	}
	return run && json
}
