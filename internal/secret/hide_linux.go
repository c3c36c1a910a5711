package secret

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hide zeroes the named variables' entries in the process's initial
// environment block — what /proc/<pid>/environ shows — and makes the
// process non-dumpable. Go keeps its own copy of the environment, so
// nothing in the program reads that block after start-up.
func hide(names []string) error {
	var errs []error
	if len(names) > 0 {
		errs = append(errs, zeroInitialEnv(names))
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("secret: prctl(PR_SET_DUMPABLE): %w", err))
	}
	return errors.Join(errs...)
}

// zeroInitialEnv overwrites the entries of names in the initial
// environment block with NUL bytes, through /proc/self/mem.
func zeroInitialEnv(names []string) error {
	start, end, err := envBounds()
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("secret: cannot rewrite the initial environment: %w", err)
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, start); err != nil {
		return fmt.Errorf("secret: reading the initial environment: %w", err)
	}
	for off := 0; off < len(block); {
		n := bytes.IndexByte(block[off:], 0)
		if n < 0 {
			n = len(block) - off
		}
		name, _, _ := bytes.Cut(block[off:off+n], []byte("="))
		for _, want := range names {
			if string(name) == want {
				if _, err := mem.WriteAt(make([]byte, n), start+int64(off)); err != nil {
					return fmt.Errorf("secret: rewriting the initial environment: %w", err)
				}
			}
		}
		off += n + 1
	}
	return nil
}

// envBounds reads env_start and env_end (fields 50 and 51) of
// /proc/self/stat.
func envBounds() (start, end int64, err error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("secret: %w", err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])) // f[0] is field 3
	if len(f) < 49 {
		return 0, 0, errors.New("secret: /proc/self/stat has no environment bounds")
	}
	start, err1 := strconv.ParseInt(f[47], 10, 64)
	end, err2 := strconv.ParseInt(f[48], 10, 64)
	if err1 != nil || err2 != nil || start <= 0 || end < start {
		return 0, 0, fmt.Errorf("secret: bad environment bounds %q %q", f[47], f[48])
	}
	return start, end, nil
}
