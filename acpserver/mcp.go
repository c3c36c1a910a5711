package acpserver

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/mcptool"
)

// sessionServers are the MCP servers a client passed for one session.
type sessionServers struct{ set *mcptool.Set }

// attach gives the session's agent, and the children it creates, the
// servers' tools; they stop when the agent is disposed.
func (m *sessionServers) attach(a *agent.Agent) error {
	detach := mcptool.AttachTree(a, m.set)
	if !a.OnDispose(func() {
		detach()
		m.set.Close(context.Background())
	}) {
		detach()
		return fmt.Errorf("the agent is being disposed")
	}
	return nil
}

// sessionMCP starts the MCP servers of a session/new (nil when there are
// none) and waits, bounded by each server's start timeout and ctx, for
// their tools, so that the session's first prompt lists them. A server
// that does not start is logged and has no tools in this session; a
// server block that cannot be used makes the request invalid.
func (s *server) sessionMCP(ctx context.Context, cwd string, list []acpsdk.McpServer) (*sessionServers, error) {
	if len(list) == 0 {
		return nil, nil
	}
	servers, err := mcpServers(list)
	if err != nil {
		return nil, acpsdk.NewInvalidParams(err.Error())
	}
	opts := s.opts.MCP
	opts.Dir = cwd
	if opts.Log == nil {
		opts.Log = s.opts.Log
	}
	set, err := mcptool.New(servers, opts)
	if err != nil {
		return nil, acpsdk.NewInvalidParams(err.Error())
	}
	set.Ready(ctx)
	for _, st := range set.Status() {
		if st.Err != nil {
			s.opts.Log.Warn("acp: an MCP server of session/new did not start", "server", st.Name, "err", st.Err)
		}
	}
	return &sessionServers{set: set}, nil
}

var unsafeServerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_-]+|__+`) })

// mcpServers turns the servers of a session/new into server blocks. Names
// are made fit for tool names (mcp__<server>__<tool>); values are taken
// literally.
func mcpServers(list []acpsdk.McpServer) (map[string]mcptool.ServerConfig, error) {
	out := make(map[string]mcptool.ServerConfig, len(list))
	for i, m := range list {
		var name string
		cfg := mcptool.ServerConfig{Literal: true}
		switch {
		case m.Stdio != nil:
			name, cfg.Type, cfg.Command, cfg.Args = m.Stdio.Name, mcptool.TypeStdio, m.Stdio.Command, m.Stdio.Args
			cfg.Env = map[string]string{}
			for _, e := range m.Stdio.Env {
				cfg.Env[e.Name] = e.Value
			}
		case m.Http != nil:
			name, cfg.Type, cfg.URL, cfg.Headers = m.Http.Name, mcptool.TypeHTTP, m.Http.Url, headers(m.Http.Headers)
		case m.Sse != nil:
			name, cfg.Type, cfg.URL, cfg.Headers = m.Sse.Name, mcptool.TypeSSE, m.Sse.Url, headers(m.Sse.Headers)
		default:
			return nil, fmt.Errorf("mcpServers[%d]: unsupported transport (dsh takes stdio, http and sse)", i)
		}
		name = unsafeServerName().ReplaceAllString(name, "_")
		if len(name) > 64 {
			name = name[:64]
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("mcpServers[%d]: the name %q is used twice", i, name)
		}
		if err := cfg.Validate(name); err != nil {
			return nil, fmt.Errorf("mcpServers[%d]: %v", i, err)
		}
		out[name] = cfg
	}
	return out, nil
}

func headers(hs []acpsdk.HttpHeader) map[string]string {
	out := make(map[string]string, len(hs))
	for _, h := range hs {
		out[h.Name] = h.Value
	}
	return out
}
