package mcptool_test

//lint:file-ignore SA1019 the fake serves roots and logging, deprecated as of protocol 2026-07-28, as servers of today do

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fake MCP servers are this test binary, re-executed: FAKE_MCP_MODE
// (read from the file FAKE_MCP_MODE_FILE when set, so that a test can
// change what the next start does) picks the behaviour.
const (
	modeEnv     = "FAKE_MCP_MODE"
	modeFileEnv = "FAKE_MCP_MODE_FILE"
)

// fakeMode returns the fake's mode, "" when this is not a fake.
func fakeMode() string {
	if f := os.Getenv(modeFileEnv); f != "" {
		b, _ := os.ReadFile(f)
		return strings.TrimSpace(string(b))
	}
	return os.Getenv(modeEnv)
}

// runFake runs the fake server of mode on stdin/stdout.
func runFake(mode string) {
	switch mode {
	case "exit": // exits at start
		fmt.Fprintln(os.Stderr, "fake: bad configuration, giving up")
		os.Exit(3)
	case "hang": // never answers initialize
		fmt.Fprintln(os.Stderr, "fake: thinking about it")
		select {}
	case "garbage": // answers initialize with garbage
		io.Copy(io.Discard, io.LimitReader(os.Stdin, 10))
		fmt.Println("this is not JSON-RPC")
		select {}
	}
	srv := fakeServer()
	if mode != "plain" {
		addResources(srv)
	}
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
	}
	os.Exit(0)
}

// png is a 1×1 PNG.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// fakeServer is an MCP server with one tool per behaviour under test.
func fakeServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "1"},
		&mcp.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	object := func(props string) any {
		var v any
		json.Unmarshal([]byte(`{"type":"object","properties":{`+props+`}}`), &v)
		return v
	}
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes its message.", InputSchema: object(`"message":{"type":"string"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Message string }
			json.Unmarshal(req.Params.Arguments, &a)
			return text("echo: " + a.Message), nil
		})
	srv.AddTool(&mcp.Tool{Name: "pid", Description: "Says which process answers.", InputSchema: object(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(fmt.Sprint(os.Getpid())), nil
		})
	srv.AddTool(&mcp.Tool{Name: "env", Description: "Reads a variable.", InputSchema: object(`"name":{"type":"string"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Name string }
			json.Unmarshal(req.Params.Arguments, &a)
			v, ok := os.LookupEnv(a.Name)
			return text(fmt.Sprintf("%s=%q %v", a.Name, v, ok)), nil
		})
	srv.AddTool(&mcp.Tool{Name: "picture", Description: "Returns an image.", InputSchema: object(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a dot:"},
				&mcp.ImageContent{MIMEType: "image/png", Data: png}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "weather", Description: "Structured content only.", InputSchema: object(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]any{"temperature": 21, "sky": "clear"}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Reports an error.", InputSchema: object(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the disk is on fire"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "progress", Description: "Reports progress, then answers.", InputSchema: object(``)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1; i <= 3; i++ {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
			}
			return text("done"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "block", Description: "Blocks until cancelled.", InputSchema: object(``)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Message: "blocking"})
			<-ctx.Done()
			return text("cancelled"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "crash", Description: "Crashes the server mid-call.", InputSchema: object(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "fake: segmentation fault (not really)")
			os.Exit(2)
			return nil, nil
		})
	srv.AddTool(&mcp.Tool{Name: "big", Description: "Returns 160 KB of text, then an image.", InputSchema: object(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "HEAD " + strings.Repeat("0123456789abcdef\n", 10000)},
				&mcp.ImageContent{MIMEType: "image/png", Data: png}, &mcp.TextContent{Text: " TAIL"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "roots", Description: "Lists the client's roots.", InputSchema: object(``)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if len(req.Params.InputResponses) == 0 { // ask the client (a multi round-trip request)
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil
			}
			var uris []string
			for _, r := range req.Params.InputResponses["roots"].(*mcp.ListRootsResult).Roots {
				uris = append(uris, r.URI)
			}
			slices.Sort(uris)
			return text(strings.Join(uris, " ")), nil
		})
	srv.AddTool(&mcp.Tool{Name: "grow", Description: "Adds the tool extra; its list_changed notification goes before the result.",
		InputSchema: object(``)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			srv.AddTool(&mcp.Tool{Name: "extra", Description: "Added later.", InputSchema: object(``)},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("extra"), nil })
			time.Sleep(200 * time.Millisecond) // the SDK sends the notification 10ms after the change
			return text("grown"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "log", Description: "Logs twice (and flood times more), then answers.", InputSchema: object(`"flood":{"type":"integer"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Flood int }
			json.Unmarshal(req.Params.Arguments, &a)
			for i := range a.Flood {
				req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprint("flood ", i)})
			}
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "not asked for"})
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "disk", Data: "almost full"})
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "error", Data: map[string]any{"free": 0}})
			return text("logged"), nil
		})
	srv.AddTool(&mcp.Tool{Name: "weird.name with spaces", Description: strings.Repeat("long ", 1000),
		InputSchema: object(`"x":{"$ref":"#/$defs/missing"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("weird"), nil
		})
	return srv
}

// addResources gives the fake a text resource of 160 KB, a binary one and
// a template, and a tool that links to the text one.
func addResources(srv *mcp.Server) {
	big := "BEGIN " + strings.Repeat("0123456789abcdef\n", 10000) + " END"
	srv.AddResource(&mcp.Resource{URI: "fake://notes", Name: "notes", MIMEType: "text/plain", Description: "Long\nnotes."},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: big}}}, nil
		})
	srv.AddResource(&mcp.Resource{URI: "fake://dot.png", Name: "dot", MIMEType: "image/png"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "image/png", Blob: png}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "fake://page/{n}", Name: "page"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "page " + req.Params.URI}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "link", Description: "Links to the notes.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "fake://notes", Name: "notes"}}}, nil
		})
}
