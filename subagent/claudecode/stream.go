package claudecode

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/childproc"
)

// read handles Claude Code's stdout until it ends.
func (r *run) read(maxLine int) {
	defer close(r.streamEnd)
	lr := childproc.NewLineReader(r.proc.Stdout(), maxLine, "stream-json")
	for {
		line, err := lr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.readErr = err
			}
			return
		}
		m, ok := decode(line)
		if !ok {
			if len(strings.TrimSpace(string(line))) > 0 {
				r.mu.Lock()
				r.junk = string(line[:min(len(line), 200)])
				r.mu.Unlock()
			}
			continue
		}
		r.handle(m)
	}
}

// handle dispatches one message; unknown types and subtypes are ignored.
func (r *run) handle(m message) {
	switch m.Type {
	case typeSystem:
		if m.Subtype == subtypeInit {
			r.readyOnce.Do(func() {
				r.mu.Lock()
				r.model, r.session = m.Model, m.SessionID
				r.mu.Unlock()
				close(r.ready)
				r.report(subagent.Progress{Kind: subagent.ProgressTurnStart, Turn: 1})
			})
		}
	case typeAssistant:
		r.assistant(m)
	case typeUser:
		r.user(m)
	case typeResult:
		r.mu.Lock()
		first := r.res == nil
		if first {
			r.res = &m
		}
		r.mu.Unlock()
		if first {
			r.readyOnce.Do(func() { close(r.ready) }) // a result without init still ends the run
			r.report(subagent.Progress{Kind: subagent.ProgressTurnEnd, Turn: 1, Text: m.Subtype})
			close(r.resultc)
		}
	case typeControlRequest:
		r.control(m)
	}
}

// assistant records the text of a top-level assistant message and
// reports its text and tool calls. Synthetic messages (API errors the CLI
// phrases as assistant text) are neither output nor progress.
func (r *run) assistant(m message) {
	if m.ParentToolUseID != nil || m.Message == nil || m.IsAPIErrorMessage || m.Message.Model == "<synthetic>" {
		return
	}
	var text strings.Builder
	for _, b := range m.Message.blocks() {
		switch b.Type {
		case "text":
			if b.Text != "" {
				text.WriteString(b.Text)
				r.report(subagent.Progress{Kind: subagent.ProgressText, Turn: 1, Text: b.Text})
			}
		case "tool_use":
			r.report(subagent.Progress{Kind: subagent.ProgressToolCall, Turn: 1, Tool: b.Name, CallID: b.ID})
		}
	}
	if t := text.String(); strings.TrimSpace(t) != "" {
		r.mu.Lock()
		if m.Message.ID != "" && m.Message.ID == r.msgID {
			r.partial += t // one API message may come as several lines
		} else {
			r.msgID, r.partial = m.Message.ID, t
		}
		r.mu.Unlock()
	}
}

// user reports the tool results of a top-level user message.
func (r *run) user(m message) {
	if m.ParentToolUseID != nil || m.Message == nil {
		return
	}
	for _, b := range m.Message.blocks() {
		if b.Type == "tool_result" {
			r.report(subagent.Progress{Kind: subagent.ProgressToolResult, Turn: 1, CallID: b.ToolUseID, IsError: b.IsError})
		}
	}
}

// control answers a control request from Claude Code: can_use_tool by
// Config.Permission, anything else with an error so that the CLI does not
// wait.
func (r *run) control(m message) {
	if m.RequestID == "" || m.Request == nil {
		return
	}
	if m.Request.Subtype != subtypeCanUse {
		r.w.send(controlFailure(m.RequestID, fmt.Sprintf("dsh does not support the control request %q", m.Request.Subtype)))
		return
	}
	r.mu.Lock()
	cancelled := r.cancelled
	r.mu.Unlock()
	input := m.Request.Input
	if len(input) == 0 || string(input) == "null" {
		input = []byte("{}")
	}
	var answer any
	switch {
	case cancelled:
		answer = permissionDeny{Behavior: "deny", Message: "the run was cancelled", Interrupt: true}
	case r.cfg.Permission == PermissionDeny:
		answer = permissionDeny{Behavior: "deny",
			Message: fmt.Sprintf("permission to use %s denied: this unattended subagent (provider %s) denies every permission request", m.Request.ToolName, r.cfg.Name)}
	default:
		if err := r.authorize(permission.Request{Tool: dshTool(m.Request.ToolName), CallID: m.Request.ToolUseID, Arguments: input}); err != nil {
			answer = permissionDeny{Behavior: "deny", Message: fmt.Sprintf("permission to use %s denied: %v", m.Request.ToolName, err)}
		} else {
			answer = permissionAllow{Behavior: "allow", UpdatedInput: input}
		}
	}
	r.w.send(controlSuccess(m.RequestID, answer))
}

// dshTool maps a Claude Code tool name to the dsh tool a permission policy
// names for it; other names are kept.
func dshTool(name string) string {
	switch name {
	case "Bash":
		return "bash"
	case "Write":
		return "write_file"
	case "Edit", "MultiEdit", "NotebookEdit":
		return "edit_file"
	case "Read":
		return "read_file"
	case "Grep":
		return "grep"
	case "Glob":
		return "glob"
	}
	return name
}

func (r *run) report(p subagent.Progress) {
	if r.progress != nil {
		r.progress(p)
	}
}
