// Package acp serves dsh as an Agent Client Protocol agent: an editor or
// another harness drives dsh agents over JSON-RPC on stdio. stdout carries
// protocol frames only.
package acpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/internal/jsonrpcframe"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/builtin"
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
	// PermissionTimeout bounds the wait for the client's answer to a
	// permission request (default DefaultPermissionTimeout); unanswered,
	// the call is denied and the turn goes on.
	PermissionTimeout time.Duration
	// MaxSessions caps the sessions one connection holds at once (default
	// DefaultMaxSessions); session/close frees one.
	MaxSessions int
	// MaxFrame is the limit in bytes of one client frame (default
	// DefaultMaxFrame, at most just under the SDK's 10 MiB); a longer one
	// is answered with an error and the connection goes on.
	MaxFrame int
	// Sessions, when set, serves session/list (session/load needs only
	// Agents, whose store holds the sessions).
	Sessions *session.Store
	// Version is reported in agentInfo.
	Version string
	Log     *slog.Logger
	// Subagents, when set, is the service that starts the children of the
	// sessions' trees: a dsh parent that admits (see internal/acpmeta)
	// then counts them against its tree's live-children cap.
	Subagents *subagent.Service
	// StopBackground, when set, is called by session/cancel to stop the
	// session's other background children (dsh: its one-shot ones, whose
	// notices then wait for the next prompt), with the user's reason.
	StopBackground func(root *agent.Agent, reason string)
	// MCP configures the MCP servers a client passes in session/new (log,
	// event bus, client version); they serve that session's tree only.
	MCP mcptool.Options
	// Routes are the models a session can switch to, through the "model"
	// session config option and /model; none: no model option.
	Routes []Route
	// ContextWindow, when set, returns the context window in tokens of a
	// route's model (0: unknown); usage_update is sent after each turn when
	// it is known.
	ContextWindow func(provider, model string) int
	// Cost, when set, prices usage per "route/model" for usage_update.
	Cost costOf
	// FileTools, when set, makes the file tools (read_file, write_file,
	// edit_file, with the runtime's options) over an editor's files: a
	// client that offers fs/read_text_file and fs/write_text_file gets its
	// sessions' reads and writes, so that the agent sees and edits its
	// unsaved buffers.
	FileTools func(builtin.Files) []tool.Definition
	// Commands, when set, are the runtime's options of the commands it
	// runs (sandbox, network, timeout, output limit). With a full sandbox
	// and a client that offers terminal, the root agent's bash runs in the
	// client's terminal, which the editor shows; a client's terminal is
	// the editor's own process, outside any sandbox, so under another
	// sandbox (or with the network denied) bash stays dsh's.
	Commands *builtin.Options
	// Ready, when set, is asked before a session is created: its error (a
	// model route's key variable that is unset) refuses session/new with
	// auth_required and the error's text, which the client shows.
	Ready func() error
	// DrainTimeout bounds how long the server goes on answering pending
	// requests once the client's input has ended (default
	// DefaultDrainTimeout); then it cancels the running turns.
	DrainTimeout time.Duration
}

// Defaults of Options.
const (
	DefaultPermissionTimeout = 5 * time.Minute
	DefaultMaxSessions       = 32
)

// DefaultAskPermission returns the tools that need approval by default:
// those that change the machine.
func DefaultAskPermission() []string { return []string{"bash", "write_file", "edit_file"} }

// Serve speaks ACP on in/out until the client's input ends or ctx ends,
// then cancels and disposes every agent it created. It returns an error
// when the input failed, or when the connection ended before its input
// did.
func Serve(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	if opts.Agents == nil {
		return errors.New("acp: Serve needs an agent registry")
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.PermissionTimeout <= 0 {
		opts.PermissionTimeout = DefaultPermissionTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = DefaultMaxFrame
	}
	opts.MaxFrame = min(opts.MaxFrame, sdkMaxFrame)
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	s := &server{opts: opts, sessions: map[acpsdk.SessionId]*acpSession{}, ready: make(chan struct{})}
	s.input, s.closeInput = context.WithCancelCause(context.Background())
	defer s.closeInput(errServerClosed)
	pending := jsonrpcframe.NewPending()
	w := jsonrpcframe.NewWriter(pending.Watch(out, s.answered))
	sdkIn, gateOut := io.Pipe()
	// No SetLogger: in acp-go-sdk v0.13.0 it races with the connection's
	// receive goroutine; the connection logs through slog.Default.
	s.conn = acpsdk.NewAgentSideConnection(s, w, sdkIn)
	close(s.ready)

	g := &gate{limit: opts.MaxFrame, reply: w, log: opts.Log, admit: s.admitPrompt, cancel: s.cancelNotification, passed: pending.Add}
	var inputErr error
	inputDone := make(chan struct{})
	go func() {
		inputErr = g.run(in, gateOut)
		if inputErr == nil {
			s.drain(ctx, pending) // the requests the client sent are answered
		}
		close(inputDone) // before the SDK can see the end of its input
		gateOut.CloseWithError(inputErr)
	}()
	var err error
	select {
	case <-s.conn.Done():
		select {
		case <-inputDone:
			if inputErr != nil {
				err = fmt.Errorf("acp: reading the client's frames: %w", inputErr)
			}
		default:
			err = errors.New("acp: the connection ended before the client's input did")
		}
	case <-ctx.Done():
	}
	sdkIn.CloseWithError(errServerClosed) // ends the SDK's reader, and the gate at its next frame
	return errors.Join(err, s.close())
}

// server implements acpsdk.Agent.
type server struct {
	opts  Options
	conn  *acpsdk.AgentSideConnection // read through connection()
	ready chan struct{}               // closed once conn is set

	// input ends (cause errInputClosed) when the client's input has:
	// what the server would ask the client then fails at once.
	input      context.Context
	closeInput context.CancelCauseFunc

	mu             sync.Mutex
	clientFS       acpsdk.FileSystemCapabilities // what initialize offered
	clientTerminal bool                          // initialize offered terminal/*
	sessions       map[acpsdk.SessionId]*acpSession
	creating       int // sessions being created, counted against MaxSessions
	closed         bool
}

// connection returns the client connection. Requests can reach a handler
// before NewAgentSideConnection has returned (its receive goroutine starts
// inside it, and the SDK sets its own connection field after that), so
// handlers wait until both are set.
func (s *server) connection() *acpsdk.AgentSideConnection {
	<-s.ready
	return s.conn
}

// acpSession is one ACP session: a dsh agent, the observer that streams
// its activity to the client for the session's whole life (turns woken
// between prompts included), and whether a prompt is in flight.
type acpSession struct {
	id      acpsdk.SessionId
	agent   *agent.Agent
	updates *updater
	stop    func() // stops the observer
	// capture records the structured result a dsh parent asked for
	// (acpmeta.Session.OutputSchema); nil for none.
	capture *inproc.Capture
	mu      sync.Mutex
	busy    bool // a session/prompt was admitted and has not returned
	greet   bool // its commands go out once the client has its id (s.mu)
}

// captured returns the structured result the session's last turn
// recorded, if it has an output schema and the turn recorded one.
func (ss *acpSession) captured() (any, bool) {
	if ss.capture == nil {
		return nil, false
	}
	return ss.capture.Value()
}

// dispose stops the session's updates and disposes its agent.
func (ss *acpSession) dispose() error {
	ss.stop()
	return ss.agent.Dispose(context.Background())
}

var _ acpsdk.Agent = (*server)(nil)

// open creates the agent of a new or a loaded session, holding a place
// under MaxSessions meanwhile, with the client's MCP servers attached to its
// tree, and registers it. loaded, when set, checks the loaded agent and
// replays its conversation through the session's updater before the
// session follows the agent; an error from it disposes the agent.
func (s *server) open(ctx context.Context, co agent.CreateOptions, capture *inproc.Capture, cwd string, servers []acpsdk.McpServer,
	loaded func(*agent.Agent, *updater) error) error {
	s.mu.Lock()
	if n := len(s.sessions) + s.creating; n >= s.opts.MaxSessions {
		s.mu.Unlock()
		return acpsdk.NewInvalidRequest(fmt.Sprintf("this connection already holds %d sessions, the limit; close one with session/close", n))
	}
	s.creating++
	s.mu.Unlock()
	id := acpsdk.SessionId(co.SessionID)
	if files := s.useClientFiles(id); files != nil {
		co.Setup = chainSetup(co.Setup, files)
	}
	u := newUpdater(s.connection(), id, cwd, s.opts.Log)
	if term := s.useClientTerminal(id, u); term != nil {
		co.Setup = chainSetup(co.Setup, term)
	}
	var a *agent.Agent
	mcp, err := s.sessionMCP(ctx, cwd, servers)
	if err == nil {
		if mcp != nil {
			co.Setup = chainSetup(co.Setup, mcp.attach)
		}
		if a, err = s.opts.Agents.Create(ctx, co); err != nil {
			if mcp != nil {
				mcp.set.Close(context.Background())
			}
			err = createError(id, err)
		} else if loaded != nil {
			if err = loaded(a, u); err != nil {
				a.Dispose(context.Background())
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creating--
	switch {
	case err != nil:
		return err
	case s.closed:
		a.Dispose(context.Background())
		return acpsdk.NewInternalError("the server is shutting down")
	}
	ss := &acpSession{id: id, agent: a, updates: u, capture: capture}
	ss.stop = a.Session().Observe(u.event)
	s.sessions[id] = ss
	return nil
}

// checkWorkspace checks a session's working directory (absolute, an
// existing directory) and refuses additional directories.
func checkWorkspace(cwd string, additional []string) error {
	if !filepath.IsAbs(cwd) {
		return acpsdk.NewInvalidParams(fmt.Sprintf("cwd must be an absolute path, got %q", cwd))
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return acpsdk.NewInvalidParams(fmt.Sprintf("cwd %q is not an existing directory", cwd))
	}
	if len(additional) > 0 {
		return acpsdk.NewInvalidParams("additional directories are not supported")
	}
	return nil
}

// chainSetup runs a, then b.
func chainSetup(a, b func(*agent.Agent) error) func(*agent.Agent) error {
	if a == nil {
		return b
	}
	return func(ag *agent.Agent) error {
		if err := a(ag); err != nil {
			return err
		}
		return b(ag)
	}
}

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
		errs = append(errs, ss.dispose())
	}
	return errors.Join(errs...)
}

// Initialize implements acpsdk.Agent: protocol version 1, text and
// resource-link prompts, session/load and session/close, session/list when
// the server has the store, and MCP servers over stdio, HTTP and SSE.
func (s *server) Initialize(ctx context.Context, p acpsdk.InitializeRequest) (acpsdk.InitializeResponse, error) {
	caps := acpsdk.AgentCapabilities{LoadSession: true,
		SessionCapabilities: acpsdk.SessionCapabilities{Close: &acpsdk.SessionCloseCapabilities{}},
		McpCapabilities:     acpsdk.McpCapabilities{Http: true, Sse: true}}
	if s.opts.Sessions != nil {
		caps.SessionCapabilities.List = &acpsdk.SessionListCapabilities{}
	}
	s.mu.Lock()
	s.clientFS = p.ClientCapabilities.Fs
	s.clientTerminal = p.ClientCapabilities.Terminal
	s.mu.Unlock()
	return acpsdk.InitializeResponse{
		ProtocolVersion:   acpsdk.ProtocolVersionNumber,
		AgentCapabilities: caps,
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

// NewSession implements acpsdk.Agent: it creates a dsh agent working in
// cwd, within MaxSessions.
func (s *server) NewSession(ctx context.Context, p acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	if err := checkWorkspace(p.Cwd, p.AdditionalDirectories); err != nil {
		return acpsdk.NewSessionResponse{}, err
	}
	if err := checkMeta(p.Meta); err != nil {
		return acpsdk.NewSessionResponse{}, err
	}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			return acpsdk.NewSessionResponse{}, &acpsdk.RequestError{Code: codeAuthRequired, Message: err.Error()}
		}
	}
	id := acpsdk.SessionId(uuid.NewString())
	ctx = telemetry.FromMeta(ctx, p.Meta) // a parent's trace: the session's turns continue it
	co, capture, err := s.createOptions(id, p.Cwd, p.Meta)
	if err != nil {
		return acpsdk.NewSessionResponse{}, err
	}
	if err := s.open(ctx, co, capture, p.Cwd, p.McpServers, nil); err != nil {
		return acpsdk.NewSessionResponse{}, err
	}
	ss, err := s.session(id)
	if err != nil {
		return acpsdk.NewSessionResponse{}, err
	}
	s.mu.Lock()
	ss.greet = true
	s.mu.Unlock()
	return acpsdk.NewSessionResponse{SessionId: id, ConfigOptions: s.configOptions(ss)}, nil
}

// errPermissionTimeout is the cause of a permission request that the
// client did not answer in time.
var errPermissionTimeout = errors.New("no answer in time")

// requestPermission sends a permission request to the client and waits
// for the answer at most PermissionTimeout: a request left unanswered
// fails, and the SDK cancels it with the client.
func (s *server) requestPermission(ctx context.Context, req acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	wait, cancel := context.WithTimeoutCause(ctx, s.opts.PermissionTimeout, errPermissionTimeout)
	defer cancel()
	defer context.AfterFunc(s.input, cancel)()
	if s.input.Err() != nil {
		return acpsdk.RequestPermissionResponse{}, context.Cause(s.input)
	}
	resp, err := s.connection().RequestPermission(wait, req)
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(context.Cause(wait), errPermissionTimeout):
		err = fmt.Errorf("the client did not answer within %s", s.opts.PermissionTimeout)
	case s.input.Err() != nil:
		err = context.Cause(s.input)
	}
	return resp, err
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

// admitPrompt runs in the gate before a session/prompt request reaches the
// SDK: it claims the session, or refuses the request when the session is
// busy. Refused there, a second prompt never reaches the SDK, which would
// cancel the first. A request the SDK will reject before calling Prompt
// (bad params) or for an unknown session claims nothing; any other is
// certain to reach Prompt, which releases the claim.
func (s *server) admitPrompt(params json.RawMessage) *acpsdk.RequestError {
	var p acpsdk.PromptRequest
	if json.Unmarshal(params, &p) != nil || p.Validate() != nil {
		return nil
	}
	ss, err := s.session(p.SessionId)
	if err != nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.busy {
		return acpsdk.NewInvalidParams("a prompt is already in flight for this session; wait for its response, or send session/cancel")
	}
	ss.busy = true
	return nil
}

// Prompt implements acpsdk.Agent: it runs one turn, whose activity the
// session's observer streams as session/update notifications.
func (s *server) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	ss, err := s.session(p.SessionId)
	if err != nil {
		return acpsdk.PromptResponse{}, err
	}
	defer func() {
		ss.mu.Lock()
		ss.busy = false
		ss.mu.Unlock()
	}()
	msg, err := userMessage(p.Prompt)
	if err != nil {
		return acpsdk.PromptResponse{}, err
	}
	text := content.JoinText(msg.Content)
	if done, err := s.command(ss, text); done {
		if err != nil {
			return acpsdk.PromptResponse{}, err
		}
		return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}, nil
	}
	s.titled(ss, text)
	if ss.capture != nil { // a structured delegation: finish with structured_output
		msg.Content = append([]content.Block{content.Text(prompt.ChildInstructionsOpen + inproc.StructuredText + prompt.ChildInstructionsClose)}, msg.Content...)
	}
	from := len(ss.agent.Session().Events())
	ss.updates.prompted(msg.ID)
	end, err := ss.agent.Run(telemetry.FromMeta(ctx, p.Meta), msg)
	if err != nil {
		return acpsdk.PromptResponse{}, acpsdk.NewInternalError(err.Error())
	}
	s.usage(ss)
	resp, err := stopReason(end)
	if err == nil {
		var pm acpmeta.Prompt
		resp.Usage, pm.Usage = turnUsage(ss.agent.Session().Events()[from:])
		if v, ok := ss.captured(); ok {
			pm.Structured, _ = json.Marshal(v)
		}
		if pm.Usage != nil || pm.Structured != nil {
			resp.Meta = acpmeta.Set(nil, pm)
		}
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
	return acpsdk.PromptResponse{}, turnError(end.Reason.Error)
}

// codeAuthRequired is ACP's error code for a missing or refused
// credential.
const codeAuthRequired = -32000

// turnError is the error of a failed turn, its message the failure's own
// (a client shows it) and its data the failure's code: auth_required for a
// model key that is unset or refused, an internal error otherwise.
func turnError(f *content.Failure) *acpsdk.RequestError {
	if f == nil {
		return &acpsdk.RequestError{Code: -32603, Message: "turn failed"}
	}
	code := -32603
	if f.Code == llm.CodeAuth || f.Code == llm.CodeMissingKey {
		code = codeAuthRequired
	}
	return &acpsdk.RequestError{Code: code, Message: fmt.Sprintf("turn failed: %s (%s)", f.Message, f.Code), Data: map[string]any{"code": f.Code}}
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

// Cancel implements acpsdk.Agent: it cancels the session's running turn,
// whether a prompt's or one woken between prompts, and with the user's
// authority the running turns of all the session's continuable children,
// at any depth, and its one-shot background children. What is queued for
// the session (their notices among it) waits for the next prompt. (The
// gate handles session/cancel, so the SDK never calls it.)
func (s *server) Cancel(ctx context.Context, p acpsdk.CancelNotification) error {
	if ss, err := s.session(p.SessionId); err == nil {
		if s.opts.Subagents != nil {
			s.opts.Subagents.InterruptTree(ss.agent.ID(), "session/cancel")
		}
		if s.opts.StopBackground != nil {
			s.opts.StopBackground(ss.agent, "session/cancel")
		}
		ss.agent.Cancel(session.Cause{Kind: agent.CauseUser, Reason: "session/cancel"}, true)
	}
	return nil
}

// cancelNotification handles a session/cancel notification for the gate.
func (s *server) cancelNotification(params json.RawMessage) {
	var p acpsdk.CancelNotification
	if err := json.Unmarshal(params, &p); err != nil {
		s.opts.Log.Debug("acp: bad session/cancel", "err", err)
		return
	}
	s.Cancel(context.Background(), p)
}

// CloseSession implements acpsdk.Agent: it cancels the session's work and
// disposes its agent, freeing its place under MaxSessions.
func (s *server) CloseSession(ctx context.Context, p acpsdk.CloseSessionRequest) (acpsdk.CloseSessionResponse, error) {
	s.mu.Lock()
	ss, ok := s.sessions[p.SessionId]
	delete(s.sessions, p.SessionId)
	s.mu.Unlock()
	if !ok {
		return acpsdk.CloseSessionResponse{}, acpsdk.NewInvalidParams(fmt.Sprintf("unknown session %q", p.SessionId))
	}
	if err := ss.dispose(); err != nil {
		return acpsdk.CloseSessionResponse{}, acpsdk.NewInternalError(err.Error())
	}
	return acpsdk.CloseSessionResponse{}, nil
}

// ListSessions implements acpsdk.Agent.
func (s *server) ListSessions(_ context.Context, p acpsdk.ListSessionsRequest) (acpsdk.ListSessionsResponse, error) {
	return s.listSessions(p)
}

// The remaining methods are optional and unsupported.

func (s *server) ResumeSession(context.Context, acpsdk.ResumeSessionRequest) (acpsdk.ResumeSessionResponse, error) {
	return acpsdk.ResumeSessionResponse{}, acpsdk.NewMethodNotFound("session/resume")
}

func (s *server) SetSessionMode(context.Context, acpsdk.SetSessionModeRequest) (acpsdk.SetSessionModeResponse, error) {
	return acpsdk.SetSessionModeResponse{}, acpsdk.NewMethodNotFound("session/set_mode")
}

// HandleExtensionMethod implements acpsdk.ExtensionMethodHandler: a dsh
// parent's request to interrupt a descendant of one of this process's
// sessions (acpmeta.MethodInterrupt), with that session's authority, as
// interrupt_agent would from the session's own agent. Other extension
// methods are not served.
func (s *server) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method != acpmeta.MethodInterrupt {
		return nil, acpsdk.NewMethodNotFound(method)
	}
	var p acpmeta.Interrupt
	if err := json.Unmarshal(params, &p); err != nil || p.Target == "" {
		return nil, acpsdk.NewInvalidParams(fmt.Sprintf("%s needs a sessionId and a target", acpmeta.MethodInterrupt))
	}
	ss, err := s.session(acpsdk.SessionId(p.SessionID))
	if err != nil {
		return nil, err
	}
	if s.opts.Subagents == nil {
		return struct{}{}, nil
	}
	if err := s.opts.Subagents.Interrupt(ss.agent, p.Target); err != nil {
		return nil, acpsdk.NewInvalidParams(err.Error())
	}
	return struct{}{}, nil
}
