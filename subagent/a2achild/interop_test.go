package a2achild_test

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/a2achild"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The provider passes the conformance suite against an agent written with
// another SDK: the A2A JavaScript SDK (pinned in tools/peers), serving
// v0.3 JSON-RPC through its compatibility layer.
func TestConformanceAgainstTheJavaScriptSDK(t *testing.T) {
	sdk := testpeers.Path(t, "node_modules/@a2a-js/sdk")
	cmd := exec.Command("node", "testdata/a2a-agent.mjs", sdk)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	var port string
	for port == "" && sc.Scan() {
		port, _ = strings.CutPrefix(sc.Text(), "listening ")
	}
	if port == "" {
		cmd.Wait()
		t.Fatalf("the JavaScript agent did not serve:\n%s", stderr.String())
	}
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			return newProvider(t, a2achild.Config{URL: "http://127.0.0.1:" + port}), subagenttest.ParentAgent(t)
		},
		Timeout: time.Minute,
	})
	p := newProvider(t, a2achild.Config{URL: "http://127.0.0.1:" + port})
	run, err := start(t, p, subagenttest.PromptComplete, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := subagenttest.Wait(t, run)
	subagenttest.Dispose(t, run)
	if res.StopReason != subagent.Completed || output(res) != "js done: "+subagenttest.PromptComplete {
		t.Errorf("result %+v: want the JavaScript agent's artifact", res)
	}
	if t.Failed() {
		t.Logf("agent's stderr:\n%s", stderr.String())
	}
}
