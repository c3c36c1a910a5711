package agentdef_test

import (
	"errors"
	"os"
	"testing"

	"github.com/dsh-go/dsh/agentdef"
)

// FuzzParse reads arbitrary definition files, as dsh's and as Claude
// Code's: the result is a definition with a name and a description, or an
// *agentdef.Error naming the file; never a panic.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/claude-project/.claude/agents/code-reviewer.md", "testdata/claude-project/.claude/agents/test-runner.md"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, true)
		}
	}
	f.Add([]byte("---\nname: x\ndescription: d\ntools: [read_file]\npermissions: {tools: {bash: ask}}\n---\nbody"), false)
	f.Add([]byte("---\nname: x\ndescription: d\nhooks:\n  PreToolUse: [{matcher: \"(a|b\", hooks: [{command: x}]}]\n---\n"), false)
	f.Add([]byte("---\r\nname: x\r\ndescription: d\r\n---"), true)
	f.Add([]byte("---\nname: &a x\ndescription: *a\noutputSchema: {type: object, properties: {a: {type: [string]}}}\n---\n"), false)
	f.Add([]byte("---\n---\n"), false)
	opts := agentdef.Options{Tools: []string{"bash", "read_file", "write_file"}, Routes: []string{"r"}}
	f.Fuzz(func(t *testing.T, data []byte, claude bool) {
		const path = "/nonexistent/f.md"
		d, _, err := agentdef.Parse(agentdef.Source{Scope: "project", Path: path, Claude: claude}, data, opts)
		if err != nil {
			var de *agentdef.Error
			if !errors.As(err, &de) || de.Path != path || de.Line < 0 {
				t.Fatalf("error %#v", err)
			}
			return
		}
		if d.Name == "" || d.Description == "" {
			t.Fatalf("definition without a name or description: %+v", d)
		}
	})
}
