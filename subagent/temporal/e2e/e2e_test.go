// Package e2e tests the temporal provider against a real Temporal server
// (testserver, a separate process) and real `dsh worker` processes. It is a
// module of its own so that the server's dependencies never enter dsh's;
// .ci/run builds the server and runs these tests as their own step.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/temporal"
)

// ServerEnv names a prebuilt testserver binary (default: TestMain builds
// one, which takes minutes on a cold build cache).
const ServerEnv = "DSH_TEMPORAL_TESTSERVER"

var (
	dshBin    string        // the dsh command, built once
	serverBin string        // the testserver command
	hostPort  string        // the test server's frontend
	namespace string        // its namespace
	cluster   client.Client // the tests' client of it
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "dsh-temporal-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// dsh is built in its own module (three levels up), with its own go.sum.
	dshBin = filepath.Join(dir, "dsh")
	build := exec.Command("go", "build", "-tags", "temporal", "-o", dshBin, "./cmd/dsh")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build dsh: %v\n%s", err, out)
	}
	serverBin = os.Getenv(ServerEnv)
	if serverBin == "" {
		serverBin = filepath.Join(dir, "testserver")
		if out, err := exec.Command("go", "build", "-o", serverBin, "./testserver").CombinedOutput(); err != nil {
			return 0, fmt.Errorf("build the test server: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(serverBin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if _, serr := fmt.Sscan(line, &hostPort, &namespace); err != nil || serr != nil {
		return 0, fmt.Errorf("the test server said %q: %v %v", line, err, serr)
	}
	cluster, err = client.Dial(client.Options{HostPort: hostPort, Namespace: namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return 0, err
	}
	defer cluster.Close()
	baseline := goleak.IgnoreCurrent() // the client's connection
	code := m.Run()
	if code != 0 {
		return code, nil
	}
	if err := goleak.Find(baseline); err != nil {
		return 1, fmt.Errorf("goleak: %w", err)
	}
	// Every worker is gone; only the server is left, until its stdin closes.
	if left := proc.Children(os.Getpid()); len(left) != 1 {
		return 1, fmt.Errorf("child processes left: %v", left)
	}
	return 0, nil
}

// fleet is a task queue of its own, the loopback model its workers use,
// and the workers.
type fleet struct {
	t      *testing.T
	queue  string
	home   string // the workers' DSH_HOME
	work   string // their workspace
	config string // their dsh.yaml
	model  *httptest.Server
	// spawnTool gives the workers' children a subagent tool on spawn.
	spawnTool bool
	env       []string // more of the workers' environment
	// The cluster the fleet runs on: the shared test server unless a test
	// sets them (then it calls writeConfig) before starting workers.
	hostPort, namespace string
	cluster             client.Client
}

// newFleet makes a fleet whose model answers with reply. Workers are
// started with worker.
func newFleet(t *testing.T, reply func(llmtest.Request) llmtest.Reply) *fleet {
	t.Helper()
	f := &fleet{t: t, queue: "dsh-e2e-" + strings.ReplaceAll(t.Name(), "/", "-"), home: t.TempDir(), work: t.TempDir(),
		hostPort: hostPort, namespace: namespace, cluster: cluster}
	f.model = llmtest.Start(reply)
	f.model.Config.SetKeepAlivesEnabled(false) // no connection goroutine outlives a request
	t.Cleanup(f.model.Close)
	f.config = filepath.Join(f.home, "dsh.yaml")
	f.writeConfig()
	return f
}

// writeConfig writes the workers' dsh.yaml.
func (f *fleet) writeConfig() {
	if err := os.WriteFile(f.config, []byte(f.yaml()), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// yaml is the workers' configuration: the loopback model as the DeepSeek
// route, and a temporal provider naming the fleet's cluster and queue.
func (f *fleet) yaml() string {
	y := fmt.Sprintf(`models:
  - {name: deepseek, baseURL: %s, apiKeyEnv: DEEPSEEK_API_KEY}
subagents:
  providers:
    - name: fleet
      kind: temporal
      temporal: {hostPort: "%s", namespace: %s, taskQueue: %s, heartbeatTimeout: 2s, heartbeatInterval: 200ms}
`, f.model.URL, f.hostPort, f.namespace, f.queue)
	if f.spawnTool {
		y += "    - {name: spawn, kind: spawn}\n"
	}
	y += "  tools:\n    - {provider: fleet, toolName: subagent_fleet}\n"
	if f.spawnTool {
		y += "    - {provider: spawn}\n"
	}
	return y
}

// provider returns a provider on the fleet's queue, keeping child logs in
// store.
func (f *fleet) provider(t *testing.T, store *session.Store) *temporal.Provider {
	t.Helper()
	p, err := temporal.New(temporal.Config{Name: "fleet", Client: f.cluster, TaskQueue: f.queue, Sessions: store,
		HeartbeatTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxResumes: 3,
		ChildTimeouts: subagent.ChildTimeouts{ReadyTimeout: 30 * time.Second, CancelGrace: 3 * time.Second},
		Log:           slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// worker is one `dsh worker` process.
type worker struct {
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// worker starts a `dsh worker` on the fleet's queue and returns once the
// cluster has seen it poll.
func (f *fleet) worker(name string, concurrency int) *worker {
	t := f.t
	t.Helper()
	w := &worker{name: name, stderr: &syncBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(dshBin, "worker", "--identity", name, "--concurrency", fmt.Sprint(concurrency), "--workspace", f.work)
	w.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.home, "DSH_HOME=" + f.home, "DSH_CONFIG=" + f.config,
		"DEEPSEEK_API_KEY=sk-loopback"}
	w.cmd.Env = append(w.cmd.Env, f.env...)
	w.cmd.Stderr = w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.cmd.Process.Signal(syscall.SIGCONT)
		w.cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("worker %s said:\n%s", name, w.stderr.String())
		}
	})
	f.awaitPoller(name, true)
	return w
}

// awaitPoller waits until the cluster lists (or, with present false, no
// longer lists as recent) a poller named identity on the fleet's queue.
func (f *fleet) awaitPoller(identity string, present bool) {
	t := f.t
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		found := false
		for _, typ := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			resp, err := f.cluster.DescribeTaskQueue(context.Background(), f.queue, typ)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range resp.GetPollers() {
				found = found || p.GetIdentity() == identity
			}
		}
		if found == present {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s: poller present %v after a minute", identity, found)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends sig to the worker.
func (w *worker) kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the worker to exit and returns its error.
func (w *worker) wait() error {
	<-w.done
	return w.err
}

// status returns the status of the child's workflow.
func status(t *testing.T, childID string) enumspb.WorkflowExecutionStatus {
	t.Helper()
	resp, err := cluster.DescribeWorkflowExecution(context.Background(), temporal.WorkflowID(childID), "")
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetWorkflowExecutionInfo().GetStatus()
}

// openChildren returns the running workflows of the fleet's queue, as the
// cluster's visibility store lists them (eventually consistent: callers
// wait for the count they expect).
func (f *fleet) openChildren(t *testing.T) int {
	t.Helper()
	resp, err := cluster.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Query: fmt.Sprintf(
		"TaskQueue = '%s' AND ExecutionStatus = 'Running'", f.queue)})
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.GetCount())
}

// awaitOpen waits until the cluster's visibility store counts n running
// children on the fleet's queue.
func (f *fleet) awaitOpen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for got := f.openChildren(t); got != n; got = f.openChildren(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d children running on the cluster after a minute, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// history describes the child's workflow history, for failure messages:
// each event's type, with the failure or timeout of the activity events.
func history(childID string) string {
	var b strings.Builder
	it := cluster.GetWorkflowHistory(context.Background(), temporal.WorkflowID(childID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			fmt.Fprintf(&b, "  (%v)\n", err)
			break
		}
		fmt.Fprintf(&b, "  %d %s", e.GetEventId(), e.GetEventType())
		if a := e.GetActivityTaskFailedEventAttributes(); a != nil {
			fmt.Fprintf(&b, ": %s", a.GetFailure().GetMessage())
		}
		if a := e.GetActivityTaskTimedOutEventAttributes(); a != nil {
			fmt.Fprintf(&b, ": %s", a.GetFailure().GetMessage())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// cost returns how many workflow tasks the child's workflow completed and
// how many updates it accepted.
func cost(t *testing.T, childID string) (tasks, updates int) {
	t.Helper()
	return costOn(t, cluster, childID)
}

// costOn is cost on the cluster c.
func costOn(t *testing.T, c client.Client, childID string) (tasks, updates int) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), temporal.WorkflowID(childID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			tasks++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			updates++
		}
	}
	return tasks, updates
}

// syncBuffer is a bytes.Buffer safe for a process's output and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
