// Package proc runs child programs for out-of-process subagent providers
// (an ACP client driving another agent, Codex, Claude Code) so that nothing
// outlives them and tearing them down never hangs.
//
// A child runs in its own process group with a scrubbed environment and
// plain pipes for stdin, stdout and stderr. Stop ends it in stages: stdin
// EOF, then SIGTERM to the whole group, then SIGKILL to the group. Whenever
// the child itself exits, whatever is left of its group (say the native
// binary behind a Node launcher that forwards no signals) is killed before
// the child is reaped, while its PID still pins the group ID. Stderr is
// drained continuously into a bounded tail kept for diagnostics.
//
// Processes that leave the group (setsid, setpgid) escape the kills; Stop
// still returns in bounded time and the Stdout reader still ends.
package proc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const (
	// defaultStderrTail is Spec.StderrTail when unset.
	defaultStderrTail = 4096
	// strayGrace bounds how long Stop waits, after the reap, for the
	// stderr and stdout pipes to lose their last writer. Only a process
	// that left the group can hold them that long.
	strayGrace = time.Second
)

// Spec describes a child program.
type Spec struct {
	Path       string    // program: without a slash, looked up in the child's PATH (else the parent's); a relative path with one is relative to Dir
	Args       []string  // arguments, without the program name
	Dir        string    // working directory (required, absolute)
	BaseEnv    []string  // the environment to scrub; nil means os.Environ()
	PassEnv    []string  // names of BaseEnv variables kept even though scrubbing would drop them (proxies excepted)
	Env        []string  // explicit "NAME=value" entries layered on top (they win, unscrubbed)
	StderrTail int       // bytes of the most recent stderr kept for diagnostics (default 4096)
	Stderr     io.Writer // optional: stderr is also copied here (e.g. a log), from another goroutine; it must not block
}

// Process is a running (or finished) child program. Always call Stop: it
// releases the process group, the pipes and the goroutines.
type Process struct {
	cmd        *exec.Cmd
	pid        int
	stdin      *os.File
	stdout     *pipeReader
	stderr     *os.File
	tail       *ring
	strayGrace time.Duration

	done    chan struct{} // closed after the reap
	drained chan struct{} // closed when the stderr drain has ended
	err     error         // exit error, set before done closes
	killErr error         // failure of the at-exit group kill, set before done closes

	mu     sync.Mutex // orders group signals against the reap
	reaped bool

	stopOnce sync.Once
	stopErr  error
}

// Start validates spec, then starts the child in its own process group
// (Setpgid) with the environment ScrubEnv(BaseEnv, PassEnv) overlaid by Env.
// Nothing is spawned when validation fails.
func Start(spec Spec) (*Process, error) {
	if spec.Path == "" {
		return nil, errors.New("proc: no program given (empty Path)")
	}
	if err := checkDir(spec.Dir); err != nil {
		return nil, err
	}
	env, err := childEnv(spec)
	if err != nil {
		return nil, err
	}
	path, err := resolve(spec.Path, spec.Dir, env)
	if err != nil {
		return nil, err
	}
	tailSize := spec.StderrTail
	if tailSize <= 0 {
		tailSize = defaultStderrTail
	}

	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("proc: stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("proc: stderr pipe: %w", err)
	}

	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{spec.Path}, spec.Args...),
		Dir:         spec.Dir,
		Env:         env,
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("proc: start %s: %w", spec.Path, err)
	}
	// The child holds its own copies; keeping ours would stop EOF.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &Process{
		cmd:        cmd,
		pid:        cmd.Process.Pid,
		stdin:      inW,
		stdout:     &pipeReader{f: outR},
		stderr:     errR,
		tail:       newRing(tailSize),
		strayGrace: strayGrace,
		done:       make(chan struct{}),
		drained:    make(chan struct{}),
	}
	go p.drain(spec.Stderr)
	go p.wait()
	return p, nil
}

// checkDir requires dir to be an absolute path to an existing directory.
func checkDir(dir string) error {
	switch {
	case dir == "":
		return errors.New("proc: no working directory given (empty Dir)")
	case !filepath.IsAbs(dir):
		return fmt.Errorf("proc: working directory %q is not an absolute path", dir)
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("proc: working directory %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("proc: working directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("proc: working directory %s is not a directory", dir)
	}
	return nil
}

// Stdin is the child's stdin. Stop closes it; closing it earlier sends EOF.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the child's stdout. It reports io.EOF once every process holding
// the pipe is gone, and at the latest shortly after Stop returns; it closes
// the pipe when it does.
func (p *Process) Stdout() io.Reader { return p.stdout }

// PID is the child's process ID, which is also its process group ID.
func (p *Process) PID() int { return p.pid }

// Done is closed once the child has exited and been reaped (and the rest of
// its process group killed).
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the child's exit error once Done is closed: nil for status 0, an
// *exec.ExitError otherwise. It is nil while the child runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// StderrTail is the most recent stderr, at most Spec.StderrTail bytes of
// valid UTF-8 starting on a rune boundary.
func (p *Process) StderrTail() string {
	s, _ := p.tail.text()
	return s
}

// Diagnostic describes how the child ended with its stderr tail, e.g.
// "exit status 3; stderr: …" or "killed by signal KILL; stderr: …" ("running"
// before it exits), in at most 4096 bytes.
func (p *Process) Diagnostic() string {
	status := "running"
	select {
	case <-p.done:
		status = describeExit(p.err)
	default:
	}
	tail, cut := p.tail.text()
	return diagnostic(status, tail, cut)
}

// Stop ends the child and returns once it has been reaped and its stderr
// drained: it closes stdin, waits up to eofGrace for the child to exit, then
// sends SIGTERM to the process group and waits up to termGrace, then sends
// SIGKILL to the group. Whatever remains of the group when the child exits
// is killed. Stop is idempotent and safe for concurrent use (every call
// returns after the first completes, with its result); it returns an error
// only when a kill fails unexpectedly.
func (p *Process) Stop(eofGrace, termGrace time.Duration) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(eofGrace, termGrace) })
	return p.stopErr
}

func (p *Process) stop(eofGrace, termGrace time.Duration) error {
	p.stdin.Close()
	var errs []error
	reaped := p.exitWithin(eofGrace)
	if !reaped {
		if err := p.signalGroup(syscall.SIGTERM); err != nil {
			errs = append(errs, err)
		}
		reaped = p.exitWithin(termGrace)
	}
	if !reaped {
		if err := p.signalGroup(syscall.SIGKILL); err != nil {
			// The leader may never exit: do not wait for it.
			errs = append(errs, err)
		} else {
			<-p.done
			reaped = true
		}
	}
	if reaped && p.killErr != nil {
		errs = append(errs, p.killErr)
	}
	p.release()
	return errors.Join(errs...)
}

// exitWithin reports whether the child is reaped within d.
func (p *Process) exitWithin(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// signalGroup sends sig to the child's process group unless the child has
// been reaped (its group ID could then name someone else's group).
func (p *Process) signalGroup(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return nil
	}
	return killGroup(p.pid, sig)
}

// killGroup sends sig to process group pgid; a group already gone is fine.
func killGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("proc: send SIG%s to process group %d: %w", signalName(sig), pgid, err)
}

// wait reaps the child. Between its exit and the reap the zombie pins the
// group ID, so the rest of the group is killed then, safely.
func (p *Process) wait() {
	waitExited(p.pid)
	p.mu.Lock()
	p.killErr = killGroup(p.pid, syscall.SIGKILL)
	p.err = p.cmd.Wait()
	p.reaped = true
	p.mu.Unlock()
	close(p.done)
}

// drain copies stderr into the tail (and the optional writer) until the
// pipe closes or Stop gives up on it.
func (p *Process) drain(extra io.Writer) {
	defer close(p.drained)
	defer p.stderr.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := p.stderr.Read(buf)
		if n > 0 {
			p.tail.Write(buf[:n])
			if extra != nil {
				if _, werr := extra.Write(buf[:n]); werr != nil {
					extra = nil
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// release waits, bounded, for the last writers of stderr and stdout to go.
// A writer still there belongs to a process that left the group: the stderr
// drain is ended and the Stdout reader is made to report EOF.
func (p *Process) release() {
	deadline := time.Now().Add(p.strayGrace)
	t := time.NewTimer(p.strayGrace)
	select {
	case <-p.drained:
	case <-t.C:
		p.stderr.SetReadDeadline(time.Now())
		<-p.drained
	}
	t.Stop()
	if !waitHangup(p.stdout.f, time.Until(deadline)) {
		p.stdout.f.SetReadDeadline(time.Now())
	}
}

// pipeReader is the Stdout reader: it turns the end of the pipe (including
// Stop giving up on a stray writer) into io.EOF and then closes the pipe.
type pipeReader struct{ f *os.File }

func (r *pipeReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if err == nil {
		return n, nil
	}
	if err == io.EOF || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, os.ErrClosed) {
		r.f.Close()
		return n, io.EOF
	}
	return n, err
}

// waitExited blocks until process pid has exited, without reaping it.
func waitExited(pid int) {
	const pPID = 1      // idtype_t P_PID
	var info [16]uint64 // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// pollFd is struct pollfd.
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// waitHangup reports whether the pipe read end f has no writer left,
// waiting up to d for that. A closed f counts as hung up.
func waitHangup(f *os.File, d time.Duration) bool {
	const pollErr, pollHup, pollNval = 0x8, 0x10, 0x20
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	hup := false
	err = rc.Control(func(fd uintptr) {
		pfd := pollFd{fd: int32(fd)} // no events: only hang-up and errors
		ts := syscall.NsecToTimespec(int64(max(d, 0)))
		for {
			n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1,
				uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
			if errno == syscall.EINTR {
				continue // ppoll left the remaining time in ts
			}
			// On a failed ppoll, answer "not hung up": the caller then
			// forces EOF rather than risk a hang.
			hup = errno == 0 && n > 0 && pfd.revents&(pollErr|pollHup|pollNval) != 0
			return
		}
	})
	return hup || err != nil
}
