package acpserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/session"
)

// codeResourceNotFound is ACP's error code for an unknown resource, such as
// a session id session/load cannot find.
const codeResourceNotFound = -32002

var _ acpsdk.AgentLoader = (*server)(nil)

// LoadSession implements acpsdk.AgentLoader: it continues a stored session
// (one this server or an earlier `dsh acp` created, in any process) from
// its log alone. The stored conversation is replayed as session/update
// notifications (user messages, the agent's text and thoughts, tool calls
// and their results) before the answer; then the session takes prompts
// like a new one. An interrupted last turn is closed as crash repair closes
// it. A dsh parent's `_meta` narrows the policy and budget as for
// session/new (lineage and depth come from the stored session).
func (s *server) LoadSession(ctx context.Context, p acpsdk.LoadSessionRequest) (acpsdk.LoadSessionResponse, error) {
	if err := checkWorkspace(p.Cwd, p.AdditionalDirectories); err != nil {
		return acpsdk.LoadSessionResponse{}, err
	}
	if err := checkMeta(p.Meta); err != nil {
		return acpsdk.LoadSessionResponse{}, err
	}
	if _, err := s.session(p.SessionId); err == nil {
		return acpsdk.LoadSessionResponse{}, acpsdk.NewInvalidParams(fmt.Sprintf("session %q is already open", p.SessionId))
	}
	co, _, err := s.createOptions(p.SessionId, "", p.Meta)
	if err != nil {
		return acpsdk.LoadSessionResponse{}, err
	}
	co.ParentSession, co.Origin, co.DelegationDepth, co.Resume, co.Setup = "", "", 0, true, nil
	var m acpmeta.Session
	if acpmeta.Get(p.Meta, &m) { // a continued child keeps its persona and tool filter
		shape, _, err := shapeOf(acpmeta.Session{Persona: m.Persona, ToolFilter: m.ToolFilter})
		if err != nil {
			return acpsdk.LoadSessionResponse{}, err
		}
		co.Setup = shape
	}
	err = s.open(ctx, co, nil, p.Cwd, p.McpServers, func(a *agent.Agent, u *updater) error {
		if cwd := a.Cwd(); filepath.Clean(cwd) != filepath.Clean(p.Cwd) {
			return acpsdk.NewInvalidParams(fmt.Sprintf("session %q works in %s, not %s", p.SessionId, cwd, p.Cwd))
		}
		replay(a, u)
		return nil
	})
	if err != nil {
		return acpsdk.LoadSessionResponse{}, err
	}
	ss, err := s.session(p.SessionId)
	if err != nil {
		return acpsdk.LoadSessionResponse{}, err
	}
	s.greet(ss) // during the load, the client knows the session
	return acpsdk.LoadSessionResponse{ConfigOptions: s.configOptions(ss)}, nil
}

// replay sends a loaded session's stored conversation to the client.
func replay(a *agent.Agent, u *updater) {
	h := a.Session().Header()
	for _, e := range a.Session().Events()[min(h.SeedLength, a.Session().Len()):] {
		if m, ok := e.Data.(content.Message); ok && e.Type == session.TypeUserMessage {
			if text := content.JoinText(m.Content); text != "" {
				u.send(acpsdk.SessionUpdate{UserMessageChunk: &acpsdk.SessionUpdateUserMessageChunk{
					SessionUpdate: "user_message_chunk", Content: acpsdk.TextBlock(text)}})
			}
			continue
		}
		u.event(e)
	}
}

// createError is the client's error for a session whose agent could not
// be created.
func createError(id acpsdk.SessionId, err error) error {
	switch {
	case errors.Is(err, &session.Error{Code: session.CodeNotFound}):
		return &acpsdk.RequestError{Code: codeResourceNotFound, Message: "Resource not found", Data: fmt.Sprintf("unknown session %q", id)}
	case errors.Is(err, &session.Error{Code: session.CodeBusy}), errors.Is(err, &session.Error{Code: session.CodeExists}):
		return acpsdk.NewInvalidRequest(fmt.Sprintf("session %q is open in another process", id))
	}
	return acpsdk.NewInternalError(err.Error())
}

// listSessions serves session/list: the stored top-level sessions, newest
// first, filtered by cwd when the client gives one. Children of other
// sessions are left out; they are continued through their parent.
func (s *server) listSessions(p acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	if s.opts.Sessions == nil {
		return acpsdk.ListSessionsResponse{}, acpsdk.NewMethodNotFound("session/list")
	}
	if p.Cwd != nil && !filepath.IsAbs(*p.Cwd) {
		return acpsdk.ListSessionsResponse{}, acpsdk.NewInvalidParams(fmt.Sprintf("cwd must be an absolute path, got %q", *p.Cwd))
	}
	hs, err := s.opts.Sessions.List()
	if err != nil {
		return acpsdk.ListSessionsResponse{}, acpsdk.NewInternalError(err.Error())
	}
	out := []acpsdk.SessionInfo{}
	for _, h := range hs {
		if h.ParentSession != "" || h.Cwd == "" || (p.Cwd != nil && filepath.Clean(*p.Cwd) != h.Cwd) {
			continue
		}
		out = append(out, acpsdk.SessionInfo{SessionId: acpsdk.SessionId(h.ID), Cwd: h.Cwd})
	}
	return acpsdk.ListSessionsResponse{Sessions: out}, nil
}
