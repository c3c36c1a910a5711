package tui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
	"github.com/dsh-go/dsh/session"
)

// floodServer streams an answer of n small deltas once go is closed.
func floodServer(t *testing.T, n int, start <-chan struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-start:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"d%d \"}}]}\n\n", i)
			if i%500 == 0 {
				w.(http.Flusher).Flush()
			}
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"THE END\"},\"finish_reason\":\"stop\"}],"+
			"\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A stuck screen does not slow the agent: while nobody reads the terminal
// (the UI's writes block, so its event loop does), a turn streaming a
// hundred thousand deltas runs to its end; the feed drops the deltas it
// cannot hold, and once the screen is read again it shows the whole
// answer (healed from the final message) and how many updates it skipped.
func TestAStuckScreenDoesNotSlowTheAgent(t *testing.T) {
	start := make(chan struct{})
	s := startAt(t, floodServer(t, 30_000, start).URL, "", 100, 30)
	ended := make(chan struct{})
	var once sync.Once
	defer s.agent.Session().Observe(func(e session.Event) {
		if end, ok := e.Data.(session.TurnEnd); ok && end.Reason.Kind == session.EndCompleted {
			once.Do(func() { close(ended) })
		}
	})()
	s.send("flood")
	s.term.WaitText("working")

	s.term.Pause()
	for i := range 100 { // full repaints until the terminal's buffers are full
		s.resize(100+i%2, 30)
		time.Sleep(20 * time.Millisecond) // SIGWINCHs sent together coalesce: pace them, one repaint each
	}
	close(start)
	select {
	case <-ended:
	case <-time.After(termtest.Timeout):
		t.Fatal("the turn did not end while the screen was stuck")
	}
	s.term.Resume()
	s.term.WaitText("THE END")
	s.term.WaitText("updates skipped")
}

// What the model writes cannot drive the terminal: escape sequences that
// would clear the screen, retitle the window, set the clipboard or hide
// the text are dropped, and the text around them shows.
func TestAHostileModelCannotDriveTheTerminal(t *testing.T) {
	hostile := "before\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\x1b[8mhidden?\x1b[0m\x1b[?1049l after"
	s := start(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Reasoning: "\x1b[31mred thought", Text: hostile}
	}, "", 100, 30)
	s.send("be hostile")
	screen := s.term.WaitText("beforehidden? after")
	if !strings.Contains(screen, "dsh · deepseek/deepseek-flash · session") || !strings.Contains(screen, "› be hostile") {
		t.Fatalf("the answer cleared the screen:\n%s", screen)
	}
	if strings.Contains(screen, "[2J") || strings.Contains(screen, "52;c") || strings.Contains(screen, "pwned") {
		t.Fatalf("escape sequences reached the screen as text:\n%s", screen)
	}
}
