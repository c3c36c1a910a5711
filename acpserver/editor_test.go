package acpserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/llm/scripted"
)

// An unset key is an error the client shows: session/new is refused with
// auth_required and a message naming the variable (Ready), and a turn whose
// model call finds no key fails the prompt the same way, not with -32603
// "Internal error" and the text hidden in data.
func TestMissingKeyIsShown(t *testing.T) {
	conn, _ := connect(t, acpserver.Options{Ready: func() error { return errors.New("DEEPSEEK_API_KEY is not set") }}, scripted.New(), &recorder{})
	_, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{}})
	var re *acpsdk.RequestError
	if !errors.As(err, &re) || re.Code != -32000 || !strings.Contains(re.Message, "DEEPSEEK_API_KEY is not set") {
		t.Errorf("session/new: %#v", err)
	}

	conn, _ = serve(t, &recorder{}, scripted.Fail("MISSING_CREDENTIAL", "DEEPSEEK_API_KEY is not set"))
	_, err = prompt(conn, newSession(t, conn), "hi")
	if !errors.As(err, &re) || re.Code != -32000 || !strings.Contains(re.Message, "DEEPSEEK_API_KEY is not set") {
		t.Errorf("prompt: %#v", err)
	}
	conn, _ = serve(t, &recorder{}, scripted.Fail("SERVER", "the model is down"))
	_, err = prompt(conn, newSession(t, conn), "hi")
	if !errors.As(err, &re) || re.Code != -32603 || !strings.Contains(re.Message, "the model is down (SERVER)") {
		t.Errorf("prompt: %#v", err)
	}
}
