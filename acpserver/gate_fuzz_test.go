package acpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/internal/jsonrpcframe/jsonrpcframetest"
)

// FuzzGate feeds arbitrary client input to the gate in front of the SDK.
// Properties: it returns nil when the input ends; it writes whole lines
// only, at most one per input line; what it passes to the SDK is valid JSON
// within the frame limit, and before an initialize request only
// initialize requests and responses; what it writes to the client is a
// JSON-RPC error response; it asks admit only about session/prompt requests
// and cancels only on session/cancel notifications.
func FuzzGate(f *testing.F) {
	const limit = 256
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}`,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"` + strings.Repeat("x", 300) + `"}]}}`,
		`{"jsonrpc":"2.0","id":6,"result":{"pad":"` + strings.Repeat("y", 300) + `"}}`,
		`{"params":{"pad":"` + strings.Repeat("z", 300) + `"},"id":7,"method":"x"}`,
		"not json\n[1,2]\n{}\nnull\n\"s\"\n{\"id\":{\"a\":1},\"method\":\"m\"}",
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"initialize\"}\r\n\n   \n",
	} {
		f.Add([]byte(seed + "\n"))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var prompts int
		toSDK, toClient := &jsonrpcframetest.LineWriter{}, &jsonrpcframetest.LineWriter{}
		var admitted, cancelled []json.RawMessage
		g := &gate{limit: limit, reply: toClient, log: quiet,
			admit: func(params json.RawMessage) *acpsdk.RequestError {
				admitted = append(admitted, params)
				if prompts++; prompts%2 == 0 {
					return acpsdk.NewInvalidParams("busy")
				}
				return nil
			},
			cancel: func(params json.RawMessage) { cancelled = append(cancelled, params) }}
		if err := g.run(bytes.NewReader(data), toSDK); err != nil {
			t.Fatalf("run: %v", err)
		}
		if n := len(toSDK.Lines) + len(toClient.Lines); n > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d frames written for %d input lines", n, bytes.Count(data, []byte("\n"))+1)
		}
		initialized := false
		for _, line := range toSDK.Lines {
			var m message
			if len(line) > limit || json.Unmarshal(line, &m) != nil {
				t.Fatalf("passed to the SDK: %q", line)
			}
			if m.ID != nil && m.Method != "" && !initialized && m.Method != acpsdk.AgentMethodInitialize {
				t.Fatalf("a %s request reached the SDK before initialize", m.Method)
			}
			if m.ID == nil && m.Method != "" && m.Method != "$/cancel_request" {
				t.Fatalf("a %s notification reached the SDK", m.Method)
			}
			initialized = initialized || m.Method == acpsdk.AgentMethodInitialize
		}
		for _, line := range toClient.Lines {
			var r struct {
				JSONRPC string               `json:"jsonrpc"`
				ID      *json.RawMessage     `json:"id"`
				Error   *acpsdk.RequestError `json:"error"`
			}
			if json.Unmarshal(line, &r) != nil || r.JSONRPC != "2.0" || r.Error == nil || !bytes.Contains(line, []byte(`"id":`)) {
				t.Fatalf("written to the client: %q", line)
			}
		}
		for _, p := range admitted {
			if len(p) > limit {
				t.Fatalf("admit asked about an over-limit frame")
			}
		}
		if len(cancelled) > bytes.Count(data, []byte(acpsdk.AgentMethodSessionCancel)) {
			t.Fatalf("%d cancels", len(cancelled))
		}
	})
}
