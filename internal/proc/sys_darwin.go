package proc

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dsh-go/dsh/sandbox"
)

// parentDeathSignal is never sent on macOS (it has no parent-death
// signal); the supervisor relies on its owner's socket closing.
const parentDeathSignal = syscall.SIGUSR1

// supervisorAttr starts a supervisor in its own process group.
func supervisorAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// childAttr starts a supervised child in its own process group.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// selfExe names this program's executable.
func selfExe() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}

// becomeSubreaper does nothing: macOS has no subreapers, so descendants
// that leave the child's group escape the supervisor.
func becomeSubreaper() {}

// harden only validates p: macOS has neither no_new_privs nor capabilities
// to drop, and its sandbox wraps the command (sandbox.Policy.Command).
func harden(p sandbox.Policy) error { return p.RestrictThread() }

// waitExited blocks until process pid has exited, without reaping it.
func waitExited(pid int) {
	kq, err := unix.Kqueue()
	if err != nil {
		return
	}
	defer unix.Close(kq)
	var change, event [1]unix.Kevent_t
	unix.SetKevent(&change[0], pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	change[0].Fflags = unix.NOTE_EXIT
	for {
		// ESRCH: it has exited already.
		if _, err := unix.Kevent(kq, change[:], event[:], nil); err != unix.EINTR {
			return
		}
	}
}

// sweep reaps the supervisor's remaining children.
func sweep() {
	for {
		var ws unix.WaitStatus
		if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid <= 0 && err != unix.EINTR {
			return
		}
	}
}
