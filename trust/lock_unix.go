//go:build unix

package trust

import (
	"os"
	"syscall"
)

// lock holds an exclusive lock on path (created 0600) until unlock is
// called, so that two dsh processes changing the record do not lose each
// other's change.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
