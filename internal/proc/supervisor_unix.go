//go:build linux || darwin

package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main makes this program a supervisor; call it first thing in main (and in
// TestMain of tests whose children should be supervised). Started as a
// supervisor (with SupervisorFlag), it supervises one child and exits.
// Started with a lifeline by another supervisor program, it kills its own
// process group once the lifeline's far end closes. Otherwise it sets
// DSH_SUPERVISOR to this program, so that Start supervises every child.
func Main() {
	if len(os.Args) == 2 && os.Args[1] == SupervisorFlag {
		os.Exit(supervise())
	}
	watchLifeline()
	os.Setenv(SupervisorEnv, selfExe())
}

// watchLifeline, when this process was given a lifeline, kills its process
// group (or itself, when it leads none) as soon as the lifeline ends.
func watchLifeline() {
	v, ok := os.LookupEnv(lifelineEnv)
	if !ok {
		return
	}
	os.Unsetenv(lifelineEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "lifeline")
	go func() {
		io.Copy(io.Discard, f) // ends when the owner is gone
		if pid := os.Getpid(); unix.Getpgrp() == pid {
			unix.Kill(0, unix.SIGKILL)
		} else {
			unix.Kill(pid, unix.SIGKILL)
		}
	}()
}

// supervise is the supervisor: fd 3 is the owner's socket, fds 4, 5 and 6
// the child's stdin, stdout and stderr. It returns the exit code.
func supervise() int {
	ppid := os.Getppid()
	for fd := 3; fd <= 6; fd++ {
		unix.CloseOnExec(fd)
	}
	var st unix.Stat_t
	if err := unix.Fstat(3, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		fmt.Fprintf(os.Stderr, "%s is internal: it expects its owner's socket as fd 3\n", SupervisorFlag)
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, parentDeathSignal)
	signal.Ignore(syscall.SIGPIPE)
	ctl := os.NewFile(3, "owner")
	stdio := []*os.File{os.NewFile(4, "stdin"), os.NewFile(5, "stdout"), os.NewFile(6, "stderr")}
	r := bufio.NewReader(ctl)
	line, err := readBounded(r, maxRequest)
	var req request
	if err == nil {
		req, err = decodeRequest(line)
	}
	if err != nil {
		ctl.Write(encode(message{Error: err.Error()}))
		return 1
	}
	becomeSubreaper()
	cmd := &exec.Cmd{Path: req.Path, Args: req.Argv, Dir: req.Dir, Env: append([]string{}, req.Env...),
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2], SysProcAttr: childAttr()}
	park := make(chan struct{}) // never closed: the child's parent-death signal is tied to the starting thread
	err = startHardened(cmd, req.Sandbox, park)
	for _, f := range stdio {
		f.Close()
	}
	if err != nil {
		ctl.Write(encode(message{Error: err.Error()}))
		return 1
	}
	pid := cmd.Process.Pid
	report := true
	if _, err := ctl.Write(encode(message{PID: pid})); err != nil {
		report = false // the owner is gone
	}

	exited := make(chan struct{})
	go func() {
		waitExited(pid)
		close(exited)
	}()
	msgs := make(chan message)
	go func() {
		defer close(msgs)
		for {
			line, err := readBounded(r, maxMessage)
			if err != nil {
				return
			}
			if m, err := decodeMessage(line); err == nil {
				msgs <- m
			}
		}
	}()
watch:
	for report {
		select {
		case <-exited:
			break watch
		case m, ok := <-msgs:
			if !ok {
				report = false // the owner is gone: take everything down
			} else if m.Signal > 0 {
				killGroup(pid, syscall.Signal(m.Signal))
			}
		case s := <-sigs:
			if s == parentDeathSignal && os.Getppid() == ppid {
				continue // the owner's starting thread ended, not the owner
			}
			report = s != parentDeathSignal
			break watch
		}
	}
	killGroup(pid, syscall.SIGKILL) // the rest of the group; the leader too unless it has exited
	exitErr := exitErrorOf(cmd.Wait())
	sweep()
	if report {
		st := statusOf(exitErr)
		ctl.Write(encode(message{Exit: &st}))
	}
	return 0
}
