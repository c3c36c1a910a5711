package acpserver_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/llm/scripted"
)

// FuzzServe feeds arbitrary client frames to the ACP server (with a frame
// limit of 512 bytes, so that over-limit frames occur): it must answer or
// reject them, never panic, and return nil once the input ends, leaving no
// agent behind.
func FuzzServe(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[{"name":"s","command":"srv","args":[],"env":[]},{"type":"http","name":"h","url":"x","headers":[]}]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}`,
		`{"jsonrpc":"2.0","id":"a","method":"nope"}`,
		`{"id":3,"result":{}}`,
		"not json\n{}\n[1,2]",
		`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"text","text":"` + strings.Repeat("x", 600) + `"}]}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"x"}}`,
	} {
		f.Add([]byte(seed + "\n"))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		rt, err := dsh.New(dsh.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		rt.LLM.Register("test", scripted.Repeat(scripted.Text("ok")))
		// A prompt naming the session created by a session/new in the input
		// cannot be known in advance; "cwd" values point at /tmp. MCP
		// servers the input names run nothing and reach nothing.
		input := bytes.ReplaceAll(data, []byte(`"cwd":"`), []byte(`"cwd":"/tmp`))
		input = bytes.ReplaceAll(input, []byte(`"command":"`), []byte(`"command":"/nonexistent/`))
		input = bytes.ReplaceAll(input, []byte(`"url":"`), []byte(`"url":"http://127.0.0.1:1/`))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- acpserver.Serve(ctx, acpserver.Options{Agents: rt.Agents, AgentOptions: agent.Options{Provider: "test"}, MaxFrame: 512, Log: quiet},
				bytes.NewReader(input), io.Discard)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Serve: %v", err)
			}
		case <-ctx.Done():
			t.Fatalf("Serve did not return after the input ended: %q", strings.TrimSpace(string(data)))
		}
		if n := len(rt.Agents.List()); n != 0 {
			t.Fatalf("%d agents left", n)
		}
		rt.Close(context.Background())
	})
}
