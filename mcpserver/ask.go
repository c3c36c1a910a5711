package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/permission"
)

// An ask is a form with one choice, shown to the user of the MCP client
// (elicitation). A client on a protocol before 2026-07-28 is asked
// directly; a newer one cannot be sent requests while it waits for a
// call (SEP-2322), so a foreground call answers with the ask as an input
// request instead, and the client calls again with the answer: the
// delegation waits in between, under an unguessable request state bound
// to the session.

// The decisions an ask offers.
const (
	decisionAllow       = "allow"
	decisionAllowAlways = "allow-always"
	decisionReject      = "reject"
)

// askID is the id of the one input request of a call's round.
const askID = "permission"

// maxAskArguments bounds the arguments an ask quotes: a hostile model's
// huge call must not become a huge form.
const maxAskArguments = 1000

// askSchema is the form an ask shows.
func askSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Required: []string{"decision"}, Properties: map[string]*jsonschema.Schema{
		"decision": {Type: "string", Title: "Decision", Enum: []any{decisionAllow, decisionAllowAlways, decisionReject},
			Description: "allow: this call runs; allow-always: this and later calls of the tool in this session run; reject: it does not run"},
	}}
}

// askParams is the elicitation of req.
func askParams(req permission.Request) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "form", Message: askMessage(req), RequestedSchema: askSchema()}
}

// askMessage says who wants to run what. The asking child's path (the
// model's descriptions) and the arguments are cut at maxAskWho and
// maxAskArguments bytes, and control characters show as spaces.
func askMessage(req permission.Request) string {
	return plain(fmt.Sprintf("dsh: %s wants to run %s with %s. Allow it?",
		clip(req.Who(), maxAskWho), req.Tool, clip(string(req.Arguments), maxAskArguments)))
}

// maxAskWho bounds the asking child's path an ask quotes.
const maxAskWho = 300

// clip cuts s at n bytes, on a rune boundary, saying how long it was.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf(" … (%d bytes in all)", len(s))
}

// plain shows control characters and broken text as spaces.
func plain(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
}

// answerOf maps the client's answer to an ask; anything but an accepted
// allow or allow-always refuses the call, saying why.
func answerOf(tool string, res *mcp.ElicitResult) (permission.Answer, error) {
	switch {
	case res == nil:
		return permission.Reject, fmt.Errorf("the MCP client did not answer the ask about %s", tool)
	case res.Action != "accept":
		return permission.Reject, fmt.Errorf("the user of the MCP client did not approve %s (%s)", tool, res.Action)
	}
	switch res.Content["decision"] {
	case decisionAllow:
		return permission.AllowOnce, nil
	case decisionAllowAlways:
		return permission.AllowAlways, nil
	}
	return permission.Reject, fmt.Errorf("the user of the MCP client rejected %s", tool)
}

// canElicit reports whether the client of ss said it can show forms.
func canElicit(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil // neither named: forms, as the SDK assumes
}

// inputRounds reports whether ss's client takes input requests in results
// (protocol 2026-07-28 and later) instead of requests during a call.
func inputRounds(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.ProtocolVersion >= "2026-07-28"
}

// inRounds reports whether asks reach ss's client through the rounds of a
// foreground call (see call).
func inRounds(ss *mcp.ServerSession) bool { return canElicit(ss) && inputRounds(ss) }

// asks is the asker of one MCP session's tree.
type asks struct {
	ss      *mcp.ServerSession
	agents  *agent.Registry
	timeout time.Duration // how long a round's ask waits for the client's next call

	mu      sync.Mutex
	root    *agent.Agent     // the session's top-level agent, once created
	calls   map[string]*call // foreground calls between rounds or in one, by request state
	byChild map[string]*call // the same, by their child's id
}

func newAsks(ss *mcp.ServerSession, agents *agent.Registry, timeout time.Duration) *asks {
	return &asks{ss: ss, agents: agents, timeout: timeout, calls: map[string]*call{}, byChild: map[string]*call{}}
}

// Ask implements permission.Asker.
func (a *asks) Ask(ctx context.Context, req permission.Request) (permission.Answer, error) {
	switch {
	case !canElicit(a.ss):
		return permission.Reject, fmt.Errorf("%s needs approval, and this MCP client cannot be asked: it does not support "+
			"elicitation (start `dsh mcp --yes` to approve asks)", req.Tool)
	case !inputRounds(a.ss):
		res, err := a.ss.Elicit(ctx, askParams(req))
		if err != nil {
			return permission.Reject, fmt.Errorf("asking the MCP client about %s failed: %v", req.Tool, err)
		}
		return answerOf(req.Tool, res)
	}
	c := a.callOf(req.SessionID)
	if c == nil {
		return permission.Reject, fmt.Errorf("%s needs approval, and only a foreground call can ask this MCP client "+
			"(protocol 2026-07-28): run the task in the foreground, or start `dsh mcp --yes`", req.Tool)
	}
	return c.ask(ctx, req)
}

// callOf returns the foreground call whose child's tree holds session.
func (a *asks) callOf(session string) *call {
	ag, ok := a.agents.Get(session)
	a.mu.Lock()
	defer a.mu.Unlock()
	for ok && ag.Owner() != nil && ag.Owner() != a.root {
		ag = ag.Owner()
	}
	if !ok || ag.Owner() != a.root {
		return nil
	}
	return a.byChild[ag.ID()]
}

// call is a foreground delegation whose asks go to the client in rounds:
// each of the client's calls is a round, which ends with the delegation's
// result or with its next ask. Between rounds the call waits at most
// asks.timeout for the client's next call, then is dropped.
type call struct {
	state  string
	events chan callEvent     // the delegation's asks and, last, its end
	cancel context.CancelFunc // aborts the delegation

	mu      sync.Mutex
	child   string
	inRound bool        // a round takes the events
	dropped bool        // the client gave up: drop takes the events
	pending *callEvent  // the ask the client is answering
	expiry  *time.Timer // drops the call if the client does not call again
}

// callEvent is an ask (reply set) or the delegation's end.
type callEvent struct {
	req   permission.Request
	reply chan answer
	out   *mcp.CallToolResult // the call's end
}

type answer struct {
	answer permission.Answer
	err    error
}

// ask hands req to the call's current or next round and waits for the
// client's answer.
func (c *call) ask(ctx context.Context, req permission.Request) (permission.Answer, error) {
	ev := callEvent{req: req, reply: make(chan answer, 1)}
	select {
	case c.events <- ev:
	case <-ctx.Done():
		return permission.Reject, context.Cause(ctx)
	}
	select {
	case a := <-ev.reply:
		return a.answer, a.err
	case <-ctx.Done():
		return permission.Reject, context.Cause(ctx)
	}
}

// start begins a foreground call of the subagent tool name whose asks go
// through rounds, and registers it; the caller's round follows.
func (a *asks) start(s *Server, parent *agent.Agent, name string, arguments json.RawMessage, rel *relay) *call {
	ctx, cancel := context.WithCancel(context.Background())
	c := &call{state: uuid.NewString(), events: make(chan callEvent), cancel: cancel, inRound: true}
	a.mu.Lock()
	a.calls[c.state] = c
	a.mu.Unlock()
	go func() {
		out := s.delegateByTool(ctx, parent, name, arguments, func(id string) {
			a.mu.Lock()
			a.byChild[id] = c
			a.mu.Unlock()
			c.mu.Lock()
			c.child = id
			c.mu.Unlock()
			rel.follow(id)
		}, false)
		c.events <- callEvent{out: out} // a round or drop takes it
	}()
	return c
}

// childID returns the id of the call's child, once started.
func (c *call) childID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.child
}

// resume continues the call of state with the client's answer to its ask.
func (a *asks) resume(state string, responses mcp.InputResponseMap) (*call, error) {
	a.mu.Lock()
	c := a.calls[state]
	a.mu.Unlock()
	if c == nil {
		return nil, errors.New("unknown or expired requestState")
	}
	c.mu.Lock()
	ev := c.pending
	if ev == nil || c.dropped || c.inRound {
		c.mu.Unlock()
		return nil, errors.New("the call with this requestState is not waiting for an answer")
	}
	c.pending, c.inRound = nil, true
	c.expiry.Stop()
	c.mu.Unlock()
	res, _ := responses[askID].(*mcp.ElicitResult)
	ans, err := answerOf(ev.req.Tool, res)
	ev.reply <- answer{ans, err}
	return c, nil
}

// round waits for the call's next ask or its end, as the answer to the
// client's call of ctx; a cancelled round drops the call.
func (a *asks) round(ctx context.Context, c *call) *mcp.CallToolResult {
	select {
	case ev := <-c.events:
		if ev.reply == nil {
			a.forget(c)
			return ev.out
		}
		c.mu.Lock()
		c.pending, c.inRound = &ev, false
		c.expiry = time.AfterFunc(a.timeout, func() { a.drop(c) })
		c.mu.Unlock()
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{askID: askParams(ev.req)}, RequestState: c.state}
	case <-ctx.Done():
		c.mu.Lock()
		c.inRound = false
		c.mu.Unlock()
		a.drop(c)
		return errorResult(fmt.Errorf("the call was cancelled: %v", context.Cause(ctx)))
	}
}

// dropGrace is how long a dropped call's pending ask waits for the
// abort to reach it before it is refused: refused first, the child could
// go on.
const dropGrace = 5 * time.Second

// drop aborts a call the client gave up on (unless a round has it) and
// waits for its delegation to end.
func (a *asks) drop(c *call) {
	c.mu.Lock()
	if c.inRound || c.dropped {
		c.mu.Unlock()
		return
	}
	c.dropped = true
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.cancel()
	refused := answer{permission.Reject, errors.New("the MCP client did not answer")}
	var late <-chan time.Time
	if pending != nil {
		t := time.NewTimer(dropGrace)
		defer t.Stop()
		late = t.C
	}
	for {
		select {
		case ev := <-c.events:
			if ev.reply == nil {
				a.forget(c)
				return
			}
			ev.reply <- refused
		case <-late:
			pending.reply <- refused
			late = nil
		}
	}
}

// close drops the calls of a session that ended.
func (a *asks) close() {
	a.mu.Lock()
	calls := make([]*call, 0, len(a.calls))
	for _, c := range a.calls {
		calls = append(calls, c)
	}
	a.mu.Unlock()
	for _, c := range calls {
		a.drop(c)
	}
}

// forget unregisters an ended call.
func (a *asks) forget(c *call) {
	child := c.childID()
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.calls, c.state)
	delete(a.byChild, child)
}
