// Package acp serves dsh as an Agent Client Protocol agent: an editor or
// another harness drives dsh agents over JSON-RPC on stdio. stdout carries
// protocol frames only.
package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/telemetry"
)

// Options configure a server.
type Options struct {
	// Agents creates one agent per ACP session.
	Agents *agent.Registry
	// AgentOptions are the model route and limits of those agents.
	AgentOptions agent.Options
	// Policy is the permission policy of every session's agent; its ask
	// decisions become session/request_permission requests to the client,
	// naming the agent of the session's tree that asks. A dsh parent may
	// narrow it further for its child (see internal/acpmeta).
	Policy permission.Policy
	// TokenBudget bounds the tokens each session's tree may use (0:
	// unbounded).
	TokenBudget int64
	// Version is reported in agentInfo.
	Version string
	Log     *slog.Logger
}

// DefaultAskPermission returns the tools that need approval by default:
// those that change the machine.
func DefaultAskPermission() []string { return []string{"bash", "write_file", "edit_file"} }

// Serve speaks ACP on in/out until the client disconnects or ctx ends, then
// cancels and disposes every agent it created.
func Serve(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	if opts.Agents == nil {
		return errors.New("acp: Serve needs an agent registry")
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	s := &server{opts: opts, sessions: map[acpsdk.SessionId]*acpSession{}, ready: make(chan struct{})}
	// No SetLogger: in acp-go-sdk v0.13.0 it races with the connection's
	// receive goroutine; the connection logs through slog.Default.
	s.conn = acpsdk.NewAgentSideConnection(s, out, in)
	close(s.ready)
	select {
	case <-s.conn.Done():
	case <-ctx.Done():
	}
	return s.close()
}

// server implements acpsdk.Agent.
type server struct {
	opts  Options
	conn  *acpsdk.AgentSideConnection // read through connection()
	ready chan struct{}               // closed once conn is set

	mu       sync.Mutex
	sessions map[acpsdk.SessionId]*acpSession
	closed   bool
}

// connection returns the client connection. Requests can reach a handler
// before NewAgentSideConnection has returned (its receive goroutine starts
// inside it, and the SDK sets its own connection field after that), so
// handlers wait until both are set.
func (s *server) connection() *acpsdk.AgentSideConnection {
	<-s.ready
	return s.conn
}

// acpSession is one ACP session: a dsh agent and its prompt in flight.
type acpSession struct {
	id       acpsdk.SessionId
	agent    *agent.Agent
	mu       sync.Mutex
	inFlight bool
}

var _ acpsdk.Agent = (*server)(nil)

func (s *server) close() error {
	s.mu.Lock()
	s.closed = true
	sessions := slices.Collect(func(yield func(*acpSession) bool) {
		for _, ss := range s.sessions {
			if !yield(ss) {
				return
			}
		}
	})
	s.mu.Unlock()
	var errs []error
	for _, ss := range sessions {
		errs = append(errs, ss.agent.Dispose(context.Background()))
	}
	return errors.Join(errs...)
}

// Initialize implements acpsdk.Agent: protocol version 1, text and
// resource-link prompts, no optional capability.
func (s *server) Initialize(ctx context.Context, p acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	return acpsdk.InitializeResponse{
		ProtocolVersion:   acpsdk.ProtocolVersionNumber,
		AgentCapabilities: acpsdk.AgentCapabilities{LoadSession: false},
		AgentInfo:         &acpsdk.Implementation{Name: "dsh", Version: cmpOr(s.opts.Version, "dev")},
		AuthMethods:       []acpsdk.AuthMethod{},
	}, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Authenticate implements acpsdk.Agent: dsh needs no client authentication.
func (s *server) Authenticate(ctx context.Context, p acpsdk.AuthenticateRequest) (acpsdk.AuthenticateResponse, error) {
	return acpsdk.AuthenticateResponse{}, nil
}

// NewSession implements acpsdk.Agent: it creates a dsh agent working in cwd.
func (s *server) NewSession(ctx context.Context, p acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	if !filepath.IsAbs(p.Cwd) {
		return acpsdk.NewSessionResponse{}, acpsdk.NewInvalidParams(fmt.Sprintf("cwd must be an absolute path, got %q", p.Cwd))
	}
	if fi, err := os.Stat(p.Cwd); err != nil || !fi.IsDir() {
		return acpsdk.NewSessionResponse{}, acpsdk.NewInvalidParams(fmt.Sprintf("cwd %q is not an existing directory", p.Cwd))
	}
	if len(p.McpServers) > 0 || len(p.AdditionalDirectories) > 0 {
		return acpsdk.NewSessionResponse{}, acpsdk.NewInvalidParams("MCP servers and additional directories are not supported")
	}
	id := acpsdk.SessionId(uuid.NewString())
	ctx = telemetry.FromMeta(ctx, p.Meta) // a parent's trace: the session's turns continue it
	a, err := s.opts.Agents.Create(ctx, s.createOptions(id, p.Cwd, p.Meta))
	if err != nil {
		return acpsdk.NewSessionResponse{}, acpsdk.NewInternalError(err.Error())
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		a.Dispose(context.Background())
		return acpsdk.NewSessionResponse{}, acpsdk.NewInternalError("the server is shutting down")
	}
	s.sessions[id] = &acpSession{id: id, agent: a}
	s.mu.Unlock()
	return acpsdk.NewSessionResponse{SessionId: id}, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (s *server) session(id acpsdk.SessionId) (*acpSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if !ok {
		return nil, acpsdk.NewInvalidParams(fmt.Sprintf("unknown session %q", id))
	}
	return ss, nil
}

// Prompt implements acpsdk.Agent: it runs one turn and streams its
// activity as session/update notifications.
func (s *server) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	ss, err := s.session(p.SessionId)
	if err != nil {
		return acpsdk.PromptResponse{}, err
	}
	msg, err := userMessage(p.Prompt)
	if err != nil {
		return acpsdk.PromptResponse{}, err
	}
	ss.mu.Lock()
	if ss.inFlight {
		ss.mu.Unlock()
		return acpsdk.PromptResponse{}, acpsdk.NewInvalidParams("a prompt is already in flight for this session")
	}
	ss.inFlight = true
	ss.mu.Unlock()
	defer func() {
		ss.mu.Lock()
		ss.inFlight = false
		ss.mu.Unlock()
	}()
	u := &updater{conn: s.connection(), id: p.SessionId, log: s.opts.Log, messages: map[[2]int]string{}}
	stop := ss.agent.Session().Observe(u.event)
	from := len(ss.agent.Session().Events())
	end, err := ss.agent.Run(telemetry.FromMeta(ctx, p.Meta), msg)
	stop()
	if err != nil {
		return acpsdk.PromptResponse{}, acpsdk.NewInternalError(err.Error())
	}
	resp, err := stopReason(end)
	if err == nil {
		resp.Usage, resp.Meta = turnUsage(ss.agent.Session().Events()[from:])
	}
	return resp, err
}

// stopReason maps a turn end to the prompt's answer.
func stopReason(end session.TurnEnd) (acpsdk.PromptResponse, error) {
	switch end.Reason.Kind {
	case session.EndCompleted:
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}, nil
	case session.EndMaxTokens, session.EndBudget:
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonMaxTokens}, nil
	case session.EndMaxSteps:
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonMaxTurnRequests}, nil
	case session.EndBlocked:
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonRefusal}, nil
	case session.EndAborted, session.EndInterrupted:
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonCancelled}, nil
	}
	msg := "turn failed"
	if f := end.Reason.Error; f != nil {
		msg = fmt.Sprintf("turn failed: %s (%s)", f.Message, f.Code)
	}
	return acpsdk.PromptResponse{}, acpsdk.NewInternalError(msg)
}

// userMessage turns prompt blocks into one user message: text and resource
// links are accepted, anything else is invalid.
func userMessage(blocks []acpsdk.ContentBlock) (content.Message, error) {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			parts = append(parts, fmt.Sprintf("[%s](%s)", b.ResourceLink.Name, b.ResourceLink.Uri))
		default:
			return content.Message{}, acpsdk.NewInvalidParams("only text and resource_link prompt blocks are supported")
		}
	}
	text := strings.Join(parts, "\n")
	if strings.TrimSpace(text) == "" {
		return content.Message{}, acpsdk.NewInvalidParams("the prompt is empty")
	}
	return content.UserText(text), nil
}

// Cancel implements acpsdk.Agent. The SDK cancels the prompt's context;
// the running turn is cancelled too in case the prompt already returned.
func (s *server) Cancel(ctx context.Context, p acpsdk.CancelNotification) error {
	if ss, err := s.session(p.SessionId); err == nil {
		ss.agent.Cancel(session.Cause{Kind: agent.CauseUser}, false)
	}
	return nil
}

// The remaining methods are optional and unsupported.

func (s *server) CloseSession(context.Context, acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	return acpsdk.CloseSessionResponse{}, acpsdk.NewMethodNotFound("session/close")
}

func (s *server) ListSessions(context.Context, acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return acpsdk.ListSessionsResponse{}, acpsdk.NewMethodNotFound("session/list")
}

func (s *server) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, acpsdk.NewMethodNotFound("session/resume")
}

func (s *server) SetSessionConfigOption(context.Context, acpsdk.SetSessionConfigOptionRequest) (acpsdk.SetSessionConfigOptionResponse, error) {
	return acpsdk.SetSessionConfigOptionResponse{}, acpsdk.NewMethodNotFound("session/set_config_option")
}

func (s *server) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, acpsdk.NewMethodNotFound("session/set_mode")
}
