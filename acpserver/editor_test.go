package acpserver_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/tool"
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

// asks records the permission requests, answering allow once.
type asks struct {
	recorder
	requests []acpsdk.RequestPermissionRequest
}

func (a *asks) RequestPermission(ctx context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	a.mu.Lock()
	a.requests = append(a.requests, p)
	a.mu.Unlock()
	return a.recorder.RequestPermission(ctx, p)
}

// An editor sees what runs: tool-call titles name the command or the file,
// file tools carry the file as an absolute location, and an edit's
// completing update (and its ask) carries the change as diff content next
// to the tool's output.
func TestToolCallsSayWhatRuns(t *testing.T) {
	rec := &asks{recorder: recorder{answer: "allow-once"}}
	conn, srv := connect(t, acpserver.Options{}, scripted.New(
		scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"go test ./...\necho done"}`}),
		scripted.ToolCalls("", scripted.Call{ID: "c2", Name: "edit_file", Arguments: `{"path":"notes.txt","old_string":"old line","new_string":"new line"}`}),
		scripted.Text("done")), rec)
	srv.rt.Tools.Register(tool.Definition{Name: "edit_file", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("edited notes.txt"), nil
	}})
	cwd := t.TempDir()
	resp, err := conn.NewSession(context.Background(), acpsdk.NewSessionRequest{Cwd: cwd, McpServers: []acpsdk.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prompt(conn, resp.SessionId, "go"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cwd, "notes.txt")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var starts []*acpsdk.SessionUpdateToolCall
	var ends []*acpsdk.SessionToolCallUpdate
	for _, u := range rec.updates {
		if u.ToolCall != nil {
			starts = append(starts, u.ToolCall)
		}
		if u.ToolCallUpdate != nil {
			ends = append(ends, u.ToolCallUpdate)
		}
	}
	if len(starts) != 2 || len(ends) != 2 {
		t.Fatalf("%d tool calls, %d updates", len(starts), len(ends))
	}
	if starts[0].Title != "bash: go test ./... echo done" || starts[0].Kind != acpsdk.ToolKindExecute {
		t.Errorf("bash: title %q, kind %q", starts[0].Title, starts[0].Kind)
	}
	if len(ends[0].Content) != 1 || ends[0].Content[0].Content == nil || ends[0].Content[0].Content.Content.Text.Text != "ran" {
		t.Errorf("bash's completing update carries no output: %+v", ends[0].Content)
	}
	if starts[1].Title != "edit_file: notes.txt" || starts[1].Kind != acpsdk.ToolKindEdit || len(starts[1].Locations) != 1 || starts[1].Locations[0].Path != path {
		t.Errorf("edit_file: title %q, kind %q, locations %+v", starts[1].Title, starts[1].Kind, starts[1].Locations)
	}
	diffOf := func(c []acpsdk.ToolCallContent) *acpsdk.ToolCallContentDiff {
		for _, x := range c {
			if x.Diff != nil {
				return x.Diff
			}
		}
		return nil
	}
	d := diffOf(ends[1].Content)
	if d == nil || d.Path != path || d.OldText == nil || *d.OldText != "old line" || d.NewText != "new line" || len(ends[1].Locations) != 1 {
		t.Errorf("edit_file's completing update: %+v", ends[1])
	}
	if len(rec.requests) != 2 || diffOf(rec.requests[1].ToolCall.Content) == nil || *rec.requests[1].ToolCall.Title != "edit_file: notes.txt" {
		t.Errorf("the edit's ask: %+v", rec.requests)
	}
}

// After a turn the client gets the context its last model call used
// against the model's window (when known), the title of the session from
// its first prompt (once), and /model switches the route without a model
// call.
func TestUsageTitleAndModelCommand(t *testing.T) {
	rec := &recorder{}
	model := scripted.New(scripted.Text("one"), scripted.Text("two"))
	conn, srv := connect(t, acpserver.Options{
		Routes:        []acpserver.Route{{Provider: "test", Model: "m1"}, {Provider: "test", Model: "m2"}},
		ContextWindow: func(provider, model string) int { return 1000 },
	}, model, rec)
	_ = srv
	id := newSession(t, conn)
	for _, p := range []string{"first  prompt\nof the session", "/model m2", "again"} {
		if resp, err := prompt(conn, id, p); err != nil || resp.StopReason != acpsdk.StopReasonEndTurn {
			t.Fatalf("%q: %+v, %v", p, resp, err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var titles []string
	usages, configs := 0, 0
	for _, u := range rec.updates {
		switch {
		case u.SessionInfoUpdate != nil:
			titles = append(titles, *u.SessionInfoUpdate.Title)
		case u.UsageUpdate != nil:
			usages++
			if u.UsageUpdate.Size != 1000 || u.UsageUpdate.Used != 15 {
				t.Errorf("usage_update %+v", u.UsageUpdate)
			}
		case u.ConfigOptionUpdate != nil:
			configs++
			if cur := u.ConfigOptionUpdate.ConfigOptions[0].Select.CurrentValue; cur != "m2" {
				t.Errorf("after /model m2 the option is %q", cur)
			}
		}
	}
	if len(titles) != 1 || titles[0] != "first prompt of the session" || usages != 2 || configs != 1 {
		t.Errorf("titles %q, %d usage updates, %d config updates", titles, usages, configs)
	}
	if reqs := model.Requests(); len(reqs) != 2 || reqs[1].Model != "m2" {
		t.Errorf("%d model calls, the second to %q", len(reqs), reqs[len(reqs)-1].Model)
	}
}

// A title keeps terminal escapes and line breaks out; an edit too big to
// show twice more gets no diff content (its raw input has it).
func TestToolViewBounds(t *testing.T) {
	rec := &recorder{answer: "allow-once"}
	big := strings.Repeat("x", 300<<10)
	conn, srv := connect(t, acpserver.Options{}, scripted.New(
		scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "bash", Arguments: `{"command":"echo \u001b[31mred\u001b[0m\r\nls"}`}),
		scripted.ToolCalls("", scripted.Call{ID: "c2", Name: "write_file", Arguments: `{"path":"big.txt","content":"` + big + `"}`}),
		scripted.Text("done")), rec)
	srv.rt.Tools.Register(tool.Definition{Name: "write_file", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("wrote"), nil
	}})
	if _, err := prompt(conn, newSession(t, conn), "go"); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var titles []string
	for _, u := range rec.updates {
		if u.ToolCall != nil {
			titles = append(titles, u.ToolCall.Title)
		}
		if u.ToolCallUpdate != nil {
			for _, c := range u.ToolCallUpdate.Content {
				if c.Diff != nil {
					t.Errorf("a %d-byte write got diff content", len(big))
				}
			}
		}
	}
	if len(titles) != 2 || titles[0] != "bash: echo [31mred [0m ls" || titles[1] != "write_file: big.txt" {
		t.Errorf("titles %q", titles)
	}
}
