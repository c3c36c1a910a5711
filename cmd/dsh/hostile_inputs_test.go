package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/session"
)

// Credentials dsh was not told about reach no command (N13): variables
// named like one (OTEL_EXPORTER_OTLP_HEADERS, *_PAT, *_AUTH) and variables
// whose value is one (a URL with a password, a GitHub token) are not in
// bash's environment, and a key in a known format that a command prints
// from a file is redacted before the model, the log or the output see it.
func TestUnknownCredentialsReachNoCommand(t *testing.T) {
	const planted = "sk-proj-SENTINEL0file9a8b7c6d5e4f3a2b1c0d9e8f"
	secrets := map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=SENTINEL-otel-1a2b",
		"DATABASE_URL":               "postgres://app:SENTINEL-db-3c4d@db/x",
		"GH_PAT":                     "SENTINEL-pat-5e6f",
		"NPM_AUTH":                   "SENTINEL-npm-7a8b",
		"CI_BUILD_VALUE":             "ghp_SENTINEL0123456789abcdefABCDEF012345",
	}
	var results []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: `{"command":"env; echo ENV-END; cat planted.txt"}`}}
		}
		results = append(results, r.ToolResults...)
		return llmtest.Reply{Text: "done"}
	})
	home, cwd := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(cwd, "planted.txt"), []byte("OPENAI_API_KEY="+planted+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dsh := exec.Command(dshBinary, "run", "--cwd", cwd, "probe")
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL, "ORDINARY_SETTING=kept-value"}
	for name, v := range secrets {
		dsh.Env = append(dsh.Env, name+"="+v)
	}
	out, err := dsh.CombinedOutput()
	if err != nil {
		t.Fatalf("dsh run: %v\n%s", err, out)
	}
	if len(results) != 1 || !strings.Contains(results[0], "ORDINARY_SETTING=kept-value") || !strings.Contains(results[0], "OPENAI_API_KEY=") {
		t.Fatalf("the probe's controls failed, so it proves nothing: %q", results)
	}
	texts := map[string]string{"tool result": results[0], "output": string(out)}
	filepath.Walk(home, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			texts[p] = string(b)
		}
		return nil
	})
	for name, v := range secrets {
		if strings.Contains(results[0], name+"=") {
			t.Errorf("%s reached the command's environment", name)
		}
		for where, text := range texts {
			if strings.Contains(text, v) {
				t.Errorf("%s's value appears in %s", name, where)
			}
		}
	}
	for where, text := range texts {
		if strings.Contains(text, planted) {
			t.Errorf("the planted key appears in %s", where)
		}
	}
}

// A dsh.yaml holding a YAML alias bomb (about 500 bytes) costs a dsh
// command milliseconds, not minutes (N10): the command fails at once,
// naming the file and the line.
func TestAliasBombInConfigFailsFast(t *testing.T) {
	var bomb strings.Builder
	bomb.WriteString("mcpServers:\n  x:\n    command: echo\n    args:\n    - &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&bomb, "    - &a%d [%s]\n", i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 9), ","))
	}
	home := t.TempDir()
	path := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(path, []byte(bomb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dsh := exec.CommandContext(ctx, dshBinary, "sessions", "list")
	dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home}
	start := time.Now()
	out, err := dsh.CombinedOutput()
	took := time.Since(start)
	if err == nil || !strings.Contains(string(out), path+": line 9: YAML aliases expand to more than 10000 nodes") {
		t.Fatalf("dsh sessions list (%d-byte dsh.yaml, after %v): %v\n%s", bomb.Len(), took, err, out)
	}
	if took > 5*time.Second {
		t.Errorf("refused after %v", took)
	}
}

// Big text is stored once (N17): a 4 MiB answer streamed in two deltas,
// and a write_file call with 2 MiB of arguments, leave session files
// barely larger than the text (they were 3–4 times as large: the deltas,
// the block-end, the assistant message and the tool call each held a
// copy); the sessions read back whole, sessions show prints the answer,
// and a resumed session sends the whole answer back to the model.
func TestBigTextIsStoredOnce(t *testing.T) {
	const mib = 1 << 20
	line := "the answer goes on and on; "
	answer := strings.Repeat(line, 4*mib/len(line))
	body := strings.Repeat("file body ", 2*mib/10)
	args := fmt.Sprintf(`{"path":"big.txt","content":%q}`, body)
	resent := false
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.LastUser == "write" && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "write_file", Arguments: args}}
		case r.LastUser == "write":
			return llmtest.Reply{Text: "written"}
		case r.LastUser == "again":
			resent = strings.Contains(string(r.Body), answer)
			return llmtest.Reply{Text: "ok"}
		}
		return llmtest.Reply{Text: answer}
	})
	home, cwd := t.TempDir(), t.TempDir()
	// A window the 4 MiB answer fits in, so that the resumed request sends
	// it whole instead of compacting it.
	cfg := filepath.Join(home, "dsh.yaml")
	if err := os.WriteFile(cfg, []byte("models:\n  - name: deepseek\n    contextWindow: 100000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dsh := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(dshBinary, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
			"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("dsh %v: %v\n%.2000s", args, err, out)
		}
		return string(out)
	}
	dsh("run", "--cwd", cwd, "answer")
	dsh("run", "--cwd", cwd, "write")
	want := map[string]string{"answer": answer, "write": args + "written"}
	ids := map[string]string{}
	for id, s := range storedSessions(t, home) {
		prompt := userTexts(s.repaired)[0]
		ids[prompt] = id
		files, _ := filepath.Glob(filepath.Join(home, "sessions", "*", id+".jsonl"))
		if len(files) != 1 {
			t.Fatalf("session %s: files %v", id, files)
		}
		fi, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		ratio := float64(fi.Size()) / float64(len(want[prompt]))
		t.Logf("%s: %d bytes of answer and arguments → %d-byte session file (%.2f×)", prompt, len(want[prompt]), fi.Size(), ratio)
		if ratio > 1.2 {
			t.Errorf("%s: the session file holds the text %.2f times", prompt, ratio)
		}
		var got string
		for _, e := range s.repaired {
			if m, ok := e.Data.(session.AssistantMessage); ok {
				for _, b := range m.Message.Content {
					got += b.Text + b.Arguments
				}
			}
		}
		if got != want[prompt] {
			t.Errorf("%s: the stored answer differs (%d bytes, want %d)", prompt, len(got), len(want[prompt]))
		}
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "big.txt")); err != nil || string(b) != body {
		t.Fatalf("big.txt: %d bytes, %v", len(b), err)
	}
	if show := dsh("sessions", "show", ids["answer"]); strings.Count(show, line) < 4*mib/len(line)-1 {
		t.Errorf("sessions show prints %d of the answer's %d lines", strings.Count(show, line), 4*mib/len(line))
	}
	dsh("run", "--cwd", cwd, "--resume", ids["answer"], "again")
	if !resent {
		t.Error("the resumed session did not send the whole answer back")
	}
}

// A child's big answer is stored once in the whole tree (N17: a 20 MiB
// child answer made 63 MB of sessions): the child's session holds it once,
// the parent's tool result is capped.
func TestBigChildAnswerIsStoredOnce(t *testing.T) {
	answer := strings.Repeat("the child's long report; ", (4<<20)/25)
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child:
			return llmtest.Reply{Text: answer}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"c","prompt":"report"}`}}
		}
		return llmtest.Reply{Text: "thanks"}
	})
	home, cwd := t.TempDir(), t.TempDir()
	cmd := exec.Command(dshBinary, "run", "--cwd", cwd, "delegate")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home,
		"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dsh run: %v\n%.2000s", err, out)
	}
	var total int64
	var seen []os.FileInfo // a child's name links its root's file: count each file once
	files, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "*.jsonl"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && !slices.ContainsFunc(seen, func(o os.FileInfo) bool { return os.SameFile(o, fi) }) {
			seen, total = append(seen, fi), total+fi.Size()
		}
	}
	ratio := float64(total) / float64(len(answer))
	t.Logf("%d-byte child answer → %d bytes in %d session files (%.2f×)", len(answer), total, len(files), ratio)
	if len(files) != 2 || ratio > 1.2 {
		t.Errorf("%d session files hold the answer %.2f times", len(files), ratio)
	}
	found := false
	for _, s := range storedSessions(t, home) {
		for _, e := range s.repaired {
			if m, ok := e.Data.(session.AssistantMessage); ok && len(m.Message.Content) > 0 && m.Message.Content[0].Text == answer {
				found = true
			}
		}
	}
	if !found {
		t.Error("no session holds the child's whole answer")
	}
}
