package acpchild

import (
	"encoding/json"
	"strings"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
)

// client answers the child agent about one run's session (the process's
// router hands it what names the session): it collects message text,
// relays progress, and answers permission requests per policy.
type client struct {
	run *run

	mu        sync.Mutex
	messages  []message // in order of first chunk
	cancelled bool
	replaying bool // session/load replays the conversation: not this run's output
}

// replay sets whether updates are the replay of a loaded conversation.
func (c *client) replay(on bool) {
	c.mu.Lock()
	c.replaying = on
	c.mu.Unlock()
}

type message struct {
	id   string // "" when the agent sends no message ids
	text strings.Builder
}

func (c *client) markCancelled() {
	c.mu.Lock()
	c.cancelled = true
	c.mu.Unlock()
}

// output is the text of the last message with text, or all text when the
// agent sends no message ids.
func (c *client) output() []content.Block {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.messages) - 1; i >= 0; i-- {
		if t := c.messages[i].text.String(); strings.TrimSpace(t) != "" {
			return []content.Block{content.Text(t)}
		}
	}
	return nil
}

func (c *client) report(p subagent.Progress) {
	if c.run.progress != nil {
		c.run.progress(p)
	}
}

// sessionUpdate takes an update of the run's session.
func (c *client) sessionUpdate(n acpsdk.SessionNotification) {
	c.mu.Lock()
	replaying := c.replaying
	c.mu.Unlock()
	if replaying {
		return
	}
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil && t.Text != "" {
			id := ""
			if u.AgentMessageChunk.MessageId != nil {
				id = *u.AgentMessageChunk.MessageId
			}
			c.mu.Lock()
			if n := len(c.messages); n == 0 || c.messages[n-1].id != id {
				c.messages = append(c.messages, message{id: id})
			}
			c.messages[len(c.messages)-1].text.WriteString(t.Text)
			c.mu.Unlock()
			c.report(subagent.Progress{Kind: subagent.ProgressText, Turn: 1, Text: t.Text})
		}
	case u.ToolCall != nil:
		c.report(subagent.Progress{Kind: subagent.ProgressToolCall, Turn: 1, Tool: u.ToolCall.Title, CallID: string(u.ToolCall.ToolCallId)})
	case u.ToolCallUpdate != nil:
		if s := u.ToolCallUpdate.Status; s != nil && (*s == acpsdk.ToolCallStatusCompleted || *s == acpsdk.ToolCallStatusFailed) {
			c.report(subagent.Progress{Kind: subagent.ProgressToolResult, Turn: 1, CallID: string(u.ToolCallUpdate.ToolCallId),
				IsError: *s == acpsdk.ToolCallStatusFailed})
		}
	}
}

// requestPermission answers a permission request of the run's session. Unless the provider rejects
// every request, the call is decided by the parent's permission policy
// (agent.Authorize): asked about in the parent's tree, naming this child
// and, for a dsh child, the descendant that asks. The request is cancelled
// once the run is.
func (c *client) requestPermission(p acpsdk.RequestPermissionRequest) acpsdk.RequestPermissionResponse {
	c.mu.Lock()
	cancelled := c.cancelled
	c.mu.Unlock()
	r := c.run
	if cancelled {
		return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}
	}
	allowed := r.cfg.Permission == PermissionPolicy && subagent.AuthorizeChild(r.parent, r.label, r.cancelled, askOf(p)) == nil
	want := []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways}
	if allowed {
		want = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways}
	}
	for _, k := range want {
		for _, o := range p.Options {
			if o.Kind == k {
				return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(o.OptionId)}
			}
		}
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}
}

// askOf turns a child's permission request into an ask of the parent's
// tree. A dsh child names the dsh tool and which of its agents asks; for
// another agent, the tool is guessed from the call's kind, else its title.
func askOf(p acpsdk.RequestPermissionRequest) permission.Request {
	req := permission.Request{CallID: string(p.ToolCall.ToolCallId)}
	var pm acpmeta.Permission
	if acpmeta.Get(p.Meta, &pm) && pm.Tool != "" {
		req.Tool, req.Agent = pm.Tool, pm.Agent
	} else {
		req.Tool = toolOfKind(p.ToolCall.Kind, p.ToolCall.Title)
	}
	if p.ToolCall.RawInput != nil {
		req.Arguments, _ = json.Marshal(p.ToolCall.RawInput)
	}
	return req
}

// toolOfKind maps an ACP tool kind to the dsh tool a policy names for it.
func toolOfKind(kind *acpsdk.ToolKind, title *string) string {
	if kind != nil {
		switch *kind {
		case acpsdk.ToolKindExecute:
			return "bash"
		case acpsdk.ToolKindEdit, acpsdk.ToolKindDelete, acpsdk.ToolKindMove:
			return "write_file"
		case acpsdk.ToolKindRead:
			return "read_file"
		case acpsdk.ToolKindSearch:
			return "grep"
		}
	}
	if title != nil && *title != "" {
		return *title
	}
	return "unknown"
}
