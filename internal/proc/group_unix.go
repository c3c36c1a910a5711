//go:build linux || darwin

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-go/dsh/sandbox"
)

const (
	// startTimeout bounds the supervisor's answer to a request.
	startTimeout = 10 * time.Second
	// supervisorExitGrace bounds the wait for a supervisor to exit once it
	// has reported (or died); it is killed after that.
	supervisorExitGrace = 5 * time.Second
)

// startGroup starts c in its own process group: under a supervisor when
// this program has one (see Main), directly with a lifeline when c is the
// supervisor program itself, directly otherwise.
func startGroup(c command) (int, group, error) {
	sup, self := supervisorFor(c.path)
	switch {
	case sup == "":
		return startDirect(c, false)
	case self:
		return startDirect(c, true)
	}
	return startSupervised(c, sup)
}

// supervisorFor returns the supervisor program (empty without one) and
// whether path names that very program.
func supervisorFor(path string) (string, bool) {
	sup := os.Getenv(SupervisorEnv)
	if sup == "" {
		return "", false
	}
	a, errA := os.Stat(sup)
	b, errB := os.Stat(path)
	return sup, errA == nil && errB == nil && os.SameFile(a, b)
}

// startHardened starts cmd from a new OS thread that is hardened first
// (no_new_privs, capabilities dropped, the sandbox applied) so that cmd
// inherits all of it while the caller's threads keep none of it. The
// thread is never released to other goroutines: it dies when its goroutine
// ends, right after the start, or — when park is not nil — once park is
// closed, which keeps a parent-death signal tied to the thread from firing.
func startHardened(cmd *exec.Cmd, p sandbox.Policy, park <-chan struct{}) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the hardened thread must not run anything else
		err := harden(p)
		if err == nil {
			cmd.Path, cmd.Args = p.Command(cmd.Path, cmd.Args)
			err = cmd.Start()
		}
		errc <- err
		if park != nil && err == nil {
			<-park
		}
	}()
	return <-errc
}

// direct is a child started by this process.
type direct struct {
	cmd      *exec.Cmd
	pid      int
	lifeline *os.File // our end of the child's lifeline, or nil

	mu     sync.Mutex // orders group signals against the reap
	reaped bool
}

// startDirect starts c as our own child; with lifeline, the child gets the
// read end of a pipe whose write end we hold until it is reaped.
func startDirect(c command, lifeline bool) (int, group, error) {
	cmd := &exec.Cmd{Path: c.path, Args: c.argv, Dir: c.dir, Env: c.env,
		Stdin: c.stdio[0], Stdout: c.stdio[1], Stderr: c.stdio[2], SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	d := &direct{cmd: cmd}
	var lifelineR *os.File
	if lifeline {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, nil, fmt.Errorf("lifeline pipe: %w", err)
		}
		lifelineR, d.lifeline = r, w
		cmd.ExtraFiles = []*os.File{r}
		cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], fmt.Sprintf("%s=%d", lifelineEnv, 3))
	}
	err := startHardened(cmd, c.sandbox, nil)
	if lifelineR != nil {
		lifelineR.Close()
	}
	if err != nil {
		if d.lifeline != nil {
			d.lifeline.Close()
		}
		return 0, nil, err
	}
	d.pid = cmd.Process.Pid
	return d.pid, d, nil
}

func (d *direct) signal(sig syscall.Signal) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reaped {
		return nil
	}
	return killGroup(d.pid, sig)
}

// wait reaps the child. Between its exit and the reap the zombie pins the
// group ID, so the rest of the group is killed then, safely.
func (d *direct) wait() (exitErr, killErr error) {
	waitExited(d.pid)
	d.mu.Lock()
	killErr = killGroup(d.pid, syscall.SIGKILL)
	exitErr = exitErrorOf(d.cmd.Wait())
	d.reaped = true
	d.mu.Unlock()
	if d.lifeline != nil {
		d.lifeline.Close()
	}
	return exitErr, killErr
}

// supervised is a child started by a supervisor process on our behalf.
type supervised struct {
	cmd *exec.Cmd // the supervisor
	ctl *os.File  // our end of the socket pair
	r   *bufio.Reader
	pid int // the child's

	mu     sync.Mutex // orders signal requests against the report
	reaped bool
}

// startSupervised runs the supervisor program sup and has it start c.
func startSupervised(c command, sup string) (int, group, error) {
	req := encode(request{Path: c.path, Argv: c.argv, Dir: c.dir, Env: c.env, Sandbox: c.sandbox})
	if len(req) > maxRequest {
		return 0, nil, fmt.Errorf("the command and its environment take %d bytes, over %d", len(req), maxRequest)
	}
	ctl, peer, err := socketPair()
	if err != nil {
		return 0, nil, err
	}
	cmd := &exec.Cmd{Path: sup, Args: []string{"dsh-supervisor", SupervisorFlag}, Dir: "/",
		// A supervisor is small and short of work: one thread, and no
		// collection below 64 MiB, start it faster. The race runtime would
		// otherwise delay every supervisor's exit by a second (other builds
		// ignore GORACE).
		Env:        []string{"GOMAXPROCS=1", "GOGC=off", "GOMEMLIMIT=64MiB", "GORACE=atexit_sleep_ms=0"},
		ExtraFiles: []*os.File{peer, c.stdio[0], c.stdio[1], c.stdio[2]}, SysProcAttr: supervisorAttr()}
	err = cmd.Start()
	peer.Close()
	if err != nil {
		ctl.Close()
		return 0, nil, fmt.Errorf("supervisor %s: %w", sup, err)
	}
	s := &supervised{cmd: cmd, ctl: ctl, r: bufio.NewReader(ctl)}
	pid, err := s.start(req)
	if err != nil {
		cmd.Process.Kill() // its child, if any, dies with it (parent-death signal)
		cmd.Wait()
		ctl.Close()
		return 0, nil, err
	}
	s.pid = pid
	return pid, s, nil
}

// start sends the request line and reads the answer, within startTimeout.
func (s *supervised) start(req []byte) (int, error) {
	s.ctl.SetDeadline(time.Now().Add(startTimeout))
	defer s.ctl.SetDeadline(time.Time{})
	_, werr := s.ctl.Write(req) // on failure, the answer may still say why
	line, err := readBounded(s.r, maxMessage)
	if err != nil {
		if werr != nil {
			err = werr
		}
		return 0, fmt.Errorf("supervisor did not answer (is %s a dsh that calls proc.Main?): %w", s.cmd.Path, err)
	}
	m, err := decodeMessage(line)
	switch {
	case err != nil:
		return 0, err
	case m.Error != "":
		return 0, errors.New(m.Error)
	case m.PID <= 0:
		return 0, errors.New("supervisor: no PID in its answer")
	}
	return m.PID, nil
}

func (s *supervised) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reaped {
		return nil
	}
	s.ctl.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := s.ctl.Write(encode(message{Signal: int(sig)})); err != nil {
		// The supervisor is gone (wait notices): signal the group ourselves.
		return killGroup(s.pid, sig)
	}
	return nil
}

// wait reads the supervisor's report, then reaps the supervisor. A
// supervisor that dies without reporting leaves the group to us.
func (s *supervised) wait() (exitErr, killErr error) {
	st, err := s.report()
	if err == nil {
		exitErr = st.err()
	} else {
		killErr = killGroup(s.pid, syscall.SIGKILL)
		exitErr = fmt.Errorf("the supervisor ended without reporting the exit status: %w", err)
	}
	s.mu.Lock()
	s.reaped = true
	s.ctl.Close()
	s.mu.Unlock()
	kill := time.AfterFunc(supervisorExitGrace, func() { s.cmd.Process.Kill() })
	supErr := exitErrorOf(s.cmd.Wait())
	kill.Stop()
	if err != nil && supErr != nil {
		exitErr = fmt.Errorf("%w (supervisor %v)", exitErr, supErr)
	}
	return exitErr, killErr
}

// report reads the supervisor's messages up to its exit report.
func (s *supervised) report() (*exitStatus, error) {
	for {
		line, err := readBounded(s.r, maxMessage)
		if err != nil {
			return nil, err
		}
		m, err := decodeMessage(line)
		if err != nil {
			return nil, err
		}
		if m.Exit != nil {
			return m.Exit, nil
		}
	}
}

// socketPair returns two connected, close-on-exec stream sockets; the
// first is non-blocking, so that deadlines work on it.
func socketPair() (*os.File, *os.File, error) {
	syscall.ForkLock.RLock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("supervisor socket: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("supervisor socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "supervisor"), nil
}

// killGroup sends sig to process group pgid; a group already gone is fine.
func killGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("proc: send SIG%s to process group %d: %w", signalName(sig), pgid, err)
}

// exitErrorOf turns what exec.Cmd.Wait returned into Process.Err's form.
func exitErrorOf(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return err
	case ws.Signaled():
		return &ExitError{Code: -1, Signal: ws.Signal(), CoreDump: ws.CoreDump()}
	}
	return &ExitError{Code: ws.ExitStatus()}
}

// signalName is the conventional name of sig without "SIG", e.g. "TERM".
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name[len("SIG"):]
	}
	return fmt.Sprintf("%d", int(sig))
}

// waitHangup reports whether the pipe read end f has no writer left,
// waiting up to d for that. A closed f counts as hung up.
func waitHangup(f *os.File, d time.Duration) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	hup := false
	err = rc.Control(func(fd uintptr) {
		deadline := time.Now().Add(max(d, 0))
		for {
			fds := []unix.PollFd{{Fd: int32(fd)}} // no events: only hang-up and errors
			ms := int((time.Until(deadline) + time.Millisecond - 1) / time.Millisecond)
			n, err := unix.Poll(fds, max(ms, 0))
			if err == unix.EINTR {
				continue
			}
			// On a failed poll, answer "not hung up": the caller then
			// forces EOF rather than risk a hang.
			hup = err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
			return
		}
	})
	return hup || err != nil
}
