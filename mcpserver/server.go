// Package mcpserver serves dsh as a Model Context Protocol server, so that
// any MCP client (Claude Code, Codex, an editor) can delegate work to
// dsh's children. It exposes one tool per configured subagent tool
// instance: a call delegates a task to that instance's provider in the
// foreground, reporting the child's progress as MCP progress notifications
// and cancelled by MCP's cancellation, or, with run_in_background, as a
// background task the task_* tools (also exposed) collect. Each MCP
// session gets a top-level dsh agent, the parent of the children it
// starts, disposed with the session.
package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

// Options configure a Server.
type Options struct {
	Agents    *agent.Registry
	Subagents *subagent.Service
	Tools     *tool.Registry // where the subagent and task tools are mounted
	Events    *event.Bus
	// Instances are the subagent tool instances to serve (subagents.tools);
	// each must be mounted in Tools.
	Instances []subagenttool.Config
	// AgentOptions, Policy, Asker and TokenBudget describe the top-level
	// agent of each MCP session. A nil Asker asks the client's user with
	// an MCP elicitation when the client can show forms (see ask.go), and
	// refuses otherwise.
	AgentOptions agent.Options
	Policy       permission.Policy
	Asker        permission.Asker
	TokenBudget  int64
	// AskTimeout bounds how long a foreground call that handed the client
	// an ask (protocol 2026-07-28) waits for the client's answer before it
	// is aborted (default 10 minutes).
	AskTimeout time.Duration
	// Cwd is the session agents' working directory (absolute, required).
	Cwd string
	// SessionTimeout closes an HTTP session idle that long, disposing its
	// agent and children (default 1h).
	SessionTimeout time.Duration
	// MaxFrame is the limit in bytes of one client frame over stdio
	// (ServeStdio; default DefaultMaxFrame); a longer one is answered with
	// an error and the connection goes on.
	MaxFrame int
	// DrainTimeout bounds how long ServeStdio goes on answering the
	// client's pending requests after its input ended (default
	// DefaultDrainTimeout); then the connection closes and the calls
	// still running are cancelled.
	DrainTimeout time.Duration
	Version      string
	Log          *slog.Logger
}

// Server is dsh as an MCP server.
type Server struct {
	opts Options
	mcp  *mcp.Server

	mu     sync.Mutex
	roots  map[*mcp.ServerSession]*root
	closed bool
	wg     sync.WaitGroup // the goroutines that dispose a session's agent when it ends
}

// root is the top-level agent of one MCP session.
type root struct {
	ready chan struct{} // closed once agent and err are set
	agent *agent.Agent
	err   error
	asks  *asks // the session's asker, unless Options.Asker answers
}

// New builds the server and its tools.
func New(opts Options) (*Server, error) {
	if opts.Agents == nil || opts.Subagents == nil || opts.Tools == nil || opts.Events == nil {
		return nil, errors.New("mcpserver: Agents, Subagents, Tools and Events are required")
	}
	if !filepath.IsAbs(opts.Cwd) {
		return nil, fmt.Errorf("mcpserver: the working directory %q is not absolute", opts.Cwd)
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	opts.SessionTimeout = cmp.Or(opts.SessionTimeout, time.Hour)
	opts.AskTimeout = cmp.Or(opts.AskTimeout, 10*time.Minute)
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = DefaultMaxFrame
	}
	s := &Server{opts: opts, roots: map[*mcp.ServerSession]*root{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "dsh", Title: "dsh subagents", Version: cmp.Or(opts.Version, "dev")},
		&mcp.ServerOptions{Logger: opts.Log, Instructions: instructions})
	specs := map[string]content.ToolSpec{}
	for _, spec := range opts.Tools.NewScope().Specs() {
		specs[spec.Name] = spec
	}
	outcome, err := jsonschema.For[Outcome](nil)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: the output schema: %w", err)
	}
	background := false
	for _, inst := range opts.Instances {
		inst.ToolName = cmp.Or(inst.ToolName, "subagent")
		spec, ok := specs[inst.ToolName]
		if !ok {
			return nil, fmt.Errorf("mcpserver: the subagent tool %s is not mounted (is provider %q registered?)", inst.ToolName, inst.Provider)
		}
		background = background || inst.EnableRunInBackground == nil || *inst.EnableRunInBackground
		t := mcpTool(spec, "delegate to "+inst.Provider)
		t.OutputSchema = outcome
		s.mcp.AddTool(t, s.delegate(inst))
	}
	if background {
		for _, name := range []string{task.ToolList, task.ToolOutput, task.ToolKill} {
			if spec, ok := specs[name]; ok {
				s.mcp.AddTool(mcpTool(spec, strings.ReplaceAll(name, "_", " ")), s.passThrough(name))
			}
		}
	}
	return s, nil
}

const instructions = "dsh delegates tasks to child agents. Call a subagent tool with a short description and a " +
	"self-contained prompt; the result carries the child's output, its stop reason and the tokens it used. " +
	"With run_in_background the call returns a task id at once: collect the result with task_output."

// mcpTool is a dsh tool's spec as an MCP tool.
func mcpTool(spec content.ToolSpec, title string) *mcp.Tool {
	return &mcp.Tool{Name: spec.Name, Title: title, Description: spec.Description, InputSchema: spec.Parameters}
}

// Run serves one client over t until it disconnects or ctx ends, then
// disposes its session's agent.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return nil
	case clientGone(err): // a notification raced the client's close
		return nil
	}
	return err
}

// clientGone reports whether err says the client closed the connection.
func clientGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE)
}

// Handler serves clients over streamable HTTP, one session each.
func (s *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{Logger: s.opts.Log, SessionTimeout: s.opts.SessionTimeout})
}

// Close ends every session and disposes its agent, which cancels its
// children. It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	sessions := make([]*mcp.ServerSession, 0, len(s.roots))
	for ss := range s.roots {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.Close()
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

// root returns the session's top-level agent, creating it on the
// session's first call. It is disposed when the session ends.
func (s *Server) root(ctx context.Context, ss *mcp.ServerSession) (*agent.Agent, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("dsh is shutting down")
	}
	if r, ok := s.roots[ss]; ok {
		s.mu.Unlock()
		<-r.ready
		return r.agent, r.err
	}
	r := &root{ready: make(chan struct{})}
	s.roots[ss] = r
	s.wg.Add(1)
	s.mu.Unlock()
	policy := s.opts.Policy
	asker := s.opts.Asker
	if asker == nil {
		r.asks = newAsks(ss, s.opts.Agents, s.opts.AskTimeout)
		asker = r.asks
	}
	r.agent, r.err = s.opts.Agents.Create(context.WithoutCancel(ctx), agent.CreateOptions{Cwd: s.opts.Cwd, ToolHost: true,
		Options: s.opts.AgentOptions, Policy: &policy, Asker: asker, TokenBudget: s.opts.TokenBudget})
	if r.asks != nil {
		r.asks.mu.Lock()
		r.asks.root = r.agent
		r.asks.mu.Unlock()
	}
	close(r.ready)
	go func() {
		defer s.wg.Done()
		if r.err == nil {
			ss.Wait()
			if r.asks != nil {
				r.asks.close()
			}
			r.agent.Dispose(context.Background())
		}
		s.mu.Lock()
		delete(s.roots, ss)
		s.mu.Unlock()
	}()
	return r.agent, r.err
}

// asksOf returns the asker of ss's session when it is dsh's own.
func (s *Server) asksOf(ss *mcp.ServerSession) *asks {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.roots[ss]; ok {
		return r.asks
	}
	return nil
}

// args are a subagent tool's arguments.
type args struct {
	Description     string `json:"description"`
	Prompt          string `json:"prompt"`
	RunInBackground *bool  `json:"run_in_background"`
	SubagentType    string `json:"subagent_type"`
	Isolation       string `json:"isolation"`
}

// Outcome is the structured content of a delegation's result, which the
// subagent tools declare as their output schema.
type Outcome struct {
	Output     string                   `json:"output" jsonschema:"the child's answer, or what went wrong"`
	StopReason subagent.StopReason      `json:"stopReason,omitempty" jsonschema:"why the child stopped (completed, error, …); absent for a background start"`
	Diagnostic string                   `json:"diagnostic,omitempty" jsonschema:"what went wrong, when the child did not complete"`
	TaskID     string                   `json:"taskId,omitempty" jsonschema:"the background task a run_in_background call started: collect it with task_output"`
	Usage      map[string]content.Usage `json:"usage,omitempty" jsonschema:"the tokens the child used, by provider/model"`
	CostUSD    float64                  `json:"costUSD,omitempty" jsonschema:"what the child cost, in US dollars, when its routes have prices"`
}

// delegate handles the calls of one subagent tool instance.
func (s *Server) delegate(inst subagenttool.Config) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		parent, err := s.root(ctx, req.Session)
		if err != nil {
			return errorResult(err), nil
		}
		asks := s.asksOf(req.Session)
		if state := req.Params.RequestState; state != "" { // the client answers a round's ask
			if asks == nil {
				return errorResult(errors.New("unknown or expired requestState")), nil
			}
			c, err := asks.resume(state, req.Params.InputResponses)
			if err != nil {
				return errorResult(err), nil
			}
			rel := s.relay(ctx, req, parent)
			defer rel.stop()
			rel.follow(c.childID())
			return asks.round(ctx, c), nil
		}
		var a args
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return errorResult(fmt.Errorf("invalid arguments: %v", err)), nil
		}
		// Every call takes the subagent tool's road to its child, as the
		// session agent's own call would: the instance's settings, the
		// type's policy, hooks, schema and provider, a worktree, the
		// background task.
		rel := s.relay(ctx, req, parent)
		defer rel.stop()
		if asks != nil && inRounds(req.Session) && (a.RunInBackground == nil || !*a.RunInBackground) {
			return asks.round(ctx, asks.start(s, parent, inst.ToolName, req.Params.Arguments, rel)), nil
		}
		return s.delegateByTool(ctx, parent, inst.ToolName, req.Params.Arguments, rel.follow, a.RunInBackground != nil && *a.RunInBackground), nil
	}
}

// delegateByTool runs the subagent tool name as parent's call, following
// its child with follow, and gives its structured content (Outcome): a
// foreground child's result, or a background call's task.
func (s *Server) delegateByTool(ctx context.Context, parent *agent.Agent, name string, arguments json.RawMessage, follow func(string), background bool) *mcp.CallToolResult {
	var settled *subagent.Result
	tr := &subagenttool.Trace{Started: follow, Settled: func(res subagent.Result) { settled = &res }}
	out, r := s.execute(subagenttool.WithTrace(ctx, tr), parent, name, arguments)
	if settled != nil {
		out.StructuredContent = outcomeOf(*settled)
	} else {
		out.StructuredContent = toolOutcome(textOf(out), r, background)
	}
	return out
}

// outcomeOf is the structured content of a settled child's result.
func outcomeOf(res subagent.Result) Outcome {
	return Outcome{Output: content.JoinText(res.Output), StopReason: res.StopReason, Diagnostic: res.Diagnostic,
		Usage: res.Usage, CostUSD: res.CostUSD}
}

func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Error: " + err.Error()}}, IsError: true}
}

// passThrough handles a dsh tool run as the session's agent (the task
// tools, which act on that agent's background tasks).
func (s *Server) passThrough(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		parent, err := s.root(ctx, req.Session)
		if err != nil {
			return errorResult(err), nil
		}
		res, _ := s.execute(ctx, parent, name, req.Params.Arguments)
		return res, nil
	}
}

// execute runs a dsh tool as parent and renders its result; r is the
// tool's.
func (s *Server) execute(ctx context.Context, parent *agent.Agent, name string, arguments json.RawMessage) (_ *mcp.CallToolResult, r tool.Result) {
	r = parent.Tools().Execute(ctx, tool.Call{ID: "mcp-" + name, Name: name, Arguments: arguments, Cwd: parent.Cwd(), Caller: parent})
	out := &mcp.CallToolResult{IsError: r.IsError}
	for _, b := range r.Content {
		if b.Type == content.TypeText {
			out.Content = append(out.Content, &mcp.TextContent{Text: b.Text})
		}
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	return out, r
}

// backgroundStarted opens the subagent tool's answer to a background call,
// before the task id.
const backgroundStarted = "started background subagent task "

// toolOutcome is the structured content of a subagent tool's own result:
// a background start (with its task id), or a foreground call for an agent
// type or a worktree.
func toolOutcome(text string, r tool.Result, background bool) Outcome {
	if background && !r.IsError {
		id, _ := strings.CutPrefix(text, backgroundStarted)
		return Outcome{Output: text, TaskID: strings.TrimSpace(id)}
	}
	out := Outcome{Output: text, StopReason: subagent.Completed, Usage: r.Usage}
	if r.IsError {
		out.StopReason, out.Diagnostic = subagent.Failed, text
	}
	return out
}

// textOf joins the text of a result.
func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// progressMessage describes a child's activity in one line, "" for
// activity not worth a notification (streamed text).
func progressMessage(p subagent.Progress) string {
	switch p.Kind {
	case subagent.ProgressTurnStart:
		return fmt.Sprintf("turn %d started", p.Turn)
	case subagent.ProgressToolCall:
		return "calling " + p.Tool
	case subagent.ProgressToolResult:
		if p.IsError {
			return "a tool call failed"
		}
		return "a tool call finished"
	case subagent.ProgressTurnEnd:
		return fmt.Sprintf("turn %d ended: %s", p.Turn, p.Text)
	}
	return ""
}

// maxEarly bounds the progress held for a child whose run id is not known
// yet.
const maxEarly = 32

// relay sends a foreground child's progress to the client as progress
// notifications, from a goroutine of its own so that a slow client never
// slows the child (notifications beyond its buffer are dropped).
type relay struct {
	out    chan string
	done   chan struct{}
	unsub  func()
	mu     sync.Mutex
	child  string                   // "" until the run is ready
	early  []subagent.ProgressEvent // of the parent's children, before that
	closed bool
}

func (s *Server) relay(ctx context.Context, req *mcp.CallToolRequest, parent *agent.Agent) *relay {
	token := req.Params.GetProgressToken()
	r := &relay{out: make(chan string, 64), done: make(chan struct{})}
	if token == nil {
		close(r.done)
		r.closed = true
		r.unsub = func() {}
		return r
	}
	go func() {
		defer close(r.done)
		n := 0
		for msg := range r.out {
			n++
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
				Progress: float64(n), Message: msg}); err != nil {
				s.opts.Log.Debug("mcpserver: progress not delivered", "err", err)
			}
		}
	}()
	r.unsub = event.On(s.opts.Events, func(e subagent.ProgressEvent) {
		if e.ParentID != parent.ID() {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case r.closed:
		case r.child == "":
			if len(r.early) < maxEarly {
				r.early = append(r.early, e)
			}
		case e.ChildID == r.child:
			r.send(e.Progress)
		}
	})
	return r
}

// follow starts relaying the progress of the run with id child.
func (r *relay) follow(child string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.child = child
	for _, e := range r.early {
		if e.ChildID == child {
			r.send(e.Progress)
		}
	}
	r.early = nil
}

// send queues a notification; r.mu must be held.
func (r *relay) send(p subagent.Progress) {
	msg := progressMessage(p)
	if msg == "" || r.closed {
		return
	}
	select {
	case r.out <- msg:
	default:
	}
}

// stop ends the relay once its queued notifications are sent.
func (r *relay) stop() {
	r.unsub()
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.out)
	}
	r.mu.Unlock()
	<-r.done
}
