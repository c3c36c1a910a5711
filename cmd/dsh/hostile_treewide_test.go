package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// refusal is the LIMIT_REACHED error the model sees when the tree is full.
const refusal = "the delegation tree already has 10 live children, its cap (subagents.maxLiveChildren)"

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
			n := 0
			for _, res := range r.ToolResults {
				if strings.Contains(res, refusal) {
					n++
				}
			}
			if strings.HasPrefix(r.LastUser, "self ") {
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
		background := func(tool, prompt string) llmtest.ToolCall {
			return llmtest.ToolCall{Name: tool,
				Arguments: fmt.Sprintf(`{"description":%q,"prompt":%q,"run_in_background":true}`, prompt, prompt)}
		}
		var calls []llmtest.ToolCall
		switch {
		case r.LastUser == "fan out":
			for i := range 4 {
				calls = append(calls, background("subagent_isolated", fmt.Sprintf("self %d", i)))
			}
		case strings.HasPrefix(r.LastUser, "self "):
			for range 10 {
				calls = append(calls, background("subagent", "leaf"))
			}
		case r.LastUser == "leaf":
			started.Add(1)
			calls = append(calls, llmtest.ToolCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, leafSleep)})
		default:
			return llmtest.Reply{Text: "unexpected prompt " + r.LastUser}
		}
		return llmtest.Reply{ToolCall: &calls[0], ToolCalls: calls[1:]}
	})
	home, cwd := t.TempDir(), t.TempDir()
	config := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(config, []byte(`permissions: {tools: {bash: allow}}
subagents:
  maxLiveChildren: 10
  providers:
    - name: spawn
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - provider: spawn
    - {provider: isolated, toolName: subagent_isolated, subagentTypes: false}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	dsh := exec.Command(dshBinary, "run", "--cwd", cwd, "fan out")
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + config,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	var out, stderr strings.Builder
	dsh.Stdout, dsh.Stderr = &out, &stderr
	if err := dsh.Start(); err != nil {
		t.Fatal(err)
	}
	var peak int
	finished := make(chan error, 1)
	go func() { finished <- dsh.Wait() }()
	sleeping := func() int {
		n := 0
		for _, pid := range descendants(dsh.Process.Pid) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == leafSleep {
				n++
			}
		}
		return n
	}
	var err error
	for done := false; !done; {
		select {
		case err = <-finished:
			done = true
		case <-time.After(50 * time.Millisecond):
			peak = max(peak, sleeping())
		case <-time.After(2 * time.Minute):
			dsh.Process.Kill()
			t.Fatalf("dsh did not finish; it said: %s", stderr.String())
		}
	}
	if err != nil {
		t.Fatalf("dsh run: %v; it said: %s", err, stderr.String())
	}
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
