//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
)

// resumeModel is the loopback model of the resume tests. The parent
// delegates "child task" with tool; the child runs a command, then hangs
// in its next request (where the test kills dsh). Resumed with "talk to
// the child", the parent finds the child's id in the interrupted notice
// and sends it "keep going"; the child answers whether its request holds
// its earlier conversation; the parent repeats what the child said.
type resumeModel struct {
	tool string
	hung chan struct{} // the child's hanging request arrived

	mu           sync.Mutex
	childBodies  []string // the resumed child's requests
	parentBodies []string
}

var noticeID = regexp.MustCompile(`Background subagent ([0-9a-f-]{36})`)

// firstUser returns the task of a request body's first user message.
func firstUser(body []byte) string {
	var b struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &b)
	for _, m := range b.Messages {
		if m.Role == "user" {
			_, task, _ := prompt.SplitChildTask(m.Content)
			return task
		}
	}
	return ""
}

func (m *resumeModel) reply(r llmtest.Request) llmtest.Reply {
	body := string(r.Body)
	m.mu.Lock()
	defer m.mu.Unlock()
	child := firstUser(r.Body) == "child task" // an in-process child's or a dsh acp child's
	_, last, _ := prompt.SplitChildTask(r.LastUser)
	switch {
	case child && last == "child task" && len(r.ToolResults) == 0:
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"echo child-was-here"}`}}
	case child && last == "child task":
		select {
		case <-m.hung:
		default:
			close(m.hung)
		}
		return llmtest.Reply{Text: "thinking…", Hang: true}
	case child && r.LastUser == "keep going":
		m.childBodies = append(m.childBodies, body)
		if strings.Contains(body, "child task") && strings.Contains(body, "child-was-here") {
			return llmtest.Reply{Text: "resumed with my history"}
		}
		return llmtest.Reply{Text: "resumed without history"}
	case r.LastUser == "delegate please":
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: m.tool, Arguments: `{"description":"helper","prompt":"child task"}`}}
	case r.LastUser == "talk to the child":
		m.parentBodies = append(m.parentBodies, body)
		for _, res := range r.ToolResults {
			if strings.HasPrefix(res, "message queued") {
				return llmtest.Reply{Text: "sent. "}
			}
		}
		id := noticeID.FindStringSubmatch(body)
		if id == nil {
			return llmtest.Reply{Text: "no child to talk to"}
		}
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "send_message",
			Arguments: fmt.Sprintf(`{"subagent_id":%q,"message":"keep going"}`, id[1])}}
	case strings.HasPrefix(r.LastUser, "Background subagent"):
		_, closing, _ := strings.Cut(r.LastUser, "Its closing message:\n")
		return llmtest.Reply{Text: "the child said: " + closing}
	}
	return llmtest.Reply{Text: "unexpected: " + r.LastUser}
}

// killMidDelegation runs `dsh run "delegate please"` and kills it with
// SIGKILL while its child hangs in a model request (once the child's
// record is on disk); it returns the id of the killed run's session.
func killMidDelegation(t *testing.T, m *resumeModel, env []string, home, cwd string, extra ...string) string {
	t.Helper()
	// Orphans (a dsh acp child) are re-parented to this process, so that
	// noneLeft sees them end.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0); errno != 0 {
		t.Fatalf("prctl: %v", errno)
	}
	cmd := exec.Command(dshBinary, append(append([]string{"run", "--cwd", cwd}, extra...), "delegate please")...)
	cmd.Env = env
	var stderr lines
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.hung:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child never reached its second request:\n%s", stderr.String())
	}
	waitRecorded(t, home)
	cmd.Process.Kill()
	cmd.Wait()
	noneLeft(t)
	var root string
	for id, s := range storedSessions(t, home) {
		if s.header.ParentSession == "" {
			root = id
		}
	}
	if root == "" {
		t.Fatal("the killed run stored no top-level session")
	}
	return root
}

// waitRecorded waits until the stored child session under home that
// holds the delegated task's turn is on disk.
func waitRecorded(t *testing.T, home string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		b := jsonl.New(filepath.Join(home, "sessions"))
		hs, _ := b.List()
		for _, h := range hs {
			if _, events, _, err := b.Read(h.ID); err == nil && h.ParentSession != "" {
				for _, e := range events {
					if e.Type == subagent.DescriptorType && strings.Contains(string(e.Data.(json.RawMessage)), `"continuable"`) {
						return
					}
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no continuable child was recorded")
}

// The end-to-end check, for a spawn, a fork and a command: self
// child: dsh run is SIGKILLed mid-delegation; dsh run --resume <prefix>
// continues the session, learns that its child was interrupted, messages
// it with send_message, and the child — rebuilt in the new process from its
// log, or for the self child a new dsh acp loading its session — sees its
// earlier conversation in its model request.
func TestResumeAfterKillContinuesTheChild(t *testing.T) {
	for _, tc := range []struct{ name, tool, config string }{{"spawn", "subagent", ""}, {"fork", "subagent_fork", ""},
		{"acp-self", "subagent_isolated", selfConfig}} {
		t.Run(tc.name, func(t *testing.T) {
			m := &resumeModel{tool: tc.tool, hung: make(chan struct{})}
			srv := llmtest.NewServer(t, m.reply)
			home, cwd := t.TempDir(), t.TempDir()
			env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
			if tc.config != "" {
				os.WriteFile(filepath.Join(home, "dsh.yaml"), []byte(tc.config), 0o600)
			}
			root := killMidDelegation(t, m, env, home, cwd)

			cmd := exec.Command(dshBinary, "run", "--resume", root[:8], "talk to the child")
			cmd.Env = env
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("dsh run --resume: %v\nstdout %s\nstderr %s", err, out, stderr.String())
			}
			if !strings.Contains(string(out), "the child said: resumed with my history") {
				t.Errorf("stdout %q\nstderr %s\nchild requests %q", out, stderr.String(), m.childBodies)
			}
			if !strings.Contains(stderr.String(), "[1 child was interrupted") || !strings.Contains(stderr.String(), "[session "+root) {
				t.Errorf("stderr %s", stderr.String())
			}
			if n := len(m.childBodies); n != 1 {
				t.Errorf("%d resumed child requests, want 1", n)
			}
			noneLeft(t)
		})
	}
}

// --continue takes the latest top-level session of the working directory;
// --resume refuses an unknown or ambiguous prefix, listing the matches;
// neither creates a session.
func TestContinueAndResumeChooseTheSession(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: fmt.Sprintf("turn with %d messages", r.Messages)}
	})
	home, cwd := t.TempDir(), t.TempDir()
	env := map[string]string{"DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	if _, _, err := runCLI(t, env, "run", "--cwd", cwd, "--continue", "hello"); err == nil || !strings.Contains(err.Error(), "no session to continue") {
		t.Fatalf("continue with nothing stored: %v", err)
	}
	var ids []string
	for range 2 {
		_, errOut, err := runCLI(t, env, "run", "--cwd", cwd, "hello")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, regexp.MustCompile(`\[session ([0-9a-f-]{36})`).FindStringSubmatch(errOut)[1])
	}
	out, errOut, err := runCLI(t, env, "run", "--cwd", cwd, "--continue", "again")
	if err != nil || !strings.Contains(out, "turn with 4 messages") || !strings.Contains(errOut, "[session "+ids[1]) {
		t.Fatalf("continue: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err = runCLI(t, env, "run", "--resume", ids[0], "again")
	if err != nil || !strings.Contains(out, "turn with 4 messages") || !strings.Contains(errOut, "[session "+ids[0]) {
		t.Fatalf("resume: %v\n%s\n%s", err, out, errOut)
	}
	if _, _, err := runCLI(t, env, "run", "--resume", "zzz", "again"); err == nil || !strings.Contains(err.Error(), `starting with "zzz"`) {
		t.Errorf("unknown prefix: %v", err)
	}
	if _, _, err := runCLI(t, env, "run", "--resume", "", "--continue", "x"); err == nil {
		t.Error("--continue with --resume accepted")
	}
	store := session.NewStore(jsonl.New(filepath.Join(home, "sessions")), nil)
	for _, id := range []string{"same-1", "same-2"} {
		s, detach, err := store.Create(session.CreateOptions{ID: id, Cwd: cwd})
		if err != nil {
			t.Fatal(err)
		}
		s.Append(session.TypeTurnStart, session.TurnStart{Turn: 1})
		s.Append(session.TypeTurnEnd, session.TurnEnd{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}})
		detach()
	}
	_, _, err = runCLI(t, env, "run", "--resume", "same", "again")
	if err == nil || !strings.Contains(err.Error(), `2 sessions have an id starting with "same"`) ||
		!strings.Contains(err.Error(), "same-1") || !strings.Contains(err.Error(), "same-2") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	list, _, _ := runCLI(t, env, "sessions", "list", "--all", "--json")
	var rows []json.RawMessage
	if err := json.Unmarshal([]byte(list), &rows); err != nil || len(rows) != 4 {
		t.Errorf("%d sessions stored (%v), want 4:\n%s", len(rows), err, list)
	}
}
