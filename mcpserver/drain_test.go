package mcpserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/internal/jsonrpcframe/jsonrpcframetest"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/mcpserver"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
)

// A client that writes its requests and closes its input at once (a
// script's `printf … | dsh mcp`) gets every answer: the end of the input
// waits for the requests it held, a delegation's included.
func TestStdioAnswersRequestsPendingAtEndOfInput(t *testing.T) {
	rt, err := dsh.New(dsh.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	rt.LLM.Register("test", scripted.Repeat(scripted.Text("child answer")))
	p, _ := inproc.NewSpawn(rt.Agents)
	rt.Subagents.Register(p)
	task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{})
	inst := subagenttool.Config{Provider: "spawn", ToolName: "delegate"}
	subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events, Log: quiet()}, inst)
	srv, err := mcpserver.New(mcpserver.Options{Agents: rt.Agents, Subagents: rt.Subagents, Tools: rt.Tools, Events: rt.Events,
		Instances: []subagenttool.Config{inst}, AgentOptions: agent.Options{Provider: "test"}, Cwd: t.TempDir(), Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"s","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delegate","arguments":{"description":"d","prompt":"p"}}}`,
	}, "\n") + "\n"
	for range 5 { // it was dropped about one time in two
		var out jsonrpcframetest.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := srv.ServeStdio(ctx, strings.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		cancel()
		got := out.String()
		for _, want := range []string{`"id":1,"result"`, `"id":2,"result"`, `"id":3,"result"`, "child answer"} {
			if !strings.Contains(got, want) {
				t.Fatalf("the output lacks %s:\n%s", want, got)
			}
		}
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
