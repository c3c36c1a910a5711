package hook

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"
)

func TestExitStatus(t *testing.T) {
	exit3 := exec.Command("sh", "-c", "exit 3").Run()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{exit3, 3},
		{fmt.Errorf("wrapped: %w", exit3), 3},
		{errors.New("exit status 2"), 2},
		{errors.New("killed by signal KILL"), -1},
	} {
		if got := exitStatus(tc.err); got != tc.want {
			t.Errorf("exitStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
