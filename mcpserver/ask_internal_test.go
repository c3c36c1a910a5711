package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dsh-go/dsh/permission"
)

// A hostile model's call cannot make a huge ask, or one that carries
// terminal escapes or broken text to the client's screen.
func TestAskMessageIsBoundedAndPlain(t *testing.T) {
	huge := `{"command":"` + strings.Repeat("é\x1b[2J\x00", 200000) + "\xff" + `"}`
	msg := askMessage(permission.Request{Agent: []string{"spawn · clean"}, Tool: "bash", Arguments: json.RawMessage(huge)})
	if len(msg) > maxAskArguments+200 || !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x1b\x00") {
		t.Fatalf("ask of %d bytes, valid UTF-8 %v: %q…", len(msg), utf8.ValidString(msg), msg[:80])
	}
	if !strings.HasPrefix(msg, "dsh: spawn · clean wants to run bash with {") || !strings.Contains(msg, "bytes in all)") {
		t.Fatalf("ask %q", msg)
	}
}

// FuzzAskMessage: whatever a model puts in a call, the ask that quotes it
// is bounded, valid UTF-8 and free of control characters.
func FuzzAskMessage(f *testing.F) {
	f.Add("bash", `{"command":"ls"}`, "spawn · fix")
	f.Add("write_file", `{"path":"\u001b[2J","content":"`+strings.Repeat("x", 2000)+`"}`, "")
	f.Add("t", "\xff\xfe\x00é", "a\nb")
	f.Fuzz(func(t *testing.T, tool, args, who string) {
		req := permission.Request{Tool: tool, Arguments: json.RawMessage(args)}
		if who != "" {
			req.Agent = []string{who}
		}
		msg := askMessage(req)
		if len(msg) > len(tool)+maxAskWho+maxAskArguments+200 {
			t.Fatalf("ask of %d bytes for %d bytes of arguments", len(msg), len(args))
		}
		if !utf8.ValidString(msg) || strings.IndexFunc(msg, unicode.IsControl) >= 0 {
			t.Fatalf("the ask %q is not plain text", msg)
		}
	})
}
