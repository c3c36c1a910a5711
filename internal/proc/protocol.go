package proc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dsh-go/dsh/sandbox"
)

// The supervisor protocol: newline-delimited JSON over a socket pair.
// The owner sends one request; the supervisor answers with the child's PID
// (or an error); the owner may then send signals; the supervisor reports
// the exit status once the child and its group are gone, and exits.
const (
	// maxRequest bounds a request line: the kernel refuses larger
	// argument and environment lists anyway.
	maxRequest = 16 << 20
	// maxMessage bounds every other line.
	maxMessage = 64 << 10
)

// request is what the supervisor starts.
type request struct {
	Path    string         `json:"path"`
	Argv    []string       `json:"argv"` // argv[0] included
	Dir     string         `json:"dir"`
	Env     []string       `json:"env"`
	Sandbox sandbox.Policy `json:"sandbox"`
}

// message is every other line, in either direction.
type message struct {
	PID    int         `json:"pid,omitempty"`    // supervisor: the child started
	Error  string      `json:"error,omitempty"`  // supervisor: the child could not start
	Signal int         `json:"signal,omitempty"` // owner: signal the child's group
	Exit   *exitStatus `json:"exit,omitempty"`   // supervisor: the child and its group are gone
}

// exitStatus is an exit status on the wire.
type exitStatus struct {
	Code     int  `json:"code"`
	Signal   int  `json:"signal,omitempty"`
	CoreDump bool `json:"core,omitempty"`
}

// err is the status as Process.Err reports it.
func (s exitStatus) err() error {
	if s.Code == 0 && s.Signal == 0 {
		return nil
	}
	if s.Signal != 0 {
		return &ExitError{Code: -1, Signal: syscall.Signal(s.Signal), CoreDump: s.CoreDump}
	}
	return &ExitError{Code: s.Code}
}

// statusOf is the wire form of an exit error (nil or *ExitError).
func statusOf(err error) exitStatus {
	var ee *ExitError
	if errors.As(err, &ee) {
		return exitStatus{Code: ee.Code, Signal: int(ee.Signal), CoreDump: ee.CoreDump}
	}
	if err != nil {
		return exitStatus{Code: -1}
	}
	return exitStatus{}
}

// readBounded reads one line of at most max bytes, without its newline.
func readBounded(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			return nil, fmt.Errorf("proc: protocol line over %d bytes", max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

// decodeRequest parses and checks a request line.
func decodeRequest(line []byte) (request, error) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return request{}, fmt.Errorf("proc: bad request: %w", err)
	}
	switch {
	case !filepath.IsAbs(req.Path):
		return request{}, fmt.Errorf("proc: bad request: program %q is not absolute", req.Path)
	case len(req.Argv) == 0:
		return request{}, errors.New("proc: bad request: no argv")
	case !filepath.IsAbs(req.Dir):
		return request{}, fmt.Errorf("proc: bad request: directory %q is not absolute", req.Dir)
	}
	for _, kv := range req.Env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return request{}, fmt.Errorf("proc: bad request: environment entry %q is not NAME=value", kv)
		}
	}
	for _, s := range append(append([]string{req.Path, req.Dir}, req.Argv...), req.Env...) {
		if strings.IndexByte(s, 0) >= 0 {
			return request{}, errors.New("proc: bad request: a string holds a NUL byte")
		}
	}
	if _, err := sandbox.ParseMode(string(req.Sandbox.Mode)); err != nil {
		return request{}, fmt.Errorf("proc: bad request: %w", err)
	}
	if _, err := sandbox.ParseNetwork(string(req.Sandbox.Network)); err != nil {
		return request{}, fmt.Errorf("proc: bad request: %w", err)
	}
	return req, nil
}

// decodeMessage parses a message line.
func decodeMessage(line []byte) (message, error) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, fmt.Errorf("proc: bad message from the supervisor: %w", err)
	}
	if m.PID < 0 || m.Signal < 0 || m.Signal > 64 {
		return message{}, errors.New("proc: bad message from the supervisor: value out of range")
	}
	return m, nil
}

// encode is a message or request as a line.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and numbers always encode
	}
	return append(b, '\n')
}
