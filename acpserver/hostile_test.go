package acpserver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/llm/scripted"
)

// N18: a request whose id is an object got no reply at all. Any id that is
// not a string or a number gets -32600 with id null, and the connection
// goes on; string and number ids are answered as before.
func TestRequestIDsThatAreNotStringsOrNumbers(t *testing.T) {
	cl := rawClient(t, acpserver.Options{}, scripted.New())
	cl.send(request(1, "initialize", initialize))
	cl.response("1")
	for _, id := range []string{`{"a":1}`, `[1]`, `true`, `false`} {
		cl.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/new","params":%s}`, id, newSessionParams(t)))
		f := cl.next()
		if string(f.ID) != "null" {
			t.Fatalf("id %s: reply %+v, want id null", id, f)
		}
		wantError(t, f, -32600, "the id must be a string or a number")
	}
	for _, id := range []string{`"s-1"`, `7`, `-2`} {
		cl.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/new","params":%s}`, id, newSessionParams(t)))
		if f, _ := cl.response(id); f.Error != nil || !strings.Contains(string(f.Result), "sessionId") {
			t.Fatalf("id %s: %+v", id, f)
		}
	}
}

// N18: a client's `_meta.dsh` was recorded as sent (depth 99, -1000 made 0,
// parentSession "../../../etc"). Now session/new and session/load refuse
// it with -32602 naming the field; a dsh parent's well-formed meta is
// taken.
func TestClientMetaIsValidated(t *testing.T) {
	cl := rawClient(t, acpserver.Options{}, scripted.New())
	cl.send(request(1, "initialize", initialize))
	cl.response("1")
	cwd := t.TempDir()
	for i, c := range []struct{ meta, says string }{
		{`{"depth":99}`, "_meta.dsh.depth must be within 0..64, got 99"},
		{`{"depth":-1000}`, "_meta.dsh.depth must be within 0..64, got -1000"},
		{`{"parentSession":"../../../etc"}`, `_meta.dsh.parentSession "../../../etc" is not a session id`},
		{`{"parentSession":"a/b"}`, "_meta.dsh.parentSession"},
		{`{"parentSession":".."}`, "_meta.dsh.parentSession"},
		{`{"tokenBudget":-5}`, "_meta.dsh.tokenBudget must not be negative"},
		{`{"depth":"deep"}`, "_meta.dsh is not dsh's session extension"},
		{`"x"`, "_meta.dsh is not dsh's session extension"},
	} {
		id := 10 + i
		cl.send(request(id, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[],"_meta":{"dsh":%s}}`, cwd, c.meta)))
		f, _ := cl.response(fmt.Sprint(id))
		wantError(t, f, -32602, c.says)
		cl.send(request(100+id, "session/load", fmt.Sprintf(`{"sessionId":"s","cwd":%q,"mcpServers":[],"_meta":{"dsh":%s}}`, cwd, c.meta)))
		f, _ = cl.response(fmt.Sprint(100 + id))
		wantError(t, f, -32602, c.says)
	}
	cl.send(request(2, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[],"_meta":{"dsh":{"parentSession":"4b0c2d1e-0000-4000-8000-000000000001","depth":2},"other":1}}`, cwd)))
	if f, _ := cl.response("2"); f.Error != nil || !strings.Contains(string(f.Result), "sessionId") {
		t.Fatalf("a dsh parent's meta: %+v", f)
	}
}
