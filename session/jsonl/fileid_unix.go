//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package jsonl

import (
	"os"
	"syscall"
)

// fileKey returns the device and inode of a file: names with one key are
// links to one file.
func fileKey(fi os.FileInfo) ([2]uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return [2]uint64{}, false
	}
	return [2]uint64{uint64(st.Dev), uint64(st.Ino)}, true
}
