package hook_test

import (
	"os"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
)

// The transcript is Claude Code's shape, appended as the conversation
// grows and written anew when it no longer continues what was written
// (a compaction).
func TestTranscript(t *testing.T) {
	tr, err := hook.NewTranscript("s1", "/proj")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Remove()
	user := content.UserText("fix it")
	call := content.AssistantMessage("p", "m1", []content.Block{content.Text("on it"), content.ToolCall("c1", "edit_file", `{"path":"a.go","old_string":"x","new_string":"y"}`)})
	result := content.ToolResultMessage("c1", []content.Block{content.Text("edited")}, false)
	if err := tr.Sync([]content.Message{user, call}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Sync([]content.Message{user, call, result}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(tr.Path())
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 3 {
		t.Fatalf("transcript:\n%s", got)
	}
	for _, tt := range []struct {
		line int
		want string
	}{
		{0, `"type":"user","uuid":"` + user.ID + `","parentUuid":null,"sessionId":"s1","cwd":"/proj"`},
		{1, `"message":{"role":"assistant","model":"m1","content":[{"text":"on it","type":"text"},{"id":"c1","input":{"file_path":"/proj/a.go","new_string":"y","old_string":"x"},"name":"Edit","type":"tool_use"}]}`},
		{2, `"parentUuid":"` + call.ID + `"`},
		{2, `{"content":"edited","is_error":false,"tool_use_id":"c1","type":"tool_result"}`},
	} {
		if !strings.Contains(lines[tt.line], tt.want) {
			t.Errorf("line %d lacks %s:\n%s", tt.line+1, tt.want, lines[tt.line])
		}
	}
	compacted := content.UserText("summary")
	if err := tr.Sync([]content.Message{compacted}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(tr.Path()); strings.Count(string(got), "\n") != 1 || !strings.Contains(string(got), "summary") {
		t.Errorf("after a compaction:\n%s", got)
	}
}
