package subagenttool

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// The control tools of continuable children.
const (
	ToolSendMessage = "send_message"
	ToolInterrupt   = "interrupt_agent"
	ToolListAgents  = "list_agents"
	ToolReport      = "report" // child-scoped: only inside a continuable child
)

// MountControl registers send_message, interrupt_agent and list_agents,
// and gives every continuable child created or rebuilt from now on a
// report tool of its own. The disposer removes them all, report from the
// resident children too.
//
// Unlike the reference, report's guidance is in its description and the
// child's first message, not a prompt section of the child: the child's
// system prompt stays its parent's, byte for byte, so that its first
// request reuses the parent's cached prefix; the child-only tool comes
// after the shared ones.
func MountControl(deps Deps) (dispose func(), err error) {
	var undo []func()
	dispose = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	for _, def := range []tool.Definition{sendMessageTool(deps.Subagents), interruptTool(deps.Subagents), listAgentsTool(deps.Subagents)} {
		un, err := deps.Tools.Register(def)
		if err != nil {
			dispose()
			return nil, err
		}
		undo = append(undo, un)
	}
	g := &grants{report: reportTool(deps.Subagents), held: map[*agent.Agent]func(){}}
	undo = append(undo, g.revoke, deps.Subagents.AddContinuableSetup(g.grant)) // undone in reverse: no new grant, then none left
	return dispose, nil
}

// grants gives continuable children their report tool and takes it back
// from the resident ones when the control tools are removed.
type grants struct {
	report  tool.Definition
	mu      sync.Mutex
	held    map[*agent.Agent]func() // live children's report, by child: its removal
	revoked bool
}

// grant registers report in child's scope (a continuable setup).
func (g *grants) grant(child *agent.Agent) error {
	un, err := child.Tools().Register(g.report)
	if err != nil {
		return err
	}
	g.mu.Lock()
	if g.revoked { // a setup that began before the removal
		g.mu.Unlock()
		un()
		return nil
	}
	g.held[child] = un
	g.mu.Unlock()
	forget := func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.held, child)
	}
	if !child.OnDispose(forget) {
		forget()
	}
	return nil
}

// revoke removes report from every resident child and grants no more.
func (g *grants) revoke() {
	g.mu.Lock()
	held := g.held
	g.held, g.revoked = map[*agent.Agent]func(){}, true
	g.mu.Unlock()
	for _, un := range held {
		un()
	}
}

func callerOf(call tool.Call, name string) (*agent.Agent, error) {
	a, ok := call.Caller.(*agent.Agent)
	if !ok || a == nil {
		return nil, tool.Errorf(tool.CodeFailed, "%s requires a calling agent", name)
	}
	return a, nil
}

type sendArgs struct {
	SubagentID string `json:"subagent_id" jsonschema:"the id of a subagent you started, as its result named it"`
	Message    string `json:"message" jsonschema:"what to tell it: a self-contained instruction or question"`
}

func sendMessageTool(svc *subagent.Service) tool.Definition {
	const desc = "Send a message to a subagent you started, by the id its result named. The message becomes the subagent's " +
		"next turn, after whatever it is doing now: it cannot redirect its current work (interrupt_agent stops that). " +
		"No reply comes back here: you are told when the subagent finishes, with its closing message. " +
		"A subagent that finished earlier picks up where it left off, with everything it did before. " +
		"An error result means the message was not delivered."
	return tool.Func(ToolSendMessage, desc, true, func(ctx context.Context, call tool.Call, args sendArgs) (tool.Result, error) {
		a, err := callerOf(call, ToolSendMessage)
		if err != nil {
			return tool.Result{}, err
		}
		if strings.TrimSpace(args.SubagentID) == "" || strings.TrimSpace(args.Message) == "" {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "subagent_id and message are required")
		}
		if _, err := svc.Followup(ctx, a, args.SubagentID, []content.Block{content.Text(args.Message)}); err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult("message queued as the next turn for subagent " + args.SubagentID), nil
	})
}

type interruptArgs struct {
	AgentID string `json:"agent_id" jsonschema:"the id of a subagent below you"`
}

func interruptTool(svc *subagent.Service) tool.Definition {
	const desc = "Stop the current turn of a subagent below you (a child, or one of its descendants). Only that turn " +
		"stops: messages queued for it wait until your next send_message to it, and its own subagents keep running. " +
		"It returns once the interrupt is accepted; a subagent that already finished is left as it is."
	return tool.Func(ToolInterrupt, desc, true, func(ctx context.Context, call tool.Call, args interruptArgs) (tool.Result, error) {
		a, err := callerOf(call, ToolInterrupt)
		if err != nil {
			return tool.Result{}, err
		}
		if err := svc.Interrupt(a, args.AgentID); err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult("interrupt requested for agent " + args.AgentID), nil
	})
}

type listArgs struct {
	Scope string `json:"scope,omitempty" jsonschema:"children (default): the subagents you started; descendants: every subagent below you"`
}

func listAgentsTool(svc *subagent.Service) tool.Definition {
	const desc = "List the subagents you can continue: your children, or with scope descendants everything below you, " +
		"each with its status: running, idle (alive, waiting) or ready (not running; send_message continues it — " +
		"ready is not finished for good). Don't poll it: you are told when a subagent finishes. send_message reaches " +
		"your own children only (depth 1); deeper ones take only interrupt_agent."
	def := tool.Func(ToolListAgents, desc, true, func(ctx context.Context, call tool.Call, args listArgs) (tool.Result, error) {
		a, err := callerOf(call, ToolListAgents)
		if err != nil {
			return tool.Result{}, err
		}
		var rows []subagent.ChildRow
		switch args.Scope {
		case "", "children":
			rows, err = svc.ListChildren(ctx, a.ID())
		case "descendants":
			rows, err = svc.ListDescendants(ctx, a.ID())
		default:
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "scope must be children or descendants, got %q", args.Scope)
		}
		if err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult(RenderAgents(rows, args.Scope == "descendants", svc.Residency)), nil
	})
	def.Parameters.Properties["scope"].Enum = []any{"children", "descendants"}
	return def
}

// RenderAgents renders a listing as list_agents shows it: one line per
// continuable child or diagnostic (one-shot children are left out), with
// its parent and depth when descendants is set.
func RenderAgents(rows []subagent.ChildRow, descendants bool, residency func(id string) subagent.Residency) string {
	var lines []string
	for _, r := range rows {
		where := ""
		if descendants {
			where = fmt.Sprintf(" parent=%s depth=%d", r.Parent, r.Depth)
		}
		switch {
		case r.Diagnostic != "":
			lines = append(lines, fmt.Sprintf("%s [diagnostic: %s]%s", r.ID, r.Diagnostic, where))
		case r.Mode == subagent.Continuable:
			lines = append(lines, fmt.Sprintf("%s [%s]%s — %s", r.ID, residency(r.ID), where, r.Label))
		}
	}
	if len(lines) == 0 {
		return "(no subagents)"
	}
	return strings.Join(lines, "\n")
}

type reportArgs struct {
	Output string `json:"output" jsonschema:"the report: self-contained, for an agent that does not see your conversation"`
}

func reportTool(svc *subagent.Service) tool.Definition {
	const desc = "Send a report to the agent that started you, while you keep working. Use it for findings that change " +
		"what that agent should do now; your final message reaches it anyway when you finish, so make that one a complete, " +
		"self-contained report. Reporting does not end your turn."
	return tool.Func(ToolReport, desc, true, func(ctx context.Context, call tool.Call, args reportArgs) (tool.Result, error) {
		a, err := callerOf(call, ToolReport)
		if err != nil {
			return tool.Result{}, err
		}
		if strings.TrimSpace(args.Output) == "" {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "output is required")
		}
		id, err := svc.Report(ctx, a, []content.Block{content.Text(args.Output)}, false)
		if err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult("report accepted by the agent that started you as message " + id), nil
	})
}
