package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
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
