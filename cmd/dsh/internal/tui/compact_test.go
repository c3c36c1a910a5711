package tui_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/session"
)

// /compact FOCUS summarises the conversation by hand: the model is asked
// for a summary with the focus, the screen shows it, and the next prompt
// goes on from it.
func TestCompactCommand(t *testing.T) {
	var mu sync.Mutex
	var asked string
	var after int
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(r.LastUser, "replaced by a summary"):
			asked = r.LastUser
			return llmtest.Reply{Text: "SUMMARY-OF-THE-TALK"}
		case r.LastUser == "third":
			after = r.Messages
		}
		return llmtest.Reply{Text: "answer to " + r.LastUser}
	}, "", 100, 30)
	s.send("first")
	s.term.WaitText("answer to first")
	s.send("second")
	s.term.WaitText("answer to second")
	s.send("/compact the open files")
	s.term.WaitText("SUMMARY-OF-THE-TALK")
	s.term.WaitText("messages summarised")
	s.send("third")
	s.term.WaitText("answer to third")
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(asked, "Focus the summary on: the open files") {
		t.Errorf("the model was asked %q", asked)
	}
	// system, summary, the kept answer, the new prompt
	if after == 0 || after > 4 {
		t.Errorf("the prompt after /compact holds %d messages", after)
	}
	var n int
	for _, e := range s.agent.Session().Events() {
		if c, ok := e.Data.(session.Compaction); ok && c.Trigger == session.CompactManual {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d manual compactions logged", n)
	}
}
