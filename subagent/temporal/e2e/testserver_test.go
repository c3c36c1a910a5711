package e2e

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The test server's own configurations (a SQLite file in WAL mode, or in
// memory; several history shards; visibility records written or not) serve
// a child through a real worker, and the server's directory is gone once it
// has exited.
func TestWALTestServer(t *testing.T) {
	t.Run("wal", func(t *testing.T) {
		testServerRunsAChild(t, true, "DSH_TESTSERVER_STORE=wal", "DSH_TESTSERVER_SHARDS=2", "DSH_TESTSERVER_CONNS=4")
	})
	t.Run("memory without visibility", func(t *testing.T) {
		testServerRunsAChild(t, false, "DSH_TESTSERVER_STORE=memory", "DSH_TESTSERVER_SHARDS=2", "DSH_TESTSERVER_VISIBILITY=off")
	})
}

func testServerRunsAChild(t *testing.T, file bool, env ...string) {
	tmp := t.TempDir()
	cmd := exec.Command(serverBin)
	cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var hp, ns string
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if _, serr := fmt.Sscan(line, &hp, &ns); err != nil || serr != nil {
		t.Fatalf("the test server said %q (%v %v); stderr:\n%s", line, err, serr, stderr.String())
	}
	if dbs, _ := filepath.Glob(filepath.Join(tmp, "*", "temporal.db")); len(dbs) != map[bool]int{true: 1}[file] {
		t.Fatalf("the server's SQLite files under $TMPDIR: %v (file mode %v)", dbs, file)
	}
	c, err := client.Dial(client.Options{HostPort: hp, Namespace: ns, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer c.Close()
		f := newFleet(t, echoReply)
		f.hostPort, f.namespace, f.cluster = hp, ns, c
		f.writeConfig()
		w := f.worker("wal", 4)
		parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
		p := f.provider(t, parent.Sessions)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := p.Start(ctx, subagent.StartRequest{Parent: parent.Agent, Prompt: subagenttest.Prompt("over WAL"), Depth: 1})
		if err != nil {
			t.Fatal(err)
		}
		res, err := run.Wait(ctx)
		if err != nil || res.StopReason != subagent.Completed || content.JoinText(res.Output) != "echo: over WAL" {
			t.Fatalf("the child: %+v, %v", res, err)
		}
		if err := run.Dispose(ctx); err != nil {
			t.Fatal(err)
		}
		if tasks, updates := costOn(t, c, run.ID()); tasks != 3 || updates != 1 {
			t.Errorf("the child cost %d workflow tasks and %d updates, want 3 and 1", tasks, updates)
		}
		// Visibility records: the closed child is listed, unless the
		// server writes none.
		want := map[bool]int64{true: 1}[file]
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: fmt.Sprintf("TaskQueue = '%s'", f.queue)})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetCount(); got == want || time.Now().After(deadline) {
				if got != want {
					t.Errorf("the cluster lists %d workflows, want %d", got, want)
				}
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		w.cmd.Process.Kill()
		<-w.done
	}()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the test server: %v\n%s", err, stderr.String())
	}
	exited = true
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the server left %v in $TMPDIR", left)
	}
}

// The test server names what is wrong with its environment and exits.
func TestTestServerBadEnvironment(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"DSH_TESTSERVER_STORE=postgres", `$DSH_TESTSERVER_STORE: "postgres" is neither memory nor wal`},
		{"DSH_TESTSERVER_SHARDS=0", `$DSH_TESTSERVER_SHARDS: "0" is no number from 1 to 1024`},
		{"DSH_TESTSERVER_CONNS=many", `$DSH_TESTSERVER_CONNS: "many" is no number from 1 to 1024`},
		{"DSH_TESTSERVER_VISIBILITY=maybe", `$DSH_TESTSERVER_VISIBILITY: "maybe" is neither on nor off`},
	} {
		tmp := t.TempDir()
		cmd := exec.Command(serverBin)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "DSH_TESTSERVER_STORE=wal", tc.env)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v, %q; want an exit saying %q", tc.env, err, out, tc.want)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("%s: the server left %v in $TMPDIR", tc.env, left)
		}
	}
}
