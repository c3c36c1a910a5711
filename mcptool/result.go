package mcptool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/tool"
)

// Bounds on what a server can make dsh hold or show the model.
const (
	// MaxTools is the most tools dsh takes from one server.
	MaxTools = 512
	// MaxDescription bounds a tool's description, in bytes.
	MaxDescription = 2048
	// maxStructured bounds the structured content a result's meta keeps,
	// in bytes.
	maxStructured = 256 << 10
	// maxToolName is the longest tool name model APIs accept.
	maxToolName = 64
)

// Prefix starts the name of every MCP tool: mcp__<server>__<tool>.
const Prefix = "mcp__"

var unsafeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_-]`) })

// ToolName returns the dsh name of a server's tool, mcp__<server>__<tool>
// (server as ServerPrefix gives it):
// characters model APIs refuse become _, and a name longer than 64 bytes is
// cut and ended with a hash of the tool's own name, to keep it distinct.
func ToolName(server, name string) string {
	n := Prefix + server + "__" + unsafeName().ReplaceAllString(name, "_")
	if len(n) <= maxToolName {
		return n
	}
	return hashed(n, name)
}

// hashed cuts n to leave room for a hash of original, and appends it.
func hashed(n, original string) string {
	sum := sha256.Sum256([]byte(original))
	tail := "_" + hex.EncodeToString(sum[:4])
	return n[:min(len(n), maxToolName-len(tail))] + tail
}

// parameters reads a server's input schema as a tool's parameters: an
// object schema that resolves (the draft-07 and 2020-12 drafts). A schema
// without a type describes an object.
func parameters(raw any) (*jsonschema.Schema, error) {
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	if s.Type == "" && len(s.Types) == 0 {
		s.Type = "object"
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("the input schema describes %s, not an object", strings.Join(append(s.Types, s.Type), " "))
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, err
	}
	return &s, nil
}

// description is a tool's description for the model, bounded.
func description(t *mcp.Tool) string {
	d := t.Description
	if d == "" {
		d = t.Title
	}
	return cut(d, MaxDescription)
}

// cut returns s cut to at most n bytes on a rune boundary, marked when cut.
func cut(s string, n int) string {
	const marker = "…[truncated]"
	if len(s) <= n {
		return s
	}
	i := max(n-len(marker), 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + marker
}

// resultMeta is the tool-result meta of an MCP call.
type resultMeta struct {
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
}

// toResult maps a call's result onto a dsh tool result: text as text,
// an image as an image block with a text line describing it (the model
// adapters pass text), audio and resources as text lines, structured
// content into the meta (and as JSON text when the server sent no text),
// isError as an error result; a resource link names the tool that reads
// it. Text over limit bytes (the tool result limit
// of the built-in tools) keeps its head and tail, and says what was cut.
func toResult(res *mcp.CallToolResult, limit int, server string) tool.Result {
	var blocks []content.Block
	text := func(s string) { blocks = append(blocks, content.Text(s)) }
	hasText := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			text(c.Text)
			hasText = true
		case *mcp.ImageContent:
			sum := sha256.Sum256(c.Data)
			blocks = append(blocks, content.Block{Type: content.TypeImage, Image: &content.ImageRef{
				ID: "sha256:" + hex.EncodeToString(sum[:]), MediaType: c.MIMEType, Bytes: int64(len(c.Data))}})
			text(fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			text(fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			text(fmt.Sprintf("[resource link: %s %s (%s reads it: server %q, uri %q)]", c.Name, c.URI, ReadResourceTool, server, c.URI))
		case *mcp.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				text(r.Text)
				hasText = true
			default:
				text(fmt.Sprintf("[resource: %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			text(fmt.Sprintf("[%T content]", c))
		}
	}
	var r tool.Result
	if res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			if !hasText {
				text(string(raw))
			}
			if len(raw) <= maxStructured {
				r.Meta, _ = json.Marshal(resultMeta{StructuredContent: raw})
			}
		}
	}
	blocks = capText(blocks, limit, "result")
	if res.IsError {
		r.IsError, r.Code = true, CodeToolError
		if len(blocks) == 0 || blocks[0].Type != content.TypeText {
			blocks = append([]content.Block{content.Text("the tool reported an error")}, blocks...)
		}
		blocks[0].Text = "Error: " + blocks[0].Text
	}
	r.Content = blocks
	return r
}

// capText returns blocks with their text bounded by limit bytes: when the
// text is longer, its head and tail become one text block, in place of the
// first, that says how much of the result (what) was cut, and that dsh keeps no
// copy of the rest; the other blocks (images) stay.
func capText(blocks []content.Block, limit int, what string) []content.Block {
	all := content.JoinText(blocks)
	if len(all) <= limit {
		return blocks
	}
	head, tail := limit/2, len(all)-(limit-limit/2)
	for head > 0 && !utf8.RuneStart(all[head]) {
		head--
	}
	for tail < len(all) && !utf8.RuneStart(all[tail]) {
		tail++
	}
	capped := content.Text(fmt.Sprintf("%s\n[… %d of the %s's %d bytes cut here (the tool result limit is %d bytes, tools.outputLimit); "+
		"dsh keeps no copy of the whole %s: ask the server for less (a range, a page, a narrower query) …]\n%s",
		all[:head], tail-head, what, len(all), limit, what, all[tail:]))
	out := make([]content.Block, 0, len(blocks))
	placed := false
	for _, b := range blocks {
		switch {
		case b.Type != content.TypeText:
			out = append(out, b)
		case !placed:
			out, placed = append(out, capped), true
		}
	}
	return out
}
