package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// backgroundCall is a call of a subagent tool that starts a child with
// prompt in the background.
func backgroundCall(tool, prompt string) llmtest.ToolCall {
	return llmtest.ToolCall{Name: tool, Arguments: fmt.Sprintf(`{"description":%q,"prompt":%q,"run_in_background":true}`, prompt, prompt)}
}

// calls is a reply making n calls of call.
func calls(n int, call llmtest.ToolCall) llmtest.Reply {
	cs := make([]llmtest.ToolCall, n)
	for i := range cs {
		cs[i] = call
	}
	return llmtest.Reply{ToolCall: &cs[0], ToolCalls: cs[1:]}
}

// refusedIn counts the LIMIT_REACHED refusals among a request's tool
// results.
func refusedIn(r llmtest.Request, maxLive int) int {
	n := 0
	for _, res := range r.ToolResults {
		if strings.Contains(res, fmt.Sprintf("the delegation tree already has %d live children", maxLive)) {
			n++
		}
	}
	return n
}

// treeConfig is the N8 tree: spawn children as tool "subagent", `command:
// self` children as "subagent_isolated", bash allowed, and maxLive.
func treeConfig(maxLive int) string {
	return fmt.Sprintf(`permissions: {tools: {bash: allow}}
subagents:
  maxLiveChildren: %d
  providers:
    - name: spawn
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - provider: spawn
    - {provider: isolated, toolName: subagent_isolated, subagentTypes: false}
`, maxLive)
}

// runTree runs `dsh run prompt` under treeConfig(maxLive) against srv,
// calling watch with dsh's PID every 50 ms until it ends, and fails t
// unless it ends well within two minutes.
func runTree(t *testing.T, srv *httptest.Server, maxLive int, prompt string, watch func(root int)) {
	t.Helper()
	home, cwd := t.TempDir(), t.TempDir()
	config := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(config, []byte(treeConfig(maxLive)), 0o644); err != nil {
		t.Fatal(err)
	}
	dsh := exec.Command(dshBinary, "run", "--cwd", cwd, prompt)
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + config,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var stderr strings.Builder
	dsh.Stderr = &stderr
	if err := dsh.Start(); err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	go func() { finished <- dsh.Wait() }()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case err := <-finished:
			if err != nil {
				t.Fatalf("dsh run: %v; it said: %s", err, stderr.String())
			}
			return
		case <-time.After(50 * time.Millisecond):
			watch(dsh.Process.Pid)
		case <-deadline:
			dsh.Process.Kill()
			t.Fatalf("dsh did not finish; it said: %s", stderr.String())
		}
	}
}

// treeProcesses lists the descendants of root whose command line, its
// arguments joined by spaces, ends with suffix.
func treeProcesses(root int, suffix string) []int {
	var out []int
	for _, pid := range descendants(root) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.HasSuffix(strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "), suffix) {
			out = append(out, pid)
		}
	}
	return out
}

// leafSleep is the command each leaf of the fan-out runs; its odd length
// marks its processes.
const leafSleep = "sleep 5.0417"

// The live-children cap holds across processes (hostile N8): with
// subagents.maxLiveChildren 10, the root starts four `command: self`
// children in the background and each of them ten background children
// that sleep. The self children ask the root for each place, so no more
// than 10 - 4 leaves ever sleep at once, and the rest are refused with
// LIMIT_REACHED, as the model sees it in one process.
func TestHostileLiveChildrenCapAcrossSelfChildren(t *testing.T) {
	var (
		mu      sync.Mutex
		limited = map[string]int{} // refused starts per self child
		started atomic.Int32
	)
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ToolResults) > 0 {
			if n := refusedIn(r, 10); strings.HasPrefix(r.LastUser, "self ") {
				mu.Lock()
				limited[r.LastUser] = max(limited[r.LastUser], n)
				mu.Unlock()
			}
			switch {
			case r.LastUser == "fan out": // the root waits while its tree sleeps
				return llmtest.Reply{Text: "done", Delay: 9 * time.Second}
			case strings.HasPrefix(r.LastUser, "self "):
				return llmtest.Reply{Text: "done", Delay: 8 * time.Second}
			}
			return llmtest.Reply{Text: "slept"}
		}
		var calls []llmtest.ToolCall
		switch {
		case r.LastUser == "fan out":
			for i := range 4 {
				calls = append(calls, backgroundCall("subagent_isolated", fmt.Sprintf("self %d", i)))
			}
		case strings.HasPrefix(r.LastUser, "self "):
			for range 10 {
				calls = append(calls, backgroundCall("subagent", "leaf"))
			}
		case r.LastUser == "leaf":
			started.Add(1)
			calls = append(calls, llmtest.ToolCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, leafSleep)})
		default:
			return llmtest.Reply{Text: "unexpected prompt " + r.LastUser}
		}
		return llmtest.Reply{ToolCall: &calls[0], ToolCalls: calls[1:]}
	})
	peak := 0
	runTree(t, srv, 10, "fan out", func(root int) { peak = max(peak, len(treeProcesses(root, leafSleep))) })
	if peak > 6 || peak == 0 {
		t.Errorf("at most %d leaves slept at once, want 1 to 6 (the cap 10 less the four self children)", peak)
	}
	if n := started.Load(); n > 6 || n == 0 {
		t.Errorf("%d leaves started, want 1 to 6", n)
	}
	mu.Lock()
	defer mu.Unlock()
	refused := 0
	for _, n := range limited {
		refused += n
	}
	if refused < 34 {
		t.Errorf("%d starts were refused with LIMIT_REACHED, want at least 34 of the 40 (per self child: %v)", refused, limited)
	}
}

// A `command: self` child that dies holding places under the tree's cap
// gives them back: with maxLiveChildren 3, a self child starts two sleeping
// children and is refused a third (the tree is full); once it is killed,
// the root starts three children, all admitted.
func TestHostileSelfChildCrashGivesItsPlacesBack(t *testing.T) {
	const crashSleep = "sleep 60.0417"
	killed := make(chan struct{})
	var mu sync.Mutex
	selfRefused, rootRefused, rootStarts := -1, -1, 0
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		switch n := len(r.ToolResults); {
		case r.LastUser == "crash" && n == 0:
			return calls(1, backgroundCall("subagent_isolated", "self"))
		case r.LastUser == "crash" && n == 1:
			mu.Unlock()
			select {
			case <-killed:
			case <-time.After(time.Minute):
			}
			mu.Lock()
			rootStarts++
			return calls(3, backgroundCall("subagent", "quick"))
		case n >= 4: // the root, after its three starts
			rootRefused = max(rootRefused, refusedIn(r, 3))
			return llmtest.Reply{Text: "done"}
		case r.LastUser == "self" && n == 0:
			return calls(3, backgroundCall("subagent", "leaf"))
		case r.LastUser == "self":
			selfRefused = max(selfRefused, refusedIn(r, 3))
			return llmtest.Reply{Text: "waiting", Hang: true}
		case r.LastUser == "leaf" && n == 0:
			return calls(1, llmtest.ToolCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, crashSleep)})
		}
		return llmtest.Reply{Text: "ok"}
	})
	var self int
	runTree(t, srv, 3, "crash", func(root int) {
		if self != 0 || len(treeProcesses(root, crashSleep)) < 2 {
			return
		}
		pids := treeProcesses(root, " acp")
		if len(pids) != 1 {
			t.Errorf("the self child is not alone: %v", pids)
			return
		}
		self = pids[0]
		syscall.Kill(self, syscall.SIGKILL)
		for deadline := time.Now().Add(10 * time.Second); alive(self) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // the root notices the death
		close(killed)
	})
	mu.Lock()
	defer mu.Unlock()
	switch {
	case self == 0:
		t.Fatal("the self child's two sleepers never ran")
	case selfRefused != 1:
		t.Errorf("the self child was refused %d of its 3 starts, want 1 (the tree holds it and 2 children)", selfRefused)
	case rootStarts != 1 || rootRefused != 0:
		t.Errorf("after the self child died, the root was refused %d of its 3 starts (asked %d times), want 0: its places leaked", rootRefused, rootStarts)
	}
}
