package mcpserver_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/mcpserver"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
)

// FuzzServe feeds arbitrary client frames to `dsh mcp` over stdio
// (ServeStdio, its gate included, with a frame limit of 512 bytes): it must
// answer or reject them, never panic, never end the connection before the
// input does (ServeStdio returns nil), and return once the input ends,
// leaving no agent behind.
func FuzzServe(f *testing.F) {
	const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	for _, seed := range []string{
		init + `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		init + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delegate","arguments":{"description":"d","prompt":"p"},"_meta":{"progressToken":7}}}`,
		init + `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delegate","arguments":{"description":"d","prompt":"p","run_in_background":true}}}` + "\n" +
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"subagent-1","wait":true,"timeout_ms":50}}}`,
		init + `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delegate","arguments":{"prompt":5}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`,
		init + `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"task_kill","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"nope"}`,
		"not json\n{}\n[1,2]",
		init + "{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}\n\xff\xfe\n" + `{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		init + `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"delegate","arguments":{"description":"d","prompt":"` +
			strings.Repeat("p", 600) + `"}}}`,
	} {
		f.Add([]byte(seed + "\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rt, err := dsh.New(dsh.Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		rt.LLM.Register("test", scripted.Repeat(scripted.Text("ok")))
		p, _ := inproc.NewSpawn(rt.Agents)
		rt.Subagents.Register(p)
		task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{})
		inst := subagenttool.Config{Provider: "spawn", ToolName: "delegate"}
		subagenttool.Mount(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events, Log: quiet()}, inst)
		srv, err := mcpserver.New(mcpserver.Options{Agents: rt.Agents, Subagents: rt.Subagents, Tools: rt.Tools, Events: rt.Events,
			Instances: []subagenttool.Config{inst}, AgentOptions: agent.Options{Provider: "test"}, Cwd: "/tmp", Log: quiet(), MaxFrame: 512})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- srv.ServeStdio(ctx, bytes.NewReader(data), discard{})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("ServeStdio: %v for %q", err, strings.TrimSpace(string(data)))
			}
		case <-ctx.Done():
			t.Fatalf("ServeStdio did not return after the input ended: %q", strings.TrimSpace(string(data)))
		}
		if err := srv.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(rt.Agents.List()); n != 0 {
			t.Fatalf("%d agents left", n)
		}
		rt.Close(context.Background())
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }
