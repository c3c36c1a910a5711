package sandbox

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

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

// RestrictThread restricts the calling OS thread, and every process it
// starts from then on, to p (Landlock, with no_new_privs set). The caller
// must have locked its goroutine to the thread (runtime.LockOSThread) and
// must never unlock it, so that the thread dies with the goroutine. Rights
// the kernel's Landlock ABI lacks are left out (best effort); without
// Landlock nothing is restricted (see Check).
//
// Everything may be read and executed; the devices /dev/null, /dev/zero,
// /dev/full and /dev/tty may be written; under WorkspaceWrite everything
// under p.Writable may be changed too. Processes under p cannot signal
// processes outside their sandbox (ABI 6 and later).
func (p Policy) RestrictThread() error {
	if err := p.validate(); err != nil || !p.Restricted() {
		return err
	}
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return nil
	}
	rules := []landlock.Rule{
		landlock.RODirs("/").WithResolveUnix(),
		landlock.RWFiles(devices()...).IgnoreIfMissing(),
	}
	if p.Mode == WorkspaceWrite && len(p.Writable) > 0 {
		rw := landlock.RWDirs(p.Writable...).IgnoreIfMissing()
		if abi >= 2 { // on ABI 1, asking for refer would drop every restriction
			rw = rw.WithRefer()
		}
		rules = append(rules, rw)
	}
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: ll.ScopeSignal}.BestEffort()
	fd, flags, err := cfg.NewRulesetFD(rules...)
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

// Command returns the program and arguments that run argv (argv[0]
// included) under p; on Linux RestrictThread does the work, so they are
// returned unchanged.
func (p Policy) Command(path string, argv []string) (string, []string) { return path, argv }
