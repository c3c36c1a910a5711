package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
)

// chatRequest is what a scripted reply sees of a chat-completions request.
type chatRequest struct {
	First, Last string   // the first and the last message's text
	LastRole    string   // the last message's role
	ToolResults []string // the tool messages' texts, in order
}

// chatReply is one scripted answer, streamed one SSE frame per delta.
type chatReply struct {
	Deltas []string // text deltas
	Tool   string   // a tool call after the text: its name,
	Args   string   // and its arguments
	Drip   bool     // after the deltas, send "." every 10 ms until the client leaves
}

// chatServer is a loopback OpenAI-compatible endpoint that answers with
// reply and calls tick (when set) at each request's arrival and after each
// frame it sends, so a test can act at a chosen point of the stream.
func chatServer(t *testing.T, reply func(chatRequest) chatReply, tick func()) *httptest.Server {
	if tick == nil {
		tick = func() {}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req chatRequest
		for i, m := range body.Messages {
			var text string
			json.Unmarshal(m.Content, &text)
			switch {
			case m.Role == "tool":
				req.ToolResults = append(req.ToolResults, text)
			case m.Role == "user" && req.First == "":
				req.First = text
			}
			if i == len(body.Messages)-1 {
				req.Last, req.LastRole = text, m.Role
			}
		}
		tick()
		rep := reply(req)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta string) bool {
			_, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":%s}]}\n\n", delta)
			http.NewResponseController(w).Flush()
			tick()
			return err == nil
		}
		text := func(s string) string { b, _ := json.Marshal(map[string]string{"content": s}); return string(b) }
		for _, d := range rep.Deltas {
			send(text(d))
		}
		for rep.Drip {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
				send(text("."))
			}
		}
		finish := "stop"
		if rep.Tool != "" {
			name, _ := json.Marshal(rep.Tool)
			args, _ := json.Marshal(rep.Args)
			send(fmt.Sprintf(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":%s,"arguments":%s}}]}`, name, args))
			finish = "tool_calls"
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n", finish)
		http.NewResponseController(w).Flush()
		tick()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// dshCommand returns the dsh binary run with args against srv, with its
// home in home (and, when config is set, that dsh.yaml there).
func dshCommand(t *testing.T, srv *httptest.Server, home, config string, args ...string) *exec.Cmd {
	t.Helper()
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(dshBinary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	return cmd
}

// storedSession is one session as its file holds it, and as a reader
// repairs it.
type storedSession struct {
	header   session.Header
	raw      []session.Event // as stored
	repaired []session.Event // as Store.Read returns it
	live     bool
}

// storedSessions reads every session under home's sessions folder; each
// must read without error.
func storedSessions(t *testing.T, home string) map[string]storedSession {
	t.Helper()
	b := jsonl.New(filepath.Join(home, "sessions"))
	hs, err := b.List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]storedSession{}
	for _, h := range hs {
		_, raw, live, err := b.Read(h.ID)
		if err != nil {
			t.Errorf("session %s does not load: %v", h.ID, err)
			continue
		}
		_, repaired, err := session.NewStore(b, nil).Read(h.ID)
		if err != nil {
			t.Errorf("session %s does not load: %v", h.ID, err)
			continue
		}
		out[h.ID] = storedSession{header: h, raw: raw, repaired: repaired, live: live}
	}
	return out
}

// lastTurnEnd returns the last turn/end of events.
func lastTurnEnd(events []session.Event) (session.TurnEnd, bool) {
	for i := len(events) - 1; i >= 0; i-- {
		if end, ok := events[i].Data.(session.TurnEnd); ok {
			return end, true
		}
	}
	return session.TurnEnd{}, false
}

// userTexts returns the texts of a log's user messages.
func userTexts(events []session.Event) []string {
	var out []string
	for _, e := range events {
		if m, ok := e.Data.(content.Message); ok && e.Type == session.TypeUserMessage {
			out = append(out, content.JoinText(m.Content))
		}
	}
	return out
}

// lines collects what a reader writes, line by line, and tells when a
// line containing a string has arrived.
type lines struct {
	mu   sync.Mutex
	text strings.Builder
	cond chan struct{}
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.Write(p)
	if l.cond != nil {
		close(l.cond)
		l.cond = nil
	}
	return len(p), nil
}

// String returns what was written so far.
func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// waitFor returns once s was written, or fails the test after a minute.
func (l *lines) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		l.mu.Lock()
		if strings.Contains(l.text.String(), s) {
			l.mu.Unlock()
			return
		}
		if l.cond == nil {
			l.cond = make(chan struct{})
		}
		c := l.cond
		l.mu.Unlock()
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("no %q after a minute; got %q", s, l.String())
		}
	}
}

// selfConfig delegates with subagent_isolated to this dsh over ACP.
const selfConfig = `subagents:
  providers:
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - provider: isolated
      toolName: subagent_isolated
acp:
  askPermission: []
`

// crashConfig mounts a spawn provider (tool subagent, which can also run
// in the background) and this dsh over ACP (tool subagent_isolated).
const crashConfig = `subagents:
  providers:
    - name: spawn
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - provider: spawn
    - provider: isolated
      toolName: subagent_isolated
acp:
  askPermission: []
`
