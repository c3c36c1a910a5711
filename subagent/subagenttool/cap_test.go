package subagenttool_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/tool"
)

// huge is a child's answer of n bytes with a recognisable head and tail,
// and multi-byte runes around the middle.
func huge(n int) string {
	return "BEGIN " + strings.Repeat("é", (n-10)/2) + " END"
}

// A foreground child's long answer is capped like other tool results: its
// head and tail reach the parent, with a note of how much was cut and the
// child session that holds the whole answer.
func TestForegroundAnswerIsCapped(t *testing.T) {
	answer := huge(1 << 20)
	child := func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
		return scripted.New(scripted.Text(answer)).Stream(ctx, req)
	}
	e := newEnv(t, child, scripted.ToolCalls("", call("subagent", `{"description":"big","prompt":"write a lot"}`)), scripted.Text("ok"))
	if end := e.run("go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end %+v", end)
	}
	rs := results(e.agent)
	text := resultText(rs[0])
	if rs[0].Error != nil || len(text) < tool.DefaultOutputLimit || len(text) > tool.DefaultOutputLimit+400 {
		t.Fatalf("result of %d bytes (error %v), want about %d", len(text), rs[0].Error, tool.DefaultOutputLimit)
	}
	headers, err := e.rt.Sessions.List()
	if err != nil {
		t.Fatal(err)
	}
	var childID string
	for _, h := range headers {
		if h.ParentSession == e.agent.ID() {
			childID = h.ID
		}
	}
	cut := len(answer) - len(strings.Split(text, "\n")[0]) - len(strings.Split(text, "\n")[2])
	note := fmt.Sprintf("[… %d of the answer's %d bytes cut here (the tool result limit is %d); the whole answer is in the child's "+
		"session %s: read it with `dsh sessions show %s` …]", cut, len(answer), tool.DefaultOutputLimit, childID, childID)
	if childID == "" || !strings.HasPrefix(text, "BEGIN éé") || !strings.HasSuffix(text, "éé END") || !strings.Contains(text, "\n"+note+"\n") {
		t.Fatalf("result %q … %q", text[:100], text[len(text)-400:])
	}
	// The whole answer is in the child's session.
	_, events, err := e.rt.Sessions.Read(childID)
	if err != nil {
		t.Fatal(err)
	}
	var whole string
	for _, ev := range events {
		if m, ok := ev.Data.(session.AssistantMessage); ok {
			whole = content.JoinText(m.Message.Content)
		}
	}
	if whole != answer {
		t.Fatalf("the child's session holds %d bytes of the answer, want %d", len(whole), len(answer))
	}
}

// A remote child keeps no session dsh can show: the note says so, and the
// partial output of a run that did not complete is capped too.
func TestRemoteAndPartialAnswersAreCapped(t *testing.T) {
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("remote", `{"description":"a","prompt":"done"}`), call("remote", `{"description":"b","prompt":"cut"}`)),
		scripted.Text("ok"))
	answer := huge(5000)
	p := &subagenttest.Provider{ProviderName: "far", ByPrompt: map[string]subagenttest.Script{
		"done": {Result: subagent.Result{Output: []content.Block{content.Text(answer)}}},
		"cut":  {Result: subagent.Result{Output: []content.Block{content.Text(answer)}, StopReason: subagent.MaxTokens}},
	}}
	if _, err := e.rt.Subagents.Register(p); err != nil {
		t.Fatal(err)
	}
	deps := e.deps()
	deps.OutputLimit = 1000
	off := false
	d, err := subagenttool.Mount(deps, subagenttool.Config{Provider: "far", ToolName: "remote", EnableRunInBackground: &off})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d)
	e.run("go")
	rs := results(e.agent)
	if len(rs) != 2 {
		t.Fatalf("%d results", len(rs))
	}
	for i, r := range rs {
		text := resultText(r)
		if len(text) > 1000+400 || !strings.Contains(text, "BEGIN") || !strings.Contains(text, "END") ||
			!strings.Contains(text, "provider far ran the child out of process") {
			t.Fatalf("result %d (%d bytes): %q", i, len(text), text)
		}
	}
	if rs[1].Error == nil || !strings.HasPrefix(resultText(rs[1]), "Error: subagent run hit the token limit\nPartial output before the run ended:\nBEGIN") {
		t.Fatalf("partial result %q", resultText(rs[1])[:100])
	}
}
