// Package a2aserver serves dsh as an Agent2Agent (A2A 0.3) agent over
// HTTP JSON-RPC, through the a2a-go SDK: a public agent card naming dsh's
// skills (its subagent tools), and message/send, message/stream (SSE),
// tasks/get, tasks/cancel and tasks/resubscribe. Each task runs one turn of
// a top-level dsh agent whose session is stored like any other (listed by
// `dsh sessions`); the agent delegates through its subagent tools, and its
// children's progress reaches the client as status updates. A follow-up
// message in the same context continues the same session.
package a2aserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/limiter"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/a2achild"
)

// Paths the server answers.
const (
	// CardPath is the public agent card.
	CardPath = a2achild.CardPath
	// RPCPath is the JSON-RPC endpoint.
	RPCPath = "/a2a"
)

// Defaults of Options.
const (
	DefaultMaxTasks   = 8
	DefaultMaxRequest = 1 << 20
)

// maxContexts bounds the contexts whose session the server remembers, so
// that a client minting contextIds cannot grow it without end.
const maxContexts = 4096

// ProtocolVersion is the A2A version served (that of a2a-go v0.3).
const ProtocolVersion = "0.3.0"

// Options configure a Server.
type Options struct {
	Agents    *agent.Registry
	Subagents *subagent.Service
	Events    *event.Bus
	// AgentOptions, Policy, Asker and TokenBudget describe each task's
	// top-level agent. A nil Asker hands each ask to the client: the task
	// waits at input-required for the answer.
	AgentOptions agent.Options
	Policy       permission.Policy
	Asker        permission.Asker
	TokenBudget  int64
	// Cwd is the agents' working directory (absolute, required).
	Cwd string
	// Skills are the card's skills: what the agent can delegate to.
	Skills []a2a.AgentSkill
	// URL is the endpoint the card names (where RPCPath is served).
	URL string
	// Bearer says that the endpoint requires a bearer token (declared in
	// the card; the caller enforces it).
	Bearer bool
	// MaxTasks caps the tasks running at once (default DefaultMaxTasks);
	// MaxRequest one request body, in bytes (default DefaultMaxRequest).
	MaxTasks   int
	MaxRequest int64
	Version    string
	Log        *slog.Logger
}

// Server is dsh as an A2A agent.
type Server struct {
	opts Options
	card *a2a.AgentCard
	rpc  http.Handler

	mu       sync.Mutex
	sessions map[string]string // A2A contextId → dsh session id
	running  map[*agent.Agent]struct{}
	waiting  map[a2a.TaskID]*turn // turns whose task waits for an answer
	opening  int                  // agents being created, counted against MaxTasks
	closed   bool
	wg       sync.WaitGroup
}

// New builds the server.
func New(opts Options) (*Server, error) {
	if opts.Agents == nil || opts.Subagents == nil || opts.Events == nil {
		return nil, errors.New("a2aserver: Agents, Subagents and Events are required")
	}
	if !filepath.IsAbs(opts.Cwd) {
		return nil, fmt.Errorf("a2aserver: the working directory %q is not absolute", opts.Cwd)
	}
	opts.Log = cmp.Or(opts.Log, slog.Default())
	opts.MaxTasks = cmp.Or(opts.MaxTasks, DefaultMaxTasks)
	opts.MaxRequest = cmp.Or(opts.MaxRequest, DefaultMaxRequest)
	s := &Server{opts: opts, sessions: map[string]string{}, running: map[*agent.Agent]struct{}{}, waiting: map[a2a.TaskID]*turn{}}
	s.card = &a2a.AgentCard{Name: "dsh", Description: "dsh: an agent that delegates tasks to its child agents",
		URL: opts.URL, PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: ProtocolVersion,
		Version: cmp.Or(opts.Version, "dev"), Capabilities: a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Provider: &a2a.AgentProvider{Org: "dsh", URL: "https://github.com/dsh-go/dsh"}, Skills: opts.Skills}
	if s.card.Skills == nil {
		s.card.Skills = []a2a.AgentSkill{}
	}
	if opts.Bearer {
		s.card.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "bearer",
			Description: "the token of dsh a2a's token file"}}
		s.card.Security = []a2a.SecurityRequirements{{"bearer": {}}}
	}
	h := a2asrv.NewHandler(&executor{s: s}, a2asrv.WithLogger(opts.Log),
		// The server refuses tasks past MaxTasks itself, saying so; the
		// SDK's limit (which answers an opaque internal error) is a
		// backstop for executions that have not reached it yet.
		a2asrv.WithConcurrencyConfig(limiter.ConcurrencyConfig{MaxExecutions: 2*opts.MaxTasks + 8}))
	s.rpc = http.MaxBytesHandler(a2asrv.NewJSONRPCHandler(h), opts.MaxRequest)
	return s, nil
}

// Card returns the agent card.
func (s *Server) Card() *a2a.AgentCard { return s.card }

// CardHandler serves the public card.
func (s *Server) CardHandler() http.Handler { return a2asrv.NewStaticAgentCardHandler(s.card) }

// RPCHandler serves the JSON-RPC endpoint, requests bounded by MaxRequest.
func (s *Server) RPCHandler() http.Handler { return s.rpc }

// Close cancels the running tasks and waits for their agents to be
// disposed. It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for a := range s.running {
		a.Cancel(session.Cause{Kind: agent.CauseUser, Reason: "dsh a2a is shutting down"}, false)
	}
	waiting := s.waiting
	s.waiting = map[a2a.TaskID]*turn{}
	s.mu.Unlock()
	for task, t := range waiting {
		s.abandon(task, t)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// executor runs tasks as dsh turns.
type executor struct{ s *Server }

func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var parts []string
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			parts = append(parts, p.Text)
		case a2a.FilePart:
			if f, ok := p.File.(a2a.FileURI); ok {
				parts = append(parts, fmt.Sprintf("[%s](%s)", f.Name, f.URI))
			}
		}
	}
	return strings.Join(parts, "\n")
}

// intMeta reads a number from message metadata (JSON numbers are
// float64); ok is false when absent or not a whole number.
func intMeta(md map[string]any, key string) (int, bool) {
	switch v := md[key].(type) {
	case float64:
		if v == float64(int(v)) {
			return int(v), true
		}
	case int:
		return v, true
	}
	return 0, false
}

// Execute implements a2asrv.AgentExecutor: it runs the message as a turn
// of the context's dsh session, or, when the task waits for an answer to a
// permission ask, takes the message as the answer and follows the turn on.
func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	s := e.s
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	text := messageText(rc.Message)
	if t := s.resume(rc.TaskID); t != nil {
		t.pending.answer <- parseAnswer(text)
		t.pending = nil
		if err := writeStatus(ctx, rc, q, a2a.TaskStateWorking, "", nil); err != nil {
			return err
		}
		return s.follow(ctx, rc, q, t)
	}
	if strings.TrimSpace(text) == "" {
		return writeStatus(ctx, rc, q, a2a.TaskStateRejected, "the message has no text", nil)
	}
	depth, _ := intMeta(rc.Message.Metadata, a2achild.MetaDepth)
	depth = max(depth, 0)
	if maxDepth, ok := intMeta(rc.Message.Metadata, a2achild.MetaMaxDepth); ok && depth > maxDepth {
		return writeStatus(ctx, rc, q, a2a.TaskStateRejected, fmt.Sprintf("delegation depth %d exceeds the caller's maxDepth %d", depth, maxDepth), nil)
	}
	t := &turn{done: make(chan session.TurnEnd, 1), asks: make(chan *ask)}
	a, err := s.open(ctx, rc.ContextID, depth, t)
	if be := (*busyError)(nil); errors.As(err, &be) {
		return writeStatus(ctx, rc, q, a2a.TaskStateRejected, err.Error(), nil)
	} else if err != nil {
		return writeStatus(ctx, rc, q, a2a.TaskStateFailed, err.Error(), nil)
	}
	t.a, t.from = a, len(a.Session().Events())
	if err := writeStatus(ctx, rc, q, a2a.TaskStateWorking, "", nil); err != nil {
		s.release(a)
		return err
	}
	var tctx context.Context
	tctx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		end, err := a.Run(tctx, content.UserText(text))
		if err != nil {
			end = session.TurnEnd{Reason: session.EndReason{Kind: session.EndError, Error: &content.Failure{Message: err.Error()}}}
		}
		t.done <- end
	}()
	return s.follow(ctx, rc, q, t)
}

// writeStatus writes a status update; terminal and input-required ones
// are final.
func writeStatus(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, state a2a.TaskState, text string, meta map[string]any) error {
	var m *a2a.Message
	if text != "" {
		m = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: text})
	}
	ev := a2a.NewStatusUpdateEvent(rc, state, m)
	ev.Final = state.Terminal() || state == a2a.TaskStateInputRequired
	ev.Metadata = meta
	return q.Write(ctx, ev)
}

// turn is one task's turn. It outlives an Execute that stopped at a
// permission ask (input-required), until the client answers or cancels.
type turn struct {
	a       *agent.Agent
	from    int                  // the session's events before the turn
	done    chan session.TurnEnd // the turn's end (buffered)
	asks    chan *ask            // the tree's permission asks
	cancel  context.CancelFunc   // cancels the turn
	pending *ask                 // the ask the client was given
}

// ask is a permission ask waiting for the client's answer.
type ask struct {
	req    permission.Request
	answer chan permission.Answer // buffered
}

// Ask implements permission.Asker: the ask becomes the task's
// input-required state, and the client's next message in the task is the
// answer.
func (t *turn) Ask(ctx context.Context, req permission.Request) (permission.Answer, error) {
	k := &ask{req: req, answer: make(chan permission.Answer, 1)}
	select {
	case t.asks <- k:
	case <-ctx.Done():
		return permission.Reject, context.Cause(ctx)
	}
	select {
	case ans := <-k.answer:
		return ans, nil
	case <-ctx.Done():
		return permission.Reject, context.Cause(ctx)
	}
}

// parseAnswer reads the client's answer to an ask: yes, always, or
// anything else for no.
func parseAnswer(text string) permission.Answer {
	switch strings.ToLower(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(text), ".!"))) {
	case "yes", "y", "allow", "allow once", "ok":
		return permission.AllowOnce
	case "always", "allow always":
		return permission.AllowAlways
	}
	return permission.Reject
}

// maxAskArgs bounds the arguments an ask shows the client, in bytes.
const maxAskArgs = 2000

// follow reports the turn's progress until it ends (the task's end), asks
// (the task waits for input) or the execution is cancelled.
func (s *Server) follow(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, t *turn) error {
	stop := s.relay(ctx, t.a, rc, q)
	select {
	case end := <-t.done:
		stop()
		defer s.endTurn(rc.TaskID, t)
		return s.finish(ctx, rc, q, t, end)
	case k := <-t.asks:
		stop()
		args := string(k.req.Arguments)
		if len(args) > maxAskArgs {
			args = args[:maxAskArgs] + "…"
		}
		s.mu.Lock()
		t.pending = k
		s.waiting[rc.TaskID] = t
		s.mu.Unlock()
		return writeStatus(ctx, rc, q, a2a.TaskStateInputRequired,
			fmt.Sprintf("%s asks to run %s %s. Answer yes, always (for this tool, in this task) or no.", k.req.Who(), k.req.Tool, args), nil)
	case <-ctx.Done():
		stop()
		t.cancel()
		<-t.done
		s.endTurn(rc.TaskID, t)
		return nil
	}
}

// resume returns the turn of task waiting for an answer, taking it out of
// the waiting ones.
func (s *Server) resume(task a2a.TaskID) *turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.waiting[task]
	delete(s.waiting, task)
	return t
}

// endTurn releases a turn's agent.
func (s *Server) endTurn(task a2a.TaskID, t *turn) {
	s.mu.Lock()
	if s.waiting[task] == t {
		delete(s.waiting, task)
	}
	s.mu.Unlock()
	t.cancel()
	s.release(t.a)
}

// abandon cancels a turn that waits for an answer and releases it once it
// has ended.
func (s *Server) abandon(task a2a.TaskID, t *turn) {
	t.pending.answer <- permission.Reject
	t.cancel()
	go func() {
		<-t.done
		s.endTurn(task, t)
	}()
}

// finish writes the turn's answer as the task's artifact and its end as
// the final state, with the tree's usage.
func (s *Server) finish(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue, t *turn, end session.TurnEnd) error {
	events := t.a.Session().Events()[t.from:]
	var meta map[string]any
	if u := subagent.UsageFromEvents(events); len(u) > 0 {
		meta = map[string]any{a2achild.MetaUsage: u}
	}
	if answer := finalText(events); answer != "" {
		art := a2a.NewArtifactEvent(rc, a2a.TextPart{Text: answer})
		art.Artifact.Name = "answer"
		art.LastChunk = true
		if err := q.Write(ctx, art); err != nil && ctx.Err() == nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil // cancelled: tasks/cancel wrote the end
	}
	switch end.Reason.Kind {
	case session.EndCompleted:
		return writeStatus(ctx, rc, q, a2a.TaskStateCompleted, "", meta)
	case session.EndAborted, session.EndInterrupted:
		return writeStatus(ctx, rc, q, a2a.TaskStateCanceled, "cancelled", meta)
	case session.EndBlocked:
		return writeStatus(ctx, rc, q, a2a.TaskStateRejected, "the turn was blocked", meta)
	case session.EndMaxTokens, session.EndBudget, session.EndMaxSteps:
		return writeStatus(ctx, rc, q, a2a.TaskStateFailed, fmt.Sprintf("the turn ended early: %s", end.Reason.Kind), meta)
	}
	msg := "the turn failed"
	if f := end.Reason.Error; f != nil {
		msg = fmt.Sprintf("the turn failed: %s (%s)", f.Message, f.Code)
	}
	return writeStatus(ctx, rc, q, a2a.TaskStateFailed, msg, meta)
}

// Cancel implements a2asrv.AgentExecutor: the canceled state ends the
// execution, whose context cancels the turn; a turn waiting for an answer
// is cancelled here. The tree is stopped with it.
func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if t := e.s.resume(rc.TaskID); t != nil {
		e.s.abandon(rc.TaskID, t)
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// open returns the agent of contextID's session: a new one, or the stored
// session continued. depth is the caller's delegation depth: the agent's
// children start one below it.
func (s *Server) open(ctx context.Context, contextID string, depth int, asker permission.Asker) (*agent.Agent, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("dsh is shutting down")
	}
	if len(s.running)+s.opening >= s.opts.MaxTasks {
		s.mu.Unlock()
		return nil, &busyError{max: s.opts.MaxTasks}
	}
	id, known := s.sessions[contextID]
	s.opening++
	s.wg.Add(1)
	s.mu.Unlock()
	policy := s.opts.Policy
	if s.opts.Asker != nil {
		asker = s.opts.Asker
	}
	co := agent.CreateOptions{Options: s.opts.AgentOptions, Policy: &policy, Asker: asker, TokenBudget: s.opts.TokenBudget}
	co.Options.SubagentDepth = max(co.Options.SubagentDepth, depth)
	if known {
		co.SessionID, co.Resume = id, true
	} else {
		co.Cwd, co.DelegationDepth = s.opts.Cwd, depth
	}
	a, err := s.opts.Agents.Create(context.WithoutCancel(ctx), co)
	s.mu.Lock()
	s.opening--
	if err != nil {
		s.mu.Unlock()
		s.wg.Done()
		return nil, fmt.Errorf("create the task's agent: %w", err)
	}
	if _, ok := s.sessions[contextID]; !ok && len(s.sessions) >= maxContexts {
		for k := range s.sessions { // forget one: its next message starts a new session
			delete(s.sessions, k)
			break
		}
	}
	s.sessions[contextID] = a.ID()
	s.running[a] = struct{}{}
	s.mu.Unlock()
	return a, nil
}

// release stops a's tree and disposes it: no child or process of the task
// outlives it.
func (s *Server) release(a *agent.Agent) {
	s.opts.Subagents.InterruptTree(a.ID(), "the A2A task ended")
	if err := a.Dispose(context.Background()); err != nil {
		s.opts.Log.Warn("a2a: disposing a task's agent", "agent", a.ID(), "err", err)
	}
	s.mu.Lock()
	delete(s.running, a)
	s.mu.Unlock()
	s.wg.Done()
}

// busyError refuses a task while MaxTasks run.
type busyError struct{ max int }

func (e *busyError) Error() string {
	return fmt.Sprintf("dsh a2a runs at most %d tasks at once: try again when one has ended", e.max)
}

// relay reports the activity of a's children (their starts, tool calls and
// ends) as working status updates, until stop is called. Updates that the
// client cannot take fast enough are dropped, never queued without bound.
func (s *Server) relay(ctx context.Context, a *agent.Agent, rc *a2asrv.RequestContext, q eventqueue.Queue) (stop func()) {
	updates := make(chan string, 64)
	quit, done := make(chan struct{}), make(chan struct{})
	post := func(text string) {
		select {
		case updates <- text:
		default:
		}
	}
	unsubscribe := s.opts.Events.Subscribe(func(e event.Event) {
		switch e := e.(type) {
		case subagent.Started:
			if e.ParentID == a.ID() {
				post(fmt.Sprintf("[%s] started", subagent.ChildLabel(e.Provider, e.Label)))
			}
		case subagent.ProgressEvent:
			if e.ParentID == a.ID() && e.Kind == subagent.ProgressToolCall {
				post(fmt.Sprintf("[%s] %s", subagent.ChildLabel(e.Provider, e.Label), e.Tool))
			}
		case subagent.Ended:
			if e.ParentID == a.ID() {
				post(fmt.Sprintf("[%s] %s", subagent.ChildLabel(e.Provider, e.Label), e.StopReason))
			}
		}
	})
	go func() {
		defer close(done)
		for {
			select {
			case text := <-updates:
				m := a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: text})
				if q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, m)) != nil {
					return
				}
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		unsubscribe()
		close(quit)
		<-done
	}
}

// finalText is the text of the turn's last assistant message.
func finalText(events []session.Event) string {
	for i := len(events) - 1; i >= 0; i-- {
		if m, ok := events[i].Data.(session.AssistantMessage); ok {
			return content.JoinText(m.Message.Content)
		}
	}
	return ""
}
