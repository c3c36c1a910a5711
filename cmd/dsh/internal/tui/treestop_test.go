package tui_test

import (
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
)

// Esc stops the whole tree: with the root idle, a background continuable
// child's turn and its process group end within 2 s, no notice opens a
// root turn, and the next prompt shows the model the child's notice.
func TestEscStopsTheTree(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{{"continuable", ""}, {"oneshot", oneShotSpawn}} {
		t.Run(tc.name, func(t *testing.T) { escStopsTheTree(t, tc.yaml) })
	}
}

func escStopsTheTree(t *testing.T, yaml string) {
	var mu sync.Mutex
	var requests []llmtest.Request
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		requests = append(requests, r)
		mu.Unlock()
		switch {
		case r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo $$ > sleeper.pid; exec sleep 1000"}`}}
		case r.Child:
			return llmtest.Reply{Text: "slept"}
		case r.LastUser == "start the sleeper" && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"sleeper","prompt":"sleep","run_in_background":true}`}}
		}
		return llmtest.Reply{Text: "Noted."}
	}, yaml, 100, 30)
	seen := func() []llmtest.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]llmtest.Request(nil), requests...)
	}

	s.send("start the sleeper")
	pid := waitPID(t, filepath.Join(s.cwd, "sleeper.pid"))
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	s.term.WaitText("Noted.")
	s.term.WaitFor("the root's turn over", func(s string) bool { return strings.Contains(s, "ready") })
	before := len(seen())
	s.term.Type(termtest.Esc)
	s.term.WaitText("Stopping 1 background children.")
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(-pgid, 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			t.Fatalf("the sleeper's process group %d outlived Esc by 2 s", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // a notice that opened a turn would call the model by now
	if after := seen(); len(after) != before {
		t.Fatalf("the model got %d requests after Esc, before any prompt", len(after)-before)
	}
	s.send("and now?")
	s.term.WaitFor("the next answer", func(s string) bool { return strings.Count(s, "Noted.") >= 2 })
	after := seen()
	if len(after) != before+1 || !strings.Contains(string(after[before].Body), "Background subagent") &&
		!strings.Contains(string(after[before].Body), "background task subagent-1") {
		t.Errorf("the next prompt's request does not show the child's notice (%d requests)", len(after)-before)
	}
}

// /kill ID stops a continuable child with the user's authority: the child
// and its processes end, and its notice opens no root turn.
func TestKillIsTheUsers(t *testing.T) {
	var mu sync.Mutex
	var requests []llmtest.Request
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		requests = append(requests, r)
		mu.Unlock()
		switch {
		case r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo $$ > sleeper.pid; exec sleep 1000"}`}}
		case r.LastUser == "start the sleeper" && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent",
				Arguments: `{"description":"sleeper","prompt":"sleep","run_in_background":true}`}}
		}
		return llmtest.Reply{Text: "Noted."}
	}, "", 100, 30)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(requests)
	}
	s.send("start the sleeper")
	pid := waitPID(t, filepath.Join(s.cwd, "sleeper.pid"))
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	s.term.WaitText("Noted.")
	s.term.WaitFor("the root's turn over", func(s string) bool { return strings.Contains(s, "ready") })
	before := count()
	s.term.Type("/ki" + termtest.Tab)
	s.term.WaitText("/kill ")
	s.term.Type(termtest.Tab + termtest.Enter)
	s.term.WaitText("Stopping ")
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(-pgid, 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			t.Fatalf("the sleeper's process group %d outlived /kill by 2 s", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if n := count() - before; n != 0 {
		t.Fatalf("the model got %d requests after /kill, before any prompt", n)
	}
}
