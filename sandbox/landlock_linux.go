package sandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// networkABI is the first Landlock ABI that restricts TCP.
const networkABI = 4

// Check reports whether this system can enforce m: nil for Full and unset
// modes, and where the kernel has Landlock.
func Check(m Mode) error {
	if !(Policy{Mode: m}).Restricted() {
		return nil
	}
	if v, err := ll.LandlockGetABIVersion(); err != nil || v < 1 {
		return fmt.Errorf("sandbox: this kernel does not offer Landlock (%v), so %s cannot be enforced", err, m)
	}
	return nil
}

// CheckNetwork reports whether this system can enforce n: nil for allow
// and unset, and where the kernel's Landlock restricts TCP (ABI 4, Linux
// 6.7).
func CheckNetwork(n Network) error {
	if n != NetworkDeny {
		return nil
	}
	if v, err := ll.LandlockGetABIVersion(); err != nil || v < networkABI {
		return fmt.Errorf("sandbox: this kernel's Landlock (ABI %d) cannot restrict the network (ABI %d needed), so network %s cannot be enforced", max(v, 0), networkABI, n)
	}
	return nil
}

// RestrictThread restricts the calling OS thread, and every process it
// starts from then on, to p (Landlock, with no_new_privs set). The caller
// must have locked its goroutine to the thread (runtime.LockOSThread) and
// must never unlock it, so that the thread dies with the goroutine. Rights
// the kernel's Landlock ABI lacks are left out (best effort); without
// Landlock nothing is restricted (see Check).
//
// Under ReadOnly and WorkspaceWrite, everything may be read and executed
// but p.Unreadable; the devices /dev/null, /dev/zero, /dev/full and
// /dev/tty may be written; under WorkspaceWrite everything under
// p.Writable may be changed too. Processes under p cannot signal processes
// outside their sandbox (ABI 6 and later). With NetworkDeny, TCP connect
// and bind are refused (ABI 4 and later; UDP too from ABI 10).
func (p Policy) RestrictThread() error {
	if err := p.validate(); err != nil || !p.Restricted() {
		return err
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return nil
	}
	var cfg landlock.Config
	var rules []landlock.Rule
	if p.restrictsFiles() {
		cfg.HandledAccessFS, cfg.Scoped = landlock.V11.HandledAccessFS, ll.ScopeSignal
		rules = p.fileRules(abi)
	}
	if p.Network == NetworkDeny {
		cfg.HandledAccessNet = landlock.V11.HandledAccessNet // no rule: nothing is allowed
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil || fd < 0 {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("sandbox: landlock_restrict_self: %w", err)
	}
	return nil
}

// fileRules are the Landlock rules of p's file access: read on /, write
// on p.Writable, both carved around p.Unreadable (see carve), and write
// on the devices.
func (p Policy) fileRules(abi int) []landlock.Rule {
	write := uint64(writeRights)
	if abi >= 2 { // on ABI 1, asking for refer would drop every restriction
		write |= ll.AccessFSRefer
	}
	c := newCarver(p.Unreadable)
	c.grant("/", readRights|ll.AccessFSResolveUnix)
	if p.Mode == WorkspaceWrite {
		for _, d := range p.Writable {
			c.grant(resolved(d), readRights|write)
		}
	}
	return append(c.rules(), landlock.RWFiles(devices()...).IgnoreIfMissing())
}

// Command returns the program and arguments that run argv (argv[0]
// included) under p; on Linux RestrictThread does the work, so they are
// returned unchanged.
func (p Policy) Command(path string, argv []string) (string, []string) { return path, argv }
