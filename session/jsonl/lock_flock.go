//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package jsonl

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// A writer holds an exclusive flock(2) on its session file for as long as
// it has the file open; the kernel drops it when the process ends, however
// it ends. A reader probes for it with a shared lock it drops at once, so
// it can tell a live writer from a crashed one without ever blocking one
// for longer than the probe.

// errLocked reports that a live writer holds the file.
var errLocked = errors.New("locked by a live writer")

// lockWriter takes f's writer lock. Another writer's lock is reported as
// errLocked; a reader's probe, which lasts two system calls, is waited out
// (up to about 100 ms).
func lockWriter(f *os.File) error {
	for range 50 {
		err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return errLocked
}

// writerAlive reports whether a live writer holds f's writer lock.
func writerAlive(f *os.File) (bool, error) {
	err := flock(f, syscall.LOCK_SH|syscall.LOCK_NB)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, flock(f, syscall.LOCK_UN)
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
