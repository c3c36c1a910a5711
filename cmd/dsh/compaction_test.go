package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
)

// windowMock is a loopback DeepSeek endpoint with a small context window:
// a request of more than window tokens (a token is 4 bytes of the request
// body) is refused as the real API refuses it, HTTP 400 with its error
// body. A summarisation request is answered with a numbered summary,
// others with "answer to" their prompt; usage reports the body's tokens.
type windowMock struct {
	mu        sync.Mutex
	window    int  // 0: no limit
	refuseAll bool // refuse every request but summarisations
	bodies    []string
	summaries int
	overflows int
	// child, when set, answers an in-process child's requests.
	child func(r llmtest.Request) llmtest.Reply
}

func (m *windowMock) reply(r llmtest.Request) llmtest.Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	tokens := len(r.Body) / 4
	summarise := strings.Contains(r.LastUser, "replaced by a summary")
	m.bodies = append(m.bodies, string(r.Body))
	if (m.window > 0 && tokens > m.window) || (m.refuseAll && !summarise) {
		m.overflows++
		return llmtest.Reply{Status: 400, Body: fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. `+
			`However, you requested %d tokens (%d in the messages, 0 in the completion). Please reduce the length of the messages or completion.",`+
			`"type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`, m.window, tokens, tokens)}
	}
	if summarise {
		m.summaries++
		return llmtest.Reply{Text: fmt.Sprintf("SUMMARY-%d: the user asks numbered questions.", m.summaries), PromptTokens: tokens}
	}
	if r.Child && m.child != nil {
		rep := m.child(r)
		rep.PromptTokens = tokens
		return rep
	}
	if len(r.ToolResults) > 0 && strings.Contains(r.ToolResults[len(r.ToolResults)-1], "child done") {
		return llmtest.Reply{Text: "parent done", PromptTokens: tokens}
	}
	if strings.HasPrefix(r.LastUser, "delegate:") {
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"helper","prompt":"child task"}`}, PromptTokens: tokens}
	}
	_, task, _ := prompt.SplitChildTask(r.LastUser)
	if q, _, ok := strings.Cut(task, " "); ok && strings.HasPrefix(q, "q") {
		task = q
	}
	return llmtest.Reply{Text: "answer to " + task, PromptTokens: tokens}
}

func (m *windowMock) setWindow(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.window = n
}

// dshRun runs the dsh binary with env and args.
func dshRun(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(dshBinary, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

var sessionLine = regexp.MustCompile(`\[session ([0-9a-f-]{36})`)

// startWindowSession runs a first turn against m with no window set, and
// returns its environment, session id and the size in tokens of its
// request (system prompt and tool specs included).
func startWindowSession(t *testing.T, m *windowMock) (env map[string]string, id string, base int) {
	t.Helper()
	srv := llmtest.NewServer(t, m.reply)
	home, cwd := t.TempDir(), t.TempDir()
	env = map[string]string{"HOME": home, "DSH_HOME": home, "DEEPSEEK_API_KEY": "sk-test", "DEEPSEEK_BASE_URL": srv.URL}
	_, errOut, err := dshRun(t, env, "run", "--cwd", cwd, "q0 hello")
	if err != nil {
		t.Fatalf("first turn: %v\n%s", err, errOut)
	}
	id = sessionLine.FindStringSubmatch(errOut)[1]
	env["CWD"] = cwd
	return env, id, len(m.bodies[0]) / 4
}

// writeConfig writes home's dsh.yaml.
func writeConfig(t *testing.T, env map[string]string, yaml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(env["DSH_HOME"], "dsh.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func storedCompactions(t *testing.T, home, id string) []session.Compaction {
	t.Helper()
	var out []session.Compaction
	for _, e := range storedSessions(t, home)[id].raw {
		if c, ok := e.Data.(session.Compaction); ok {
			out = append(out, c)
		}
	}
	return out
}

// A session of many turns, each run by a new dsh process, grows past the
// route's context window: dsh compacts before the request that would pass
// agent.compactAt of it, once per crossing, the endpoint never refuses a
// request, and every turn is answered. A resumed run continues from the
// summary; dsh sessions show shows the compaction.
func TestLongSessionCompactsAndResumes(t *testing.T) {
	m := &windowMock{}
	env, id, base := startWindowSession(t, m)
	window := 2 * base
	writeConfig(t, env, fmt.Sprintf("models:\n  - name: deepseek\n    contextWindow: %d\n", window))
	m.setWindow(window)
	pad := strings.Repeat("data ", base/5) // a quarter of the base request's tokens
	said := 0
	for i := 1; i <= 8; i++ {
		q := fmt.Sprintf("q%d", i)
		out, errOut, err := dshRun(t, env, "run", "--cwd", env["CWD"], "--resume", id, q+" "+pad)
		if err != nil || !strings.Contains(out, "answer to "+q) {
			t.Fatalf("turn %s: %v\nstdout %s\nstderr %s", q, err, out, errOut)
		}
		said += strings.Count(errOut, "compacted the conversation (auto): ")
	}
	m.mu.Lock()
	overflows, summaries, bodies := m.overflows, m.summaries, append([]string(nil), m.bodies...)
	m.mu.Unlock()
	if overflows != 0 {
		t.Errorf("the endpoint refused %d requests", overflows)
	}
	cs := storedCompactions(t, env["DSH_HOME"], id)
	t.Logf("base request %d tokens, window %d: %d compactions in 8 turns", base, window, len(cs))
	if len(cs) < 2 || len(cs) > 5 || len(cs) != summaries || said != len(cs) {
		t.Fatalf("%d compactions logged (%d shown), %d summaries asked, in 8 turns past a window of %d", len(cs), said, summaries, window)
	}
	for _, c := range cs {
		if c.Trigger != session.CompactAuto || c.Compacted < 1 || c.Kept < 1 {
			t.Errorf("compaction %+v", c)
		}
	}
	// Once per crossing: a summarisation is never followed by another
	// without a turn's request between them.
	prevSummary := false
	for _, b := range bodies {
		s := strings.Contains(b, "replaced by a summary")
		if s && prevSummary {
			t.Fatal("two compactions in a row")
		}
		prevSummary = s
	}
	// A new process goes on from the summary.
	out, errOut, err := dshRun(t, env, "run", "--cwd", env["CWD"], "--resume", id, "q9 last")
	if err != nil || !strings.Contains(out, "answer to q9") {
		t.Fatalf("resume: %v\n%s\n%s", err, out, errOut)
	}
	m.mu.Lock()
	last := m.bodies[len(m.bodies)-1]
	m.mu.Unlock()
	if !strings.Contains(last, fmt.Sprintf("SUMMARY-%d", summaries)) || strings.Contains(last, "q1 data") {
		t.Errorf("the resumed request does not go on from the summary:\n%s", clip(last, 2000))
	}
	// So does an interactive one (`dsh chat --resume`, prompts on stdin).
	chat := exec.Command(dshBinary, "chat", "--cwd", env["CWD"], "--resume", id)
	chat.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + env["HOME"], "DSH_HOME=" + env["DSH_HOME"],
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + env["DEEPSEEK_BASE_URL"]}
	chat.Stdin = strings.NewReader("q10 via chat\n")
	if b, err := chat.CombinedOutput(); err != nil || !strings.Contains(string(b), "answer to q10") {
		t.Fatalf("dsh chat --resume: %v\n%s", err, b)
	}
	m.mu.Lock()
	last = m.bodies[len(m.bodies)-1]
	m.mu.Unlock()
	if !strings.Contains(last, "SUMMARY-") || !strings.Contains(last, "q10 via chat") || strings.Contains(last, "q1 data") {
		t.Errorf("the chat's request does not go on from the summary:\n%s", clip(last, 2000))
	}
	out, errOut, err = dshRun(t, env, "sessions", "show", id)
	if err != nil || !strings.Contains(out, "── compacted (auto): ") || !strings.Contains(out, "summary: [The earlier part") {
		t.Errorf("sessions show: %v\n%s\n%s", err, out, errOut)
	}
}

// A route whose contextWindow is wrong (too large) meets the endpoint's
// CONTEXT_WINDOW_EXCEEDED: dsh compacts and retries once, and the turn
// completes. A request still refused after that ends the run with the
// code and advice.
func TestContextOverflowRecoveredOnce(t *testing.T) {
	m := &windowMock{}
	env, id, base := startWindowSession(t, m)
	writeConfig(t, env, "models:\n  - name: deepseek\n    contextWindow: 10000000\n")
	m.setWindow(base * 3 / 2)
	pad := strings.Repeat("data ", base/5)
	recovered := false
	for i := 1; i <= 6 && !recovered; i++ {
		q := fmt.Sprintf("q%d", i)
		out, errOut, err := dshRun(t, env, "run", "--json", "--cwd", env["CWD"], "--resume", id, q+" "+pad)
		if err != nil || !strings.Contains(out, `"type":"turn_end","turn":`) || !strings.Contains(out, `"reason":"completed"`) {
			t.Fatalf("turn %s: %v\nstdout %s\nstderr %s", q, err, out, errOut)
		}
		recovered = regexp.MustCompile(`\{"type":"compaction","turn":\d+,"kind":"overflow"\}`).MatchString(out)
	}
	if !recovered {
		t.Fatal("no overflow met in 6 turns")
	}
	if cs := storedCompactions(t, env["DSH_HOME"], id); len(cs) != 1 || cs[0].Trigger != session.CompactOverflow || m.overflows != 1 {
		t.Fatalf("compactions %+v after %d overflows", cs, m.overflows)
	}
	m.mu.Lock()
	m.refuseAll = true
	m.mu.Unlock()
	_, errOut, err := dshRun(t, env, "run", "--cwd", env["CWD"], "--resume", id, "q7 more")
	if err == nil || !strings.Contains(errOut, "CONTEXT_WINDOW_EXCEEDED") || !strings.Contains(errOut, "start a new session") {
		t.Fatalf("a second overflow: %v\n%s", err, errOut)
	}
	if cs := storedCompactions(t, env["DSH_HOME"], id); len(cs) != 2 {
		t.Errorf("%d compactions: the refused retry was compacted again", len(cs))
	}
}

// A child runs the same loop: its own conversation, grown by tool output
// within one turn, is compacted in the middle of that turn (a tool call
// kept with its result), and the child finishes its work.
func TestChildCompactsItsOwnConversation(t *testing.T) {
	m := &windowMock{}
	env, _, base := startWindowSession(t, m)
	window := 2 * base
	writeConfig(t, env, fmt.Sprintf("models:\n  - name: deepseek\n    contextWindow: %d\n", window))
	chunk := 2 * base / 3 // bytes of output per call: a sixth of the base request's tokens
	m.mu.Lock()
	m.child = func(r llmtest.Request) llmtest.Reply {
		if len(strings.Join(r.ToolResults, "")) < 8*chunk && len(r.ToolResults) < 20 {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":"yes x | head -c %d"}`, chunk)}}
		}
		return llmtest.Reply{Text: "child done"}
	}
	m.window = window
	m.mu.Unlock()
	srvHome := env["DSH_HOME"]
	out, errOut, err := dshRun(t, env, "run", "--cwd", env["CWD"], "delegate: child task")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	var child string
	for sid, s := range storedSessions(t, srvHome) {
		if s.header.ParentSession != "" {
			child = sid
		}
	}
	if child == "" {
		t.Fatalf("no child ran:\n%s", errOut)
	}
	cs := storedCompactions(t, srvHome, child)
	t.Logf("child compactions: %+v", cs)
	if len(cs) == 0 || m.overflows != 0 {
		t.Fatalf("child compactions %+v, %d overflows\n%s", cs, m.overflows, errOut)
	}
	if cs[0].Turn != 1 || cs[0].Trigger != session.CompactAuto {
		t.Errorf("child compaction %+v", cs[0])
	}
	if end, _ := lastTurnEnd(storedSessions(t, srvHome)[child].raw); end.Reason.Kind != session.EndCompleted {
		t.Errorf("child ended %+v", end.Reason)
	}
}
