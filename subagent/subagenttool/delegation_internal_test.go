package subagenttool

import (
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
)

// A background child's delegation lives as long as the child: once the
// child started it holds no copy of the task's blocks, and the hooks at
// its end still get the task's text.
func TestStartedDelegationDropsThePrompt(t *testing.T) {
	d := &delegation{provider: "spawn", req: subagent.StartRequest{Label: "look",
		Prompt: []content.Block{content.Text("look around")}, Subagent: &agent.Subagent{Prompt: "look around"}}}
	d.started()
	if d.req.Prompt != nil {
		t.Fatalf("a started delegation still holds its prompt: %v", d.req.Prompt)
	}
	if got := d.prompt(); got != "look around" {
		t.Fatalf("prompt after the start = %q, want the task's text", got)
	}
	if d.req.Subagent = nil; d.prompt() != "" {
		t.Fatalf("prompt without blocks or text = %q", d.prompt())
	}
}
