//go:build !linux && !darwin

package proc

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// Main does nothing here: there are no supervisors.
func Main() {}

func startGroup(command) (int, group, error) { return 0, nil, ErrUnsupported }

func waitHangup(*os.File, time.Duration) bool { return true }

func signalName(sig syscall.Signal) string { return fmt.Sprintf("%d", int(sig)) }
