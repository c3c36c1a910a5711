//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
)

// helperCopy is a copy of the test binary: a program other than the
// supervisor (this binary, once TestMain has called Main), so that Start
// supervises it.
var helperCopy string

func TestMain(m *testing.M) {
	Main()
	if os.Getenv(helperEnv) != "" { // a helper child: see TestHelperProcess
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "proc-test-")
	if err == nil {
		helperCopy = filepath.Join(dir, "helper")
		err = copyFile(os.Args[0], helperCopy)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// launcher is one way Start runs a child.
type launcher struct {
	name string
	path string // the helper program
}

// eachLauncher runs fn as a subtest per way of starting a child: under a
// supervisor, directly (no supervisor program), and directly with a
// lifeline (the child is the supervisor program itself).
func eachLauncher(t *testing.T, fn func(t *testing.T, l launcher)) {
	for _, l := range []launcher{{"supervised", helperCopy}, {"direct", os.Args[0]}, {"lifeline", os.Args[0]}} {
		t.Run(l.name, func(t *testing.T) {
			if l.name == "direct" {
				t.Setenv(SupervisorEnv, "")
			}
			fn(t, l)
		})
	}
}

// helperEnv selects the behaviour of the test binary re-executed as a child.
const helperEnv = "PROC_TEST_HELPER"

const (
	grace   = 200 * time.Millisecond
	tooLong = 20 * time.Second // only to fail instead of hanging
)

// TestHelperProcess is the child program. It does nothing in a normal run;
// as a child it never returns, so TestMain's leak check never runs there.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	switch mode {
	case "echo": // echo stdin lines, exit at EOF
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println(sc.Text())
		}
		os.Exit(0)
	case "sleep": // ignore EOF
		fmt.Println("ready")
		sleepForever()
	case "stubborn": // ignore SIGTERM and EOF
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		sleepForever()
	case "wrapper", "orphan", "escape":
		// Start a stubborn grandchild holding stdout and stderr, like a
		// Node launcher running the native binary; forward nothing.
		gc := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		gc.Env = append(os.Environ(), helperEnv+"=stubborn")
		gc.Stdout, gc.Stderr = os.Stdout, os.Stderr
		if mode == "escape" { // leaves the group
			gc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		}
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("grandchild %d\n", gc.Process.Pid)
		if mode == "orphan" {
			os.Exit(0)
		}
		sleepForever()
	case "stderr": // 1 MiB of two-byte runes on stderr, then exit 3
		w := bufio.NewWriter(os.Stderr)
		w.WriteString(strings.Repeat("é", (1<<20)/2-2))
		w.WriteString("END")
		w.Flush()
		os.Exit(3)
	case "env": // the environment as received (Main adds to os.Environ)
		b, err := os.ReadFile("/proc/self/environ")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, kv := range strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00") {
			fmt.Println(kv)
		}
		os.Exit(0)
	}
	supervisorHelper(mode) // exits when it knows mode
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	os.Exit(2)
}

// sleepForever is a helper child's body that only a signal ends (select{}
// would be a deadlock once nothing else runs).
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// start runs the test binary as a child in the given mode.
func (l launcher) start(t *testing.T, mode string, mod func(*Spec)) *Process {
	t.Helper()
	spec := Spec{
		Path: l.path,
		Args: []string{"-test.run=^TestHelperProcess$"},
		Dir:  t.TempDir(),
		// The race runtime sleeps a second before exiting unless told not to.
		Env: []string{helperEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"},
	}
	if mod != nil {
		mod(&spec)
	}
	p, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stopBounded(t, p, 0, 0); err != nil {
			t.Errorf("cleanup Stop: %v", err)
		}
		drainBounded(t, p.Stdout())
	})
	return p
}

// stopBounded calls Stop, failing the test if it does not return in time.
func stopBounded(t *testing.T, p *Process, eof, term time.Duration) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.Stop(eof, term) }()
	select {
	case err := <-errc:
		return err
	case <-time.After(tooLong):
		t.Fatalf("Stop(%v, %v) hangs", eof, term)
		return nil
	}
}

// drainBounded reads r to the end, failing the test if it hangs.
func drainBounded(t *testing.T, r io.Reader) string {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	c := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		c <- result{b, err}
	}()
	select {
	case res := <-c:
		if res.err != nil {
			t.Errorf("reading stdout: %v", res.err)
		}
		return string(res.b)
	case <-time.After(tooLong):
		t.Fatal("reading stdout hangs")
		return ""
	}
}

// readLine reads one line, failing the test if it does not come in time.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	c := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		c <- s
	}()
	select {
	case s := <-c:
		return strings.TrimSuffix(s, "\n")
	case <-time.After(tooLong):
		t.Fatal("no line on stdout")
		return ""
	}
}

func waitDone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(tooLong):
		t.Fatal("the child does not exit")
	}
}

// signalOf is the signal that killed the child, or 0.
func signalOf(err error) syscall.Signal {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Signal
	}
	return 0
}

// liveMembers lists the processes of group pgid that are not zombies (PID 1
// here does not reap orphaned zombies).
func liveMembers(t *testing.T, pgid int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		s := string(b)
		// pid (comm) state ppid pgrp ...; comm may hold anything.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" || f[0] == "X" {
			continue
		}
		live = append(live, e.Name()+" "+f[0])
	}
	return live
}

// assertGroupGone waits (bounded) for the SIGKILLed members of group pgid to
// finish dying; none may stay alive.
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(tooLong)
	for {
		live := liveMembers(t, pgid)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d survives: %v", pgid, live)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone waits (bounded) for pid to be gone or a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(tooLong); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d survives", pid)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestEchoRoundTrip(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "echo", nil)
		if p.PID() <= 0 {
			t.Fatalf("PID = %d", p.PID())
		}
		if pgid, err := syscall.Getpgid(p.PID()); err != nil || pgid != p.PID() {
			t.Fatalf("child's process group = %d, %v; want its own (%d)", pgid, err, p.PID())
		}
		out := bufio.NewReader(p.Stdout())
		for _, line := range []string{"hello", "wörld"} {
			if _, err := io.WriteString(p.Stdin(), line+"\n"); err != nil {
				t.Fatal(err)
			}
			if got := readLine(t, out); got != line {
				t.Fatalf("echo = %q, want %q", got, line)
			}
		}
		select {
		case <-p.Done():
			t.Fatal("Done closed while the child runs")
		default:
		}
		if err := p.Err(); err != nil {
			t.Fatalf("Err while running = %v", err)
		}
		if d := p.Diagnostic(); d != "running" {
			t.Fatalf("Diagnostic while running = %q", d)
		}
		if err := p.Stdin().Close(); err != nil {
			t.Fatal(err)
		}
		if rest := drainBounded(t, out); rest != "" {
			t.Fatalf("after EOF stdout = %q", rest)
		}
		waitDone(t, p)
		if err := p.Err(); err != nil {
			t.Fatalf("Err = %v", err)
		}
		if d := p.Diagnostic(); d != "exit status 0" {
			t.Fatalf("Diagnostic = %q", d)
		}
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(p.Stdin(), "late\n"); err == nil {
			t.Fatal("writing to a stopped child's stdin succeeded")
		}
	})
}

func TestStderrTailAndDiagnostic(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		var copied atomic.Int64
		p := l.start(t, "stderr", func(s *Spec) {
			s.Stderr = writerFunc(func(b []byte) (int, error) { copied.Add(int64(len(b))); return len(b), nil })
		})
		waitDone(t, p)
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
		var ee *ExitError
		if !errors.As(p.Err(), &ee) || ee.Code != 3 {
			t.Fatalf("Err = %v, want exit status 3", p.Err())
		}
		if n := copied.Load(); n != 1<<20-1 {
			t.Fatalf("Spec.Stderr got %d bytes, want %d", n, 1<<20-1)
		}
		tail := p.StderrTail()
		// 1 MiB - 1 bytes: the last 4096 begin inside a rune.
		if len(tail) > defaultStderrTail || len(tail) < defaultStderrTail-utf8.UTFMax || !utf8.ValidString(tail) ||
			!strings.HasSuffix(tail, "éEND") || strings.Trim(strings.TrimSuffix(tail, "END"), "é") != "" {
			t.Fatalf("StderrTail: %d bytes, valid %v, ends %q", len(tail), utf8.ValidString(tail), tail[max(0, len(tail)-10):])
		}
		d := p.Diagnostic()
		if len(d) > maxDiagnostic || !utf8.ValidString(d) ||
			!strings.HasPrefix(d, "exit status 3; stderr: …[truncated]é") || !strings.HasSuffix(d, "éEND") {
			t.Fatalf("Diagnostic (%d bytes) = %.60q…", len(d), d)
		}
	})
}

// TestDiagnosticHasTheLastWordsOfAnExitedChild: a child that has just been
// reaped may have stderr still in the pipe; its diagnostic waits for it.
func TestDiagnosticHasTheLastWordsOfAnExitedChild(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "stderr", func(s *Spec) {
			// A slow copy keeps the drain behind the child's exit.
			s.Stderr = writerFunc(func(b []byte) (int, error) { time.Sleep(30 * time.Millisecond); return len(b), nil })
		})
		waitDone(t, p)
		if d := p.Diagnostic(); !strings.HasPrefix(d, "exit status 3") || !strings.HasSuffix(d, "éEND") {
			t.Fatalf("Diagnostic (%d bytes) ends %q", len(d), d[max(0, len(d)-20):])
		}
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
	})
}

func TestStderrTailSmall(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "stderr", func(s *Spec) { s.StderrTail = 6 })
		waitDone(t, p)
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
		// The last 6 bytes are half an é, é, END.
		if got := p.StderrTail(); got != "éEND" {
			t.Fatalf("StderrTail = %q", got)
		}
		if got := p.Diagnostic(); got != "exit status 3; stderr: …[truncated]éEND" {
			t.Fatalf("Diagnostic = %q", got)
		}
	})
}

func TestRing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		writes []string
		want   string
		cut    bool
	}{
		{"empty", 8, nil, "", false},
		{"fits", 8, []string{"ab", "cd"}, "abcd", false},
		{"exact", 4, []string{"ab", "cd"}, "abcd", false},
		{"wraps", 4, []string{"abc", "def"}, "cdef", true},
		{"wraps many", 4, []string{"a", "b", "c", "d", "e", "f", "g"}, "defg", true},
		{"big write", 4, []string{"ab", "0123456789"}, "6789", true},
		{"front rune cut", 4, []string{"xéé"}, "éé", true},
		{"front rune cut 2", 3, []string{"xéé"}, "é", true},
		{"three-byte runes", 5, []string{"€€€"}, "€", true},
		{"incomplete newest rune", 8, []string{"ab\xe2\x82"}, "ab", false},
		{"completed later", 8, []string{"ab\xe2\x82", "\xac"}, "ab€", false},
		{"invalid inside", 8, []string{"a\xffb"}, "a\uFFFDb", false},
		{"replacement grows", 3, []string{"\xff\xfe\xfd"}, "\uFFFD", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(tc.size)
			for _, w := range tc.writes {
				r.Write([]byte(w))
			}
			got, cut := r.text()
			if got != tc.want || cut != tc.cut {
				t.Fatalf("text() = %q, %v; want %q, %v", got, cut, tc.want, tc.cut)
			}
			if len(got) > tc.size || !utf8.ValidString(got) {
				t.Fatalf("text() = %q breaks the bound or UTF-8", got)
			}
		})
	}
}

func TestDiagnosticFormat(t *testing.T) {
	if got := diagnostic("exit status 1", "  boom\n", false); got != "exit status 1; stderr: boom" {
		t.Fatalf("got %q", got)
	}
	if got := diagnostic("killed by signal KILL", "\n", false); got != "killed by signal KILL" {
		t.Fatalf("got %q", got)
	}
	long := strings.Repeat("€", 3000) // 9000 bytes
	got := diagnostic("exit status 2", long, false)
	if len(got) > maxDiagnostic || !utf8.ValidString(got) || !strings.HasPrefix(got, "exit status 2; stderr: …[truncated]€") || !strings.HasSuffix(got, "€") {
		t.Fatalf("long: %d bytes, %.50q", len(got), got)
	}
	got = diagnostic(strings.Repeat("é", 5000), "x", false)
	if len(got) > maxDiagnostic || !utf8.ValidString(got) || !strings.HasSuffix(got, "…[truncated]; stderr: x") {
		t.Fatalf("long status: %d bytes", len(got))
	}
}

func TestStopHonouredEOF(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "echo", nil)
		begin := time.Now()
		// An EOF-honouring child exits long before the EOF grace would pass.
		if err := stopBounded(t, p, tooLong/2, tooLong/2); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took >= tooLong/2 {
			t.Fatalf("Stop took %v: the child was signalled", took)
		}
		if err := p.Err(); err != nil {
			t.Fatalf("Err = %v, want a clean exit", err)
		}
		drainBounded(t, p.Stdout())
	})
}

func TestStopTerminatesEOFIgnorer(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "sleep", nil)
		out := bufio.NewReader(p.Stdout())
		readLine(t, out)
		if err := stopBounded(t, p, grace, tooLong/2); err != nil {
			t.Fatal(err)
		}
		if sig := signalOf(p.Err()); sig != syscall.SIGTERM {
			t.Fatalf("Err = %v, want killed by SIGTERM", p.Err())
		}
		if d := p.Diagnostic(); d != "killed by signal TERM" {
			t.Fatalf("Diagnostic = %q", d)
		}
		drainBounded(t, out)
	})
}

func TestStopKillsTermIgnorer(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "stubborn", nil)
		out := bufio.NewReader(p.Stdout())
		readLine(t, out) // SIGTERM is ignored from now on
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
		if sig := signalOf(p.Err()); sig != syscall.SIGKILL {
			t.Fatalf("Err = %v, want killed by SIGKILL", p.Err())
		}
		if d := p.Diagnostic(); d != "killed by signal KILL" {
			t.Fatalf("Diagnostic = %q", d)
		}
		drainBounded(t, out)
	})
}

// grandchildPID reads the two first lines of a wrapper (its grandchild's PID
// and the grandchild's "ready", in either order) and returns the PID.
func grandchildPID(t *testing.T, out *bufio.Reader, lines int) int {
	t.Helper()
	pid := 0
	for range lines {
		line := readLine(t, out)
		if s, ok := strings.CutPrefix(line, "grandchild "); ok {
			pid, _ = strconv.Atoi(s)
		}
	}
	if pid <= 0 {
		t.Fatal("the wrapper did not report its grandchild")
	}
	return pid
}

func TestStopKillsWrapperAndGrandchild(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "wrapper", nil)
		out := bufio.NewReader(p.Stdout())
		gc := grandchildPID(t, out, 2)
		if pgid, _ := syscall.Getpgid(gc); pgid != p.PID() {
			t.Fatalf("grandchild in group %d, want %d", pgid, p.PID())
		}
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
		// The wrapper dies of SIGTERM; the grandchild ignored it and is killed
		// once the wrapper has gone.
		if sig := signalOf(p.Err()); sig != syscall.SIGTERM {
			t.Fatalf("wrapper Err = %v, want killed by SIGTERM", p.Err())
		}
		if rest := drainBounded(t, out); rest != "" {
			t.Fatalf("stdout after Stop = %q", rest)
		}
		assertGroupGone(t, p.PID())
		if alive(gc) {
			t.Fatalf("grandchild %d survives", gc)
		}
	})
}

func TestExitedLeaderTakesGroupAlong(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "orphan", nil)
		out := bufio.NewReader(p.Stdout())
		gc := grandchildPID(t, out, 2)
		waitDone(t, p)
		if err := p.Err(); err != nil {
			t.Fatalf("Err = %v", err)
		}
		// The leader exited on its own; its stubborn grandchild must not keep
		// the pipe (and itself) alive, with or without Stop.
		if rest := drainBounded(t, out); rest != "" {
			t.Fatalf("stdout = %q", rest)
		}
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
		assertGroupGone(t, p.PID())
		if alive(gc) {
			t.Fatalf("grandchild %d survives", gc)
		}
	})
}

func TestStopBoundedWithEscapedGrandchild(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "escape", nil)
		p.strayGrace = grace
		out := bufio.NewReader(p.Stdout())
		gc := grandchildPID(t, out, 2)
		t.Cleanup(func() { syscall.Kill(gc, syscall.SIGKILL) })
		// The grandchild left the group, so nothing kills it and it keeps
		// stdout and stderr open: Stop must still return and stdout must end.
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatal(err)
		}
		drainBounded(t, out)
		select {
		case <-p.drained:
		default:
			t.Fatal("the stderr drain outlives Stop")
		}
		// A supervisor is the subreaper of what leaves the group and kills
		// it too; without one it survives (and is killed by the test).
		if l.name == "supervised" {
			waitGone(t, gc)
		} else if !alive(gc) {
			t.Fatal("the escaped grandchild is expected to survive (it is killed by the test)")
		}
	})
}

func TestStopIdempotentAndConcurrent(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		p := l.start(t, "stubborn", nil)
		out := bufio.NewReader(p.Stdout())
		readLine(t, out)
		reader := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(out)
			reader <- string(b)
		}()
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = p.Stop(grace, grace) })
		}
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(tooLong):
			t.Fatal("concurrent Stops hang")
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("Stop %d: %v", i, err)
			}
		}
		select {
		case <-p.Done():
		default:
			t.Fatal("Stop returned before the reap")
		}
		if err := stopBounded(t, p, grace, grace); err != nil {
			t.Fatalf("Stop again: %v", err)
		}
		if sig := signalOf(p.Err()); sig != syscall.SIGKILL {
			t.Fatalf("Err = %v", p.Err())
		}
		select {
		case <-reader:
		case <-time.After(tooLong):
			t.Fatal("stdout reader hangs")
		}
	})
}

func TestScrubEnv(t *testing.T) {
	env := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"PWD=/work/ghp_0123456789abcdefABCDEF0123456789abcd", // a path, however it looks
		"LANG=C.UTF-8",
		"FOO_API_KEY=k1",
		"GITHUB_TOKEN=t",
		"DSH_HOME=/dsh",
		"my_password=p",
		"AWS_SECRET_ACCESS_KEY=s",
		"GOOGLE_APPLICATION_CREDENTIALS=/c.json",
		"HTTP_PROXY=http://p",
		"https_proxy=http://p",
		"ALL_PROXY=socks5://p",
		"no_proxy=localhost",
		"DEEPSEEK_API_KEY=d",
		"OTEL_EXPORTER_OTLP_HEADERS=x-honeycomb-team=h",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS=x=h",
		"OTEL_EXPORTER_OTLP_ENDPOINT=https://otel.example",
		"GH_PAT=p",
		"NPM_AUTH=a",
		"DATABASE_URL=postgres://app:pw@db/x",
		"REPO=https://x:ghp_0123456789abcdefABCDEF0123456789abcd@github.com/o/r",
		"SOME_VALUE=ghp_0123456789abcdefABCDEF0123456789abcd",
		"GIT_URL=ssh://git@github.com/o/r",
		"malformed",
		"=nameless",
		"EMPTY=",
	}
	tests := []struct {
		name string
		pass []string
		want []string
	}{
		{"default", nil, []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "PWD=/work/ghp_0123456789abcdefABCDEF0123456789abcd", "LANG=C.UTF-8",
			"OTEL_EXPORTER_OTLP_ENDPOINT=https://otel.example", "GIT_URL=ssh://git@github.com/o/r", "EMPTY="}},
		{"pass", []string{"DEEPSEEK_API_KEY", "DSH_HOME", "HTTP_PROXY", "github_token", "DATABASE_URL"}, []string{
			"PATH=/usr/bin:/bin", "HOME=/home/u", "PWD=/work/ghp_0123456789abcdefABCDEF0123456789abcd", "LANG=C.UTF-8", "DSH_HOME=/dsh", "DEEPSEEK_API_KEY=d",
			"OTEL_EXPORTER_OTLP_ENDPOINT=https://otel.example", "DATABASE_URL=postgres://app:pw@db/x",
			"GIT_URL=ssh://git@github.com/o/r", "EMPTY="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ScrubEnv(env, tc.pass); !slices.Equal(got, tc.want) {
				t.Fatalf("ScrubEnv = %q\nwant %q", got, tc.want)
			}
		})
	}
	if got := ScrubEnv(nil, nil); got == nil || len(got) != 0 {
		t.Fatalf("ScrubEnv(nil) = %#v", got)
	}
}

func TestChildSeesScrubbedEnv(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		base := []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "FOO_API_KEY=k", "GITHUB_TOKEN=t", "DSH_HOME=/dsh",
			"my_password=p", "HTTPS_PROXY=http://p", "http_proxy=http://p", "DEEPSEEK_API_KEY=d", "LANG=C"}
		p := l.start(t, "env", func(s *Spec) {
			s.BaseEnv = base
			s.PassEnv = []string{"DEEPSEEK_API_KEY"}
			s.Env = append(s.Env, "HOME=/override", "ANTHROPIC_API_KEY=fake", "HTTP_PROXY=http://explicit")
		})
		got := strings.Fields(drainBounded(t, p.Stdout()))
		waitDone(t, p)
		want := []string{"PATH=/usr/bin:/bin", "DEEPSEEK_API_KEY=d", "LANG=C", helperEnv + "=env", "GORACE=atexit_sleep_ms=0",
			"HOME=/override", "ANTHROPIC_API_KEY=fake", "HTTP_PROXY=http://explicit"}
		if l.name == "lifeline" { // the lifeline's descriptor, which Main in the child reads
			want = append(want, lifelineEnv+"=3")
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("child env = %q\nwant %q", got, want)
		}
	})
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self := os.Args[0]
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"empty path", Spec{Dir: dir}, "empty Path"},
		{"missing binary", Spec{Path: "dsh-no-such-program", Dir: dir}, `"dsh-no-such-program" not found in PATH`},
		{"missing absolute binary", Spec{Path: "/nonexistent/prog", Dir: dir}, "/nonexistent/prog: file does not exist"},
		{"not executable", Spec{Path: file, Dir: dir}, "not executable"},
		{"directory as program", Spec{Path: dir, Dir: dir}, "is a directory"},
		{"empty dir", Spec{Path: self}, "empty Dir"},
		{"relative dir", Spec{Path: self, Dir: "rel/dir"}, `"rel/dir" is not an absolute path`},
		{"missing dir", Spec{Path: self, Dir: filepath.Join(dir, "nope")}, "does not exist"},
		{"file as dir", Spec{Path: self, Dir: file}, "is not a directory"},
		{"bad env", Spec{Path: self, Dir: dir, Env: []string{"NOEQUALS"}}, "not NAME=value"},
	}
	before, fds := children(t), openFDs(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(tc.spec)
			if err == nil {
				p.Stop(0, 0)
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	if after := children(t); !slices.Equal(before, after) {
		t.Fatalf("children before %v, after %v", before, after)
	}
	if after := openFDs(t); after != fds {
		t.Fatalf("open descriptors: %d before, %d after", fds, after)
	}
}

func TestPathLookupUsesChildPath(t *testing.T) {
	eachLauncher(t, func(t *testing.T, l launcher) {
		dir := t.TempDir()
		bin := filepath.Join(dir, "bin")
		if err := os.Mkdir(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(l.path, filepath.Join(bin, "helper-prog")); err != nil {
			t.Fatal(err)
		}
		p := l.start(t, "echo", func(s *Spec) {
			s.Path = "helper-prog"
			s.Env = append(s.Env, "PATH="+bin)
		})
		if err := stopBounded(t, p, tooLong/2, grace); err != nil {
			t.Fatal(err)
		}
		if err := p.Err(); err != nil {
			t.Fatalf("Err = %v", err)
		}
		// A relative path with a slash is relative to Dir.
		p = l.start(t, "echo", func(s *Spec) {
			s.Path = "./bin/helper-prog"
			s.Dir = dir
		})
		if err := stopBounded(t, p, tooLong/2, grace); err != nil {
			t.Fatal(err)
		}
		if err := p.Err(); err != nil {
			t.Fatalf("Err = %v", err)
		}
	})
}

// children lists the PIDs whose parent is this process.
func children(t *testing.T) []string {
	t.Helper()
	var out []string
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == self {
			out = append(out, e.Name())
		}
	}
	return out
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
