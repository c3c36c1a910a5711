package acpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
)

// createOptions describe a session's agent. A dsh parent's `_meta` (see
// internal/acpmeta) makes it a child: lineage and depth recorded in its
// session, the parent's policy narrowing the server's, the tree's
// remaining budget, and the delegation's persona, tool filter, output
// schema (recorded by the returned capture) and depth cap, applied as an
// in-process child gets them (inproc.Shape). Meta can only narrow what the
// server allows.
func (s *server) createOptions(id acpsdk.SessionId, cwd string, meta map[string]any) (agent.CreateOptions, *inproc.Capture, error) {
	opts := s.opts.AgentOptions
	policy := s.opts.Policy
	budget := s.opts.TokenBudget
	co := agent.CreateOptions{SessionID: string(id), Cwd: cwd, Asker: s.asker(id)}
	var capture *inproc.Capture
	var m acpmeta.Session
	if acpmeta.Get(meta, &m) {
		if m.Policy != nil {
			policy = policy.NarrowBy(*m.Policy)
		}
		if m.TokenBudget > 0 && (budget == 0 || m.TokenBudget < budget) {
			budget = m.TokenBudget
		}
		if m.ParentSession != "" {
			co.ParentSession, co.Origin = m.ParentSession, session.OriginSubagent
			if d, ok, err := subagent.ParseDescriptor(m.Descriptor); ok && err == nil {
				co.Setup = func(a *agent.Agent) error { return subagent.AppendDescriptor(a.Session(), d) }
			}
		}
		if count := s.countLive(id, m); count != nil {
			co.Setup = chainSetup(co.Setup, count)
		}
		co.DelegationDepth = max(m.Depth, 0)
		opts.SubagentDepth = max(opts.SubagentDepth, co.DelegationDepth)
		if m.MaxDepth != nil && (opts.MaxDelegationDepth == 0 || *m.MaxDepth < opts.MaxDelegationDepth) {
			opts.MaxDelegationDepth = max(*m.MaxDepth, 1) // 0 would mean none; a child at depth ≥ 1 already passed a cap of 0
		}
		shape, c, err := shapeOf(m)
		if err != nil {
			return co, nil, err
		}
		if shape != nil {
			co.Setup, capture = chainSetup(co.Setup, shape), c
		}
	}
	co.Options, co.Policy, co.TokenBudget = opts, &policy, budget
	return co, capture, nil
}

// shapeOf is the setup that applies a dsh parent's persona, tool filter
// and output schema to a session's agent (nil for none), and the capture
// of its structured result (nil without a schema).
func shapeOf(m acpmeta.Session) (func(*agent.Agent) error, *inproc.Capture, error) {
	shaping := inproc.Shaping{Persona: m.Persona, ToolFilter: m.ToolFilter}
	var capture *inproc.Capture
	if len(m.OutputSchema) > 0 {
		schema := new(jsonschema.Schema)
		if err := json.Unmarshal(m.OutputSchema, schema); err != nil {
			return nil, nil, acpsdk.NewInvalidParams(fmt.Sprintf("_meta.%s.outputSchema is not a JSON schema: %v", acpmeta.Key, err))
		}
		if err := subagent.CheckSchema(schema); err != nil {
			return nil, nil, acpsdk.NewInvalidParams(fmt.Sprintf("_meta.%s.outputSchema: %v", acpmeta.Key, err))
		}
		shaping.OutputSchema, capture = schema, &inproc.Capture{}
	}
	if shaping == (inproc.Shaping{}) {
		return nil, nil, nil
	}
	return func(a *agent.Agent) error { return inproc.Shape(a, shaping, capture) }, capture, nil
}

// checkMeta validates a client's dsh `_meta` (see internal/acpmeta) before
// it shapes a session: one that does not decode, or whose depth,
// parentSession or budget is out of bounds, is invalid params naming the
// field.
func checkMeta(meta map[string]any) error {
	if _, ok := meta[acpmeta.Key]; !ok {
		return nil
	}
	var m acpmeta.Session
	if !acpmeta.Get(meta, &m) {
		return acpsdk.NewInvalidParams(fmt.Sprintf("_meta.%s is not dsh's session extension (an object of parentSession, depth, policy, tokenBudget, descriptor)", acpmeta.Key))
	}
	if err := m.Check(); err != nil {
		return acpsdk.NewInvalidParams(err.Error())
	}
	return nil
}

// Permission options offered to the client.
const (
	optionAllowOnce   = "allow-once"
	optionAllowAlways = "allow-always"
	optionRejectOnce  = "reject-once"
)

// asker asks the client about the calls of session id's tree that the
// policy says to ask about. The request's title names the asking agent; its
// `_meta` carries the dsh tool and the agent's path, so that a dsh parent
// can relay the ask to its own client.
func (s *server) asker(id acpsdk.SessionId) permission.Asker {
	return permission.AskerFunc(func(ctx context.Context, req permission.Request) (permission.Answer, error) {
		cwd := ""
		if a, ok := s.opts.Agents.Get(req.SessionID); ok {
			cwd = a.Cwd() // a child's, which may be a worktree of its own
		}
		v := viewOf(req.Tool, string(req.Arguments), cwd)
		title := v.title
		if len(req.Agent) > 0 {
			title = req.Who() + ": " + title
		}
		var input any
		if json.Unmarshal(req.Arguments, &input) != nil {
			input = string(req.Arguments)
		}
		kind := v.kind
		resp, err := s.requestPermission(ctx, acpsdk.RequestPermissionRequest{SessionId: id,
			Meta: acpmeta.Set(nil, acpmeta.Permission{Tool: req.Tool, Agent: req.Agent}),
			ToolCall: acpsdk.ToolCallUpdate{ToolCallId: acpsdk.ToolCallId(req.CallID), Title: &title, Kind: &kind, RawInput: input,
				Locations: v.locations, Content: v.diff},
			Options: []acpsdk.PermissionOption{
				{OptionId: optionAllowOnce, Name: "Allow", Kind: acpsdk.PermissionOptionKindAllowOnce},
				{OptionId: optionAllowAlways, Name: "Allow for this session", Kind: acpsdk.PermissionOptionKindAllowAlways},
				{OptionId: optionRejectOnce, Name: "Reject", Kind: acpsdk.PermissionOptionKindRejectOnce},
			}})
		switch {
		case err != nil:
			return permission.Reject, fmt.Errorf("the permission request failed: %v", err)
		case resp.Outcome.Cancelled != nil:
			return permission.Reject, fmt.Errorf("the client cancelled the permission request")
		case resp.Outcome.Selected == nil:
			return permission.Reject, nil
		}
		switch resp.Outcome.Selected.OptionId {
		case optionAllowOnce:
			return permission.AllowOnce, nil
		case optionAllowAlways:
			return permission.AllowAlways, nil
		}
		return permission.Reject, nil
	})
}

// turnUsage sums the usage of a turn's events, descendants included: as
// ACP's usage, and per "provider/model" in the response's `_meta`.
func turnUsage(events []session.Event) (*acpsdk.Usage, map[string]content.Usage) {
	byModel := subagent.UsageFromEvents(events)
	if len(byModel) == 0 {
		return nil, nil
	}
	var total content.Usage
	for _, k := range slices.Sorted(maps.Keys(byModel)) {
		total = total.Add(byModel[k])
	}
	cached := int(total.CacheRead)
	thought := int(total.Reasoning)
	u := &acpsdk.Usage{InputTokens: int(total.Input + total.CacheRead), OutputTokens: int(total.Output),
		CachedReadTokens: &cached, ThoughtTokens: &thought, TotalTokens: int(total.Input + total.CacheRead + total.Output)}
	return u, byModel
}
