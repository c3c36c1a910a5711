// Package proc runs child programs — the commands of the bash tool and the
// agents of out-of-process subagent providers (ACP agents, Codex, Claude
// Code) — so that nothing outlives its owner, tearing a child down never
// hangs, and no child can read the credentials of the process that started
// it.
//
// A child runs in its own process group with a scrubbed environment and
// plain pipes for stdin, stdout and stderr. Stop ends it in stages: stdin
// EOF, then SIGTERM to the whole group, then SIGKILL to the group. Whenever
// the child itself exits, whatever is left of its group (the native binary
// behind a Node launcher that forwards no signals; `cmd > /dev/null &` in a
// bash command) is killed before the child is reaped, while its PID still
// pins the group ID. Stderr is drained continuously into a bounded tail
// kept for diagnostics.
//
// # Supervision
//
// A program that calls Main first thing (dsh does) is a supervisor: Start
// then runs every child under a small supervisor process, the program
// itself re-executed with the flag SupervisorFlag. The supervisor starts
// the child in its own group, reports its PID and exit status to the owner
// over a socket, and kills the group — and, on Linux, every descendant that
// left it, since it is their subreaper — when the child exits, when the
// owner asks, and when the owner's end of the socket closes: the owner
// died, by whatever signal, SIGKILL included. On Linux the supervisor also
// gets a parent-death signal as a second line, and the child one tied to
// the supervisor. A child that is the supervisor program itself (a dsh
// started by dsh, `command: self`) needs no supervisor: it gets a lifeline
// pipe instead, and Main in the child kills its process group when the
// lifeline's far end closes. Without Main (tests of other packages,
// programs embedding dsh), children start directly, as before: they are
// still killed with their group on Stop, but not when the owner is
// SIGKILLed. DSH_SUPERVISOR names the supervisor program; Main sets it.
//
// # Hardening
//
// Every child starts from a dedicated OS thread that is hardened first and
// then dies (or, in the supervisor, parks), so that no other thread of the
// starting process is touched. On Linux, no_new_privs is set and the
// capabilities that reach into other processes' memory or the kernel
// (CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_BPF,
// CAP_PERFMON, CAP_DAC_READ_SEARCH, CAP_SYSLOG, CAP_CHECKPOINT_RESTORE,
// CAP_MAC_ADMIN, CAP_MAC_OVERRIDE) are dropped from its bounding,
// inheritable, permitted, effective and ambient sets: even a root child
// cannot read /proc/<pid>/mem or environ of a process with more
// capabilities, or of one that made itself non-dumpable (internal/secret).
// Spec.Sandbox, when set, is applied there too (see package sandbox).
//
// Processes that leave the group (setsid, setpgid) escape the group kills
// (on Linux the supervisor still kills them); Stop returns in bounded time
// and the Stdout reader still ends.
package proc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/sandbox"
)

const (
	// defaultStderrTail is Spec.StderrTail when unset.
	defaultStderrTail = 4096
	// strayGrace bounds how long Stop waits, after the reap, for the
	// stderr and stdout pipes to lose their last writer. Only a process
	// that left the group can hold them that long.
	strayGrace = time.Second
)

// SupervisorFlag, as a program's only argument, makes Main run the
// supervisor of one child.
const SupervisorFlag = "-dsh-supervise"

// SupervisorEnv names the variable that names the supervisor program Start
// runs (Main sets it to this program). Children never see it: ScrubEnv
// drops DSH_* variables.
const SupervisorEnv = "DSH_SUPERVISOR"

// lifelineEnv tells a child that is itself the supervisor program which
// descriptor is its lifeline.
const lifelineEnv = "DSH_LIFELINE"

// ErrUnsupported is returned by Start where child processes are not
// supported (systems other than Linux and macOS).
var ErrUnsupported = errors.New("proc: child processes are not supported on this system")

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
	// MergeStderr sends stderr to the Stdout pipe, interleaved as written
	// (no tail is kept, and Stderr is unused).
	MergeStderr bool
	// Sandbox restricts what the child may write (see package sandbox);
	// the zero value restricts nothing.
	Sandbox sandbox.Policy
}

// ExitError says how a child that did not exit with status 0 ended.
type ExitError struct {
	Code     int            // exit status, or -1 when killed by a signal
	Signal   syscall.Signal // the signal that killed it, or 0
	CoreDump bool
}

func (e *ExitError) Error() string {
	switch {
	case e.Signal != 0 && e.CoreDump:
		return "killed by signal " + signalName(e.Signal) + " (core dumped)"
	case e.Signal != 0:
		return "killed by signal " + signalName(e.Signal)
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// group is a started child: the leader of a process group.
type group interface {
	// signal sends sig to the whole group unless the leader has been
	// reaped (its group ID could then name someone else's group).
	signal(sig syscall.Signal) error
	// wait blocks until the leader has exited, the rest of its group has
	// been killed and the leader reaped. It returns the exit error (nil,
	// an *ExitError, or why the status is unknown) and any failure to
	// kill the rest of the group.
	wait() (exitErr, killErr error)
}

// command is what a platform starts: a resolved, validated Spec.
type command struct {
	path    string
	argv    []string // argv[0] included
	dir     string
	env     []string
	stdio   [3]*os.File
	sandbox sandbox.Policy
}

// Process is a running (or finished) child program. Always call Stop: it
// releases the process group, the pipes and the goroutines.
type Process struct {
	group      group
	pid        int
	stdin      *os.File
	stdout     *pipeReader
	stderr     *os.File // nil with MergeStderr
	tail       *ring
	strayGrace time.Duration

	done    chan struct{} // closed after the reap
	drained chan struct{} // closed when the stderr drain has ended
	err     error         // exit error, set before done closes
	killErr error         // failure of the at-exit group kill, set before done closes

	stopOnce sync.Once
	stopErr  error
}

// Start validates spec, then starts the child in its own process group
// with the environment ScrubEnv(BaseEnv, PassEnv) overlaid by Env, under a
// supervisor when this program is one (see Main). Nothing is spawned when
// validation fails.
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
	pipe := func(name string) (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("proc: %s pipe: %w", name, err)
		}
		files = append(files, r, w)
		return r, w, nil
	}
	inR, inW, err := pipe("stdin")
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe("stdout")
	if err != nil {
		return nil, err
	}
	errR, errW := (*os.File)(nil), outW
	if !spec.MergeStderr {
		if errR, errW, err = pipe("stderr"); err != nil {
			return nil, err
		}
	}

	c := command{path: path, argv: append([]string{spec.Path}, spec.Args...), dir: spec.Dir, env: env,
		stdio: [3]*os.File{inR, outW, errW}, sandbox: spec.Sandbox}
	pid, g, err := startGroup(c)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("proc: start %s: %w", spec.Path, err)
	}
	// The child holds its own copies; keeping ours would stop EOF.
	inR.Close()
	outW.Close()
	if errR != nil {
		errW.Close()
	}

	p := &Process{
		group:      g,
		pid:        pid,
		stdin:      inW,
		stdout:     &pipeReader{f: outR},
		stderr:     errR,
		tail:       newRing(tailSize),
		strayGrace: strayGrace,
		done:       make(chan struct{}),
		drained:    make(chan struct{}),
	}
	if errR != nil {
		go p.drain(spec.Stderr)
	} else {
		close(p.drained)
	}
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

// Stdout is the child's stdout (and stderr, with MergeStderr). It reports
// io.EOF once every process holding the pipe is gone, and at the latest
// shortly after Stop returns; it closes the pipe when it does.
func (p *Process) Stdout() io.Reader { return p.stdout }

// PID is the child's process ID, which is also its process group ID.
func (p *Process) PID() int { return p.pid }

// Done is closed once the child has exited and been reaped (and the rest of
// its process group killed).
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the child's exit error once Done is closed: nil for status 0, an
// *ExitError for another status or a signal, or an error saying why the
// status is unknown. It is nil while the child runs.
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
		status = "exit status 0"
		if p.err != nil {
			status = p.err.Error()
		}
		p.awaitDrain() // its last words may still be in the pipe
	default:
	}
	tail, cut := p.tail.text()
	return diagnostic(status, tail, cut)
}

// awaitDrain waits, at most strayGrace, for the stderr drain of an exited
// child to take what it wrote before it went; a stray holder of the pipe
// does not keep it longer.
func (p *Process) awaitDrain() {
	t := time.NewTimer(p.strayGrace)
	defer t.Stop()
	select {
	case <-p.drained:
	case <-t.C:
	}
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
		if err := p.group.signal(syscall.SIGTERM); err != nil {
			errs = append(errs, err)
		}
		reaped = p.exitWithin(termGrace)
	}
	if !reaped {
		if err := p.group.signal(syscall.SIGKILL); err != nil {
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

// wait reaps the child (see group.wait).
func (p *Process) wait() {
	p.err, p.killErr = p.group.wait()
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
