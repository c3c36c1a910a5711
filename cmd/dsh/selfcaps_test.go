package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// selfCapsConfig mounts this dsh over ACP with a persona, a tool filter
// that hides bash and a depth cap of 1: capabilities a `command: self`
// provider declares, so the tool mounts (it was refused before).
const selfCapsConfig = `permissions: {tools: {bash: allow}}
subagents:
  providers:
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - provider: isolated
      toolName: subagent
      subagentTypes: false
      persona: "You are the isolated triage clerk."
      toolFilter: {deny: [bash]}
      maxDepth: 1
acp:
  askPermission: []
`

// A tool instance on a `command: self` provider with a persona, a tool
// filter and a depth cap: the child process's model request has the
// persona and no bash, and its own delegation is refused by the cap.
func TestSelfChildGetsTheToolsCapabilities(t *testing.T) {
	var mu sync.Mutex
	var childFirst string
	var refusal []string
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.LastUser == "go" && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"triage","prompt":"TRIAGE"}`}}
		case r.LastUser == "TRIAGE" && len(r.ToolResults) == 0:
			childFirst = string(r.Body)
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"deeper","prompt":"DEEPER"}`}}
		case r.LastUser == "TRIAGE":
			refusal = r.ToolResults
			return llmtest.Reply{Text: "triaged"}
		}
		return llmtest.Reply{Text: "ok"}
	})
	conn, sess, stop := stopSession(t, t.TempDir(), selfCapsConfig, srv.URL)
	defer stop()
	resp, err := conn.Prompt(context.Background(), acpsdk.PromptRequest{SessionId: sess.SessionId, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock("go")}})
	if err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v", resp, err)
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case childFirst == "":
		t.Fatal("the self child never called its model")
	case !strings.Contains(childFirst, "You are the isolated triage clerk."):
		t.Errorf("the child's request has no persona:\n%.1500s", childFirst)
	case strings.Contains(childFirst, `"name":"bash"`):
		t.Error("the filtered bash tool is in the child's request")
	}
	if len(refusal) != 1 || !strings.Contains(refusal[0], "exceeds maxDepth 1") {
		t.Errorf("the child's own delegation past the cap answered %q", refusal)
	}
}
