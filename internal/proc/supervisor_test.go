//go:build linux

package proc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/sandboxtest"
	"github.com/dsh-go/dsh/sandbox"
)

// Helper modes of this file, run by TestHelperProcess.
const (
	ownerPathEnv = "PROC_TEST_OWNED_PATH" // owner: the program of its child
	ownerModeEnv = "PROC_TEST_OWNED_MODE" // owner: the helper mode of its child
	nestedEnv    = "PROC_TEST_NESTED"     // nested: the file its child writes
)

// supervisorHelper runs the helper modes of this file.
func supervisorHelper(mode string) {
	switch mode {
	case "owner": // start a child the way dsh does, report its PIDs, then wait to be killed
		p, err := Start(Spec{Path: os.Getenv(ownerPathEnv), Args: []string{"-test.run=^TestHelperProcess$"}, Dir: "/",
			Env: []string{helperEnv + "=" + os.Getenv(ownerModeEnv), "GORACE=atexit_sleep_ms=0"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		line, _ := bufio.NewReader(p.Stdout()).ReadString('\n')
		fmt.Printf("child %d parent %d %s", p.PID(), parentOf(p.PID()), line)
		sleepForever()
	case "status": // the capability and privilege lines of /proc/self/status
		b, _ := os.ReadFile("/proc/self/status")
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "Cap") || strings.HasPrefix(line, "NoNewPrivs") {
				fmt.Println(line)
			}
		}
		os.Exit(0)
	case "nested": // under whatever sandbox this runs in, start a child with Full that writes a file
		p, err := Start(Spec{Path: "sh", Args: []string{"-c", `echo x > "$1" && echo wrote`, "sh", os.Getenv(nestedEnv)},
			Dir: "/", MergeStderr: true, Sandbox: sandbox.Policy{Mode: sandbox.Full}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		p.Stdin().Close()
		out := bufio.NewReader(p.Stdout())
		for line, err := out.ReadString('\n'); err == nil; line, err = out.ReadString('\n') {
			fmt.Print(line)
		}
		p.Stop(time.Second, time.Second)
		os.Exit(0)
	}
}

// parentOf is the parent PID of pid, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// When the owner dies, by any signal, SIGKILL included, its supervised or
// lifelined children die too, with their groups (and, supervised, with
// what left the group).
func TestOwnerDeathKillsItsChildren(t *testing.T) {
	for _, tc := range []struct{ launcher, child string }{
		{"supervised", "wrapper"}, {"supervised", "escape"}, {"lifeline", "wrapper"},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGHUP} {
			t.Run(fmt.Sprintf("%s/%s/%s", tc.launcher, tc.child, signalName(sig)), func(t *testing.T) {
				path := helperCopy
				if tc.launcher == "lifeline" {
					path = os.Args[0]
				}
				owner := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
				owner.Env = append(os.Environ(), helperEnv+"=owner", ownerPathEnv+"="+path, ownerModeEnv+"="+tc.child,
					"GORACE=atexit_sleep_ms=0")
				stdout, err := owner.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := owner.Start(); err != nil {
					t.Fatal(err)
				}
				defer owner.Wait()
				var child, parent, grandchild int
				line := readLine(t, bufio.NewReader(stdout))
				if _, err := fmt.Sscanf(line, "child %d parent %d grandchild %d", &child, &parent, &grandchild); err != nil {
					owner.Process.Kill()
					t.Fatalf("owner said %q: %v", line, err)
				}
				if want := tc.launcher == "supervised"; (parent != owner.Process.Pid) != want {
					t.Fatalf("the child's parent is %d, the owner %d: supervised = %v", parent, owner.Process.Pid, !want)
				}
				if err := owner.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				for _, pid := range []int{child, grandchild, parent} {
					if pid != owner.Process.Pid {
						waitGone(t, pid)
					}
				}
			})
		}
	}
}

// A supervisor killed behind our back leaves its child's group to us.
func TestSupervisorKilledLeavesTheGroupToTheOwner(t *testing.T) {
	p := launcher{"supervised", helperCopy}.start(t, "wrapper", nil)
	out := bufio.NewReader(p.Stdout())
	gc := grandchildPID(t, out, 2)
	sup := parentOf(p.PID())
	if sup == os.Getpid() || sup <= 1 {
		t.Fatalf("the child's parent is %d: not a supervisor", sup)
	}
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "the supervisor ended without reporting the exit status") {
		t.Fatalf("Err = %v", err)
	}
	drainBounded(t, out)
	assertGroupGone(t, p.PID())
	waitGone(t, gc)
}

// Every child runs with no_new_privs and without the capabilities that
// reach into other processes, whoever starts it.
func TestChildrenAreHardened(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "status", nil)
		lines := strings.Split(strings.TrimSpace(drainBounded(t, p.Stdout())), "\n")
		waitDone(t, p)
		status := map[string]uint64{}
		for _, line := range lines {
			name, value, _ := strings.Cut(line, ":")
			v, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
			if err != nil {
				t.Fatalf("status line %q", line)
			}
			status[name] = v
		}
		if status["NoNewPrivs"] != 1 {
			t.Errorf("NoNewPrivs = %d", status["NoNewPrivs"])
		}
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			v, ok := status[set]
			if !ok {
				t.Fatalf("no %s in %q", set, lines)
			}
			for _, c := range droppedCapabilities() {
				if set == "CapBnd" && os.Geteuid() != 0 {
					continue // an unprivileged owner cannot change the bounding set (and has no capability to regain)
				}
				if v&(1<<c) != 0 {
					t.Errorf("%s = %x still holds capability %d", set, v, c)
				}
			}
		}
		if os.Geteuid() == 0 && status["CapEff"]&1 == 0 { // CAP_CHOWN: a root child keeps what it needs
			t.Errorf("a root child lost CAP_CHOWN: CapEff = %x", status["CapEff"])
		}
	})
}

// shWrite runs sh writing each of files under policy, reporting
// "ok PATH" or "denied PATH" per file.
func shWrite(t *testing.T, dir string, policy sandbox.Policy, files ...string) []string {
	t.Helper()
	script := `for f; do if { echo x > "$f"; } 2>/dev/null; then echo "ok $f"; else echo "denied $f"; fi; done`
	p, err := Start(Spec{Path: "sh", Args: append([]string{"-c", script, "sh"}, files...), Dir: dir, Sandbox: policy})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(0, 0)
	out := strings.Fields(drainBounded(t, p.Stdout()))
	waitDone(t, p)
	var got []string
	for i := 0; i+1 < len(out); i += 2 {
		got = append(got, out[i]+" "+out[i+1])
	}
	return got
}

func TestSandboxIsEnforcedByTheKernel(t *testing.T) {
	sandboxtest.Require(t)
	for _, supervised := range []bool{true, false} {
		t.Run(fmt.Sprintf("supervised=%v", supervised), func(t *testing.T) {
			if !supervised {
				t.Setenv(SupervisorEnv, "")
			}
			cwd, tmp, out := t.TempDir(), t.TempDir(), sandboxtest.OutsideDir(t)
			in, inTmp, outside := filepath.Join(cwd, "f"), filepath.Join(tmp, "f"), filepath.Join(out, "f")
			for _, tc := range []struct {
				mode sandbox.Mode
				want []string
			}{
				{sandbox.WorkspaceWrite, []string{"ok " + in, "ok " + inTmp, "denied " + outside, "ok /dev/null"}},
				{sandbox.ReadOnly, []string{"denied " + in, "denied " + inTmp, "denied " + outside, "ok /dev/null"}},
				{sandbox.Full, []string{"ok " + in, "ok " + inTmp, "ok " + outside, "ok /dev/null"}},
			} {
				got := shWrite(t, cwd, sandbox.For(tc.mode, cwd), in, inTmp, outside, "/dev/null")
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s: %q, want %q", tc.mode, got, tc.want)
				}
				for _, f := range []string{in, inTmp, outside} {
					os.Remove(f)
				}
			}
		})
	}
}

// A child cannot widen its sandbox: what it starts with Full still runs
// in the kernel's read-only domain.
func TestSandboxCannotBeWidenedByAChild(t *testing.T) {
	sandboxtest.Require(t)
	cwd := t.TempDir()
	target := filepath.Join(cwd, "written")
	p := launcher{"supervised", helperCopy}.start(t, "nested", func(s *Spec) {
		s.Dir = cwd
		s.Env = append(s.Env, nestedEnv+"="+target)
		s.Sandbox = sandbox.For(sandbox.ReadOnly, cwd)
	})
	out := drainBounded(t, p.Stdout())
	waitDone(t, p)
	if strings.Contains(out, "wrote") {
		t.Fatalf("the nested child wrote under a read-only parent: %q", out)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the file exists")
	}
}

func TestBadSupervisors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("#!/bin/sh\necho '{not json' >&3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ supervisor, want string }{
		{"/bin/true", "supervisor did not answer"},
		{garbage, "bad message from the supervisor"},
		{filepath.Join(dir, "missing"), "supervisor"},
	} {
		t.Run(filepath.Base(tc.supervisor), func(t *testing.T) {
			t.Setenv(SupervisorEnv, tc.supervisor)
			before := children(t)
			p, err := Start(Spec{Path: "sleep", Args: []string{"100"}, Dir: dir})
			if err == nil {
				p.Stop(0, 0)
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if after := children(t); !slices.Equal(before, after) {
				t.Fatalf("children before %v, after %v", before, after)
			}
		})
	}
}

// BenchmarkStart is the cost of one child (/bin/true) from Start to Stop,
// directly and under a supervisor.
func BenchmarkStart(b *testing.B) {
	for _, supervised := range []bool{false, true} {
		b.Run(map[bool]string{false: "direct", true: "supervised"}[supervised], func(b *testing.B) {
			if !supervised {
				b.Setenv(SupervisorEnv, "")
			}
			for b.Loop() {
				p, err := Start(Spec{Path: "/bin/true", Dir: "/"})
				if err != nil {
					b.Fatal(err)
				}
				<-p.Done()
				if err := p.Stop(0, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
