package proc

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-go/dsh/sandbox"
)

// parentDeathSignal is the supervisor's parent-death signal: its owner's
// starting thread ended (the owner may have died).
const parentDeathSignal = syscall.SIGUSR1

// supervisorAttr starts a supervisor in its own process group, with a
// parent-death signal.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: parentDeathSignal}
}

// childAttr starts a supervised child in its own process group; it is
// killed if the supervisor dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// selfExe names this program's executable even if its file was replaced.
func selfExe() string { return "/proc/self/exe" }

// becomeSubreaper makes the supervisor the parent of every orphaned
// descendant, so that sweep can find those that left the group.
func becomeSubreaper() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// droppedCapabilities are the capabilities a child never gets: those that
// reach into other processes' memory, the kernel, or past the sandbox.
func droppedCapabilities() []uintptr {
	return []uintptr{unix.CAP_SYS_PTRACE, unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO,
		unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_DAC_READ_SEARCH, unix.CAP_SYSLOG, unix.CAP_CHECKPOINT_RESTORE,
		unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE}
}

// harden prepares the calling (locked) thread for starting a child: the
// dropped capabilities leave its bounding set (where it may change it; an
// unprivileged thread has none of them), and its ambient, inheritable,
// permitted and effective sets; no_new_privs is set, so no set-user-ID or
// file-capability program gets them back; then p is applied.
func harden(p sandbox.Policy) error {
	for _, c := range droppedCapabilities() {
		// EPERM: no CAP_SETPCAP (unprivileged); EINVAL: unknown to this kernel.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL) {
			return os.NewSyscallError("prctl(PR_CAPBSET_DROP)", err)
		}
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) // EINVAL before Linux 4.3: nothing to clear
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return os.NewSyscallError("capget", err)
	}
	for _, c := range droppedCapabilities() {
		d, bit := &data[c/32], uint32(1)<<(c%32)
		d.Effective &^= bit
		d.Permitted &^= bit
		d.Inheritable &^= bit
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return os.NewSyscallError("capset", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_NO_NEW_PRIVS)", err)
	}
	return p.RestrictThread()
}

// waitExited blocks until process pid has exited, without reaping it.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			return
		}
	}
}

// sweep kills and reaps every remaining child of the supervisor: as the
// subreaper, it inherits the descendants that left the child's group.
func sweep() {
	self := os.Getpid()
	for range 200 {
		if !reapAll() {
			return
		}
		kids := childPIDs(self)
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			if pgid, err := unix.Getpgid(k); err == nil && pgid == k {
				unix.Kill(-k, unix.SIGKILL)
			}
			unix.Kill(k, unix.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reapAll reaps every child that has exited and reports whether any
// child is left.
func reapAll() bool {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR || pid > 0:
		case err == unix.ECHILD:
			return false
		default:
			return true
		}
	}
}

// childPIDs lists the live child processes of pid.
func childPIDs(pid int) []int {
	var out []int
	for _, c := range scanChildren(pid) {
		out = append(out, c.pid)
	}
	return out
}
