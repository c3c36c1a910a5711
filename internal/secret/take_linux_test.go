//go:build linux

package secret

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		takeHelper()
		return
	}
	goleak.VerifyTestMain(m)
}

// helperEnv makes the test binary the helper of TestTakeHidesTheKey.
const helperEnv = "SECRET_TEST_HELPER"

// takeHelper is the test binary re-executed: it takes the key, reports
// what it sees, then waits to be read from outside and killed.
func takeHelper() {
	s, err := Take([]string{"DSH_TEST_KEY", "DSH_TEST_ABSENT"})
	dumpable, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	fmt.Printf("err=%v getenv=%q store=%q dumpable=%d names=%v\n", err, os.Getenv("DSH_TEST_KEY"), s.Getenv("DSH_TEST_KEY"),
		dumpable, s.Names())
	os.Stdout.Sync()
	time.Sleep(time.Minute) // a real process: the test reads it, then kills it
}

// The taken key leaves the environment — os.Environ and the block behind
// /proc/<pid>/environ — but stays readable through the Store, and the
// process becomes non-dumpable.
func TestTakeHidesTheKey(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1", "DSH_TEST_KEY="+sentinel, "OTHER=kept")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("err=<nil> getenv=\"\" store=%q dumpable=0 names=[DSH_TEST_KEY]\n", sentinel)
	if line != want {
		t.Fatalf("helper said %q, want %q", line, want)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Skipf("cannot read the helper's environ: %v", err) // only a privileged reader can, once it is non-dumpable
	}
	if bytes.Contains(environ, []byte(sentinel)) || bytes.Contains(environ, []byte("DSH_TEST_KEY")) {
		t.Fatalf("/proc/<pid>/environ still holds the key")
	}
	if !bytes.Contains(environ, []byte("OTHER=kept")) {
		t.Fatalf("/proc/<pid>/environ lost the other variables")
	}
}
