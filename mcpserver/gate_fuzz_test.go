package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/internal/jsonrpcframe/jsonrpcframetest"
)

// FuzzGate feeds arbitrary client input to the gate in front of the MCP
// SDK's stdio transport. Properties: it returns nil when the input ends; it
// writes whole lines only, at most one per input line; every frame it
// passes on is within the limit and is read by the SDK's transport without
// an error (an error there ends the connection); what it writes to the
// client is a JSON-RPC error response.
func FuzzGate(f *testing.F) {
	const limit = 256
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"subagent","arguments":{"prompt":"p"}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"action":"accept"}}`,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":5,"error":"no"}`,
		`{"jsonrpc":"2.0","id":6,"result":{"pad":"` + strings.Repeat("y", 300) + `"}}`,
		`{"params":{"pad":"` + strings.Repeat("z", 300) + `"},"id":7,"method":"x"}`,
		"not json\n[1,2]\n{}\nnull\n\"s\"\n{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}",
		`{"jsonrpc":"1.0","id":9,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0"}` + "\n\xff\xfe",
		`{"jsonrpc":"2.0","id":1,"method":` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}` + "\n" + `{"JSONRPC":"2.0","ID":1,"Method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + "}",
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\r\n\n   \n",
	} {
		f.Add([]byte(seed + "\n"))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		toSDK, toClient := &jsonrpcframetest.LineWriter{}, &jsonrpcframetest.LineWriter{}
		g := &gate{limit: limit, reply: toClient, log: quiet}
		if err := g.run(bytes.NewReader(data), toSDK); err != nil {
			t.Fatalf("run: %v", err)
		}
		if n := len(toSDK.Lines) + len(toClient.Lines); n > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d frames written for %d input lines", n, bytes.Count(data, []byte("\n"))+1)
		}
		var in bytes.Buffer
		for _, line := range toSDK.Lines {
			if len(line) > limit {
				t.Fatalf("an over-limit frame passed: %q", line)
			}
			in.Write(line)
			in.WriteByte('\n')
		}
		conn, err := (&mcp.IOTransport{Reader: io.NopCloser(&in), Writer: nopWriteCloser{}, MaxLineLength: -1}).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for {
			if _, err := conn.Read(context.Background()); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("the SDK cannot read what the gate passed (%v):\n%s", err, in.String())
			}
		}
		for _, line := range toClient.Lines {
			var r struct {
				JSONRPC string           `json:"jsonrpc"`
				ID      *json.RawMessage `json:"id"`
				Error   *replyError      `json:"error"`
			}
			if json.Unmarshal(line, &r) != nil || r.JSONRPC != "2.0" || r.Error == nil || r.Error.Message == "" ||
				!bytes.Contains(line, []byte(`"id":`)) {
				t.Fatalf("written to the client: %q", line)
			}
		}
	})
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }
