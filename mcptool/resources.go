package mcptool

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/tool"
)

// The tools that list and read the servers' resources, offered once a
// server that has resources is connected.
const (
	ListResourcesTool = "list_mcp_resources"
	ReadResourceTool  = "read_mcp_resource"
)

const (
	// resourcesKey keys the resource tools among a target's registrations
	// (no server is called "").
	resourcesKey = ""
	// maxResources is the most resources, and templates, a listing shows
	// per server.
	maxResources = 500
	// maxResourceLine bounds a resource's description in a listing.
	maxResourceLine = 300
)

type listResourcesArgs struct {
	Server string `json:"server,omitempty" jsonschema:"the MCP server whose resources to list (default: every server that has resources)"`
}

type readResourceArgs struct {
	Server string `json:"server" jsonschema:"the MCP server that has the resource, as list_mcp_resources or a resource link names it"`
	URI    string `json:"uri" jsonschema:"the resource's URI"`
}

// offerResources registers the resource tools in every target, once.
func (s *Set) offerResources() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resourcesOffered {
		return
	}
	s.resourcesOffered = true
	for _, t := range s.targets {
		s.registerLocked(t, resourcesKey, s.resourceTools())
	}
}

// resourceTools are list_mcp_resources and read_mcp_resource.
func (s *Set) resourceTools() []tool.Definition {
	return []tool.Definition{
		tool.Func(ListResourcesTool, "Lists the resources (and resource templates) of the MCP servers: their URIs, names, "+
			"types and descriptions. Read one with "+ReadResourceTool+".", true, s.listResources),
		tool.Func(ReadResourceTool, "Reads a resource of an MCP server by its URI (from "+ListResourcesTool+
			" or a resource link in a tool's result). Text comes back as text, capped like other tool results; "+
			"binary content is summarised.", true, s.readResource),
	}
}

// withResources returns the servers that have resources and whose tools
// the caller may use: the one named (by its configured or its tool name),
// else every connected one.
func (s *Set) withResources(call tool.Call, name string) ([]*server, error) {
	var all []*server
	for _, srv := range s.servers {
		srv.mu.Lock()
		has := srv.resources
		srv.mu.Unlock()
		if has && sees(call, srv) {
			all = append(all, srv)
		}
		if name != "" && (srv.name == name || srv.toolPrefix == name) {
			if !sees(call, srv) {
				return nil, tool.Errorf(tool.CodeDenied, "the tools of MCP server %q are not this agent's (its tool filter leaves them out)", srv.name)
			}
			return []*server{srv}, nil
		}
	}
	if name == "" {
		return all, nil
	}
	names := make([]string, len(all))
	for i, srv := range all {
		names[i] = fmt.Sprintf("%q", srv.name)
	}
	return nil, tool.Errorf(tool.CodeInvalidArgs, "no MCP server %q; the servers with resources are %s", name, orNone(names))
}

// sees reports whether the calling agent may use srv: whether it sees one
// of srv's tools (through its tool filter), or srv has none to filter.
func sees(call tool.Call, srv *server) bool {
	caller, ok := call.Caller.(interface{ Tools() *tool.Scope })
	defs := srv.definitions()
	if !ok || len(defs) == 0 {
		return true
	}
	scope := caller.Tools()
	for _, d := range defs {
		if scope.Has(d.Name) {
			return true
		}
	}
	return false
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// listResources lists the resources and templates of the servers.
func (s *Set) listResources(ctx context.Context, call tool.Call, args listResourcesArgs) (tool.Result, error) {
	servers, err := s.withResources(call, args.Server)
	if err != nil {
		return tool.Result{}, err
	}
	var b strings.Builder
	for _, srv := range servers {
		var resources []*mcp.Resource
		var templates []*mcp.ResourceTemplate
		err := srv.request(ctx, "listing the resources", func(ctx context.Context, c *conn) error {
			if caps := c.session.InitializeResult().Capabilities; caps == nil || caps.Resources == nil {
				return nil
			}
			for r, err := range c.session.Resources(ctx, nil) {
				if err != nil {
					return err
				}
				if resources = append(resources, r); len(resources) == maxResources {
					break
				}
			}
			for r, err := range c.session.ResourceTemplates(ctx, nil) {
				if err != nil {
					return nil // templates are optional
				}
				if templates = append(templates, r); len(templates) == maxResources {
					break
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintf(&b, "server %q: %v\n", srv.name, err)
			continue
		}
		fmt.Fprintf(&b, "server %q: %d resources", srv.name, len(resources))
		if len(resources) == maxResources {
			b.WriteString(" (the first ones)")
		}
		b.WriteString("\n")
		for _, r := range resources {
			fmt.Fprintf(&b, "- %s  %s%s%s\n", r.URI, r.Name, kind(r.MIMEType), about(r.Description))
		}
		if len(templates) > 0 {
			fmt.Fprintf(&b, "server %q: %d resource templates (fill the {…} parts to make a URI)\n", srv.name, len(templates))
			for _, r := range templates {
				fmt.Fprintf(&b, "- %s  %s%s%s\n", r.URITemplate, r.Name, kind(r.MIMEType), about(r.Description))
			}
		}
	}
	if len(servers) == 0 {
		b.WriteString("no connected MCP server has resources")
	}
	return tool.Result{Content: capText([]content.Block{content.Text(b.String())}, s.opts.OutputLimit, "listing")}, nil
}

func kind(mime string) string {
	if mime == "" {
		return ""
	}
	return " (" + mime + ")"
}

func about(d string) string {
	if d == "" {
		return ""
	}
	return ": " + strings.Join(strings.Fields(cut(d, maxResourceLine)), " ")
}

// readResource reads a resource: text as text, capped; binary content
// summarised.
func (s *Set) readResource(ctx context.Context, call tool.Call, args readResourceArgs) (tool.Result, error) {
	if args.Server == "" || args.URI == "" {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "give the server and the uri of the resource")
	}
	servers, err := s.withResources(call, args.Server)
	if err != nil {
		return tool.Result{}, err
	}
	srv := servers[0]
	var res *mcp.ReadResourceResult
	if err := srv.request(ctx, "reading "+args.URI, func(ctx context.Context, c *conn) (err error) {
		res, err = c.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: args.URI})
		return err
	}); err != nil {
		return tool.Result{}, err
	}
	var blocks []content.Block
	for _, c := range res.Contents {
		if c == nil {
			continue
		}
		if len(res.Contents) > 1 {
			blocks = append(blocks, content.Text(fmt.Sprintf("--- %s%s\n", c.URI, kind(c.MIMEType))))
		}
		if c.Blob != nil {
			blocks = append(blocks, content.Text(fmt.Sprintf("[binary resource: %s%s, %d bytes; dsh does not show binary content]\n",
				c.URI, kind(c.MIMEType), len(c.Blob))))
			continue
		}
		blocks = append(blocks, content.Text(c.Text))
	}
	if len(blocks) == 0 {
		blocks = append(blocks, content.Text("(the resource is empty)"))
	}
	return tool.Result{Content: capText(blocks, s.opts.OutputLimit, "resource")}, nil
}
