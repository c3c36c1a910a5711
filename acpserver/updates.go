package acpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	acpsdk "github.com/coder/acp-go-sdk"
	"github.com/google/uuid"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// updater turns an agent's session events into session/update
// notifications: streamed text and reasoning as message and thought chunks
// (one message id per model call), and tool calls with their results. It
// observes the session for its whole life, so a turn woken between prompts
// (by a background task's completion notice) reaches the client too; the
// user messages of such turns, which the client did not send, come as user
// message chunks.
type updater struct {
	conn *acpsdk.AgentSideConnection
	id   acpsdk.SessionId
	cwd  string // the session's working directory: tool paths are shown absolute
	log  *slog.Logger

	mu       sync.Mutex
	messages map[[2]int]string   // (turn, step) → message id, for the current turn
	prompts  map[string]bool     // ids of the client's prompts not yet seen in the log
	calls    map[string]toolView // tool calls without their result yet, by call id
	// terminals are the client terminals tool calls run in, by call id.
	terminals map[string]string
}

func newUpdater(conn *acpsdk.AgentSideConnection, id acpsdk.SessionId, cwd string, log *slog.Logger) *updater {
	return &updater{conn: conn, id: id, cwd: cwd, log: log, messages: map[[2]int]string{}, prompts: map[string]bool{},
		calls: map[string]toolView{}, terminals: map[string]string{}}
}

// terminal records that a tool call runs in the client's terminal id, and
// shows the terminal in the call (now, or in its start when that has not
// gone out yet).
func (u *updater) terminal(callID, id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.terminals[callID] = id
	if _, started := u.calls[callID]; started {
		u.send(acpsdk.UpdateToolCall(acpsdk.ToolCallId(callID), acpsdk.WithUpdateContent([]acpsdk.ToolCallContent{terminalContent(id)})))
	}
}

// terminalContent embeds a client terminal in a tool call.
func terminalContent(id string) acpsdk.ToolCallContent {
	return acpsdk.ToolCallContent{Terminal: &acpsdk.ToolCallContentTerminal{Type: "terminal", TerminalId: id}}
}

// prompted records the id of a message the client sent as a prompt.
func (u *updater) prompted(msgID string) {
	u.mu.Lock()
	u.prompts[msgID] = true
	u.mu.Unlock()
}

// fromClient reports whether msg is one of the client's prompts, once.
func (u *updater) fromClient(msg content.Message) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	ok := u.prompts[msg.ID]
	delete(u.prompts, msg.ID)
	return ok
}

func (u *updater) event(e session.Event) {
	switch d := e.Data.(type) {
	case session.TurnStart:
		u.mu.Lock()
		clear(u.messages)
		u.mu.Unlock()
	case content.Message:
		if e.Type != session.TypeUserMessage || u.fromClient(d) {
			return
		}
		if text := content.JoinText(d.Content); text != "" {
			u.send(acpsdk.SessionUpdate{UserMessageChunk: &acpsdk.SessionUpdateUserMessageChunk{
				SessionUpdate: "user_message_chunk", Content: acpsdk.TextBlock(text)}})
		}
	case session.AssistantChunk:
		if d.Chunk.Text == "" {
			return
		}
		block := acpsdk.TextBlock(d.Chunk.Text)
		mid := u.messageID(int(d.Turn), int(d.Step))
		switch d.Chunk.Type {
		case content.ChunkTextDelta:
			u.send(acpsdk.SessionUpdate{AgentMessageChunk: &acpsdk.SessionUpdateAgentMessageChunk{
				SessionUpdate: "agent_message_chunk", Content: block, MessageId: &mid}})
		case content.ChunkReasoningDelta:
			u.send(acpsdk.SessionUpdate{AgentThoughtChunk: &acpsdk.SessionUpdateAgentThoughtChunk{
				SessionUpdate: "agent_thought_chunk", Content: block, MessageId: &mid}})
		}
	case session.ToolCall:
		var input any
		if json.Unmarshal([]byte(d.Arguments), &input) != nil {
			input = d.Arguments
		}
		v := viewOf(d.Name, d.Arguments, u.cwd)
		opts := []acpsdk.ToolCallStartOpt{acpsdk.WithStartKind(v.kind), acpsdk.WithStartStatus(acpsdk.ToolCallStatusInProgress),
			acpsdk.WithStartRawInput(input)}
		if len(v.locations) > 0 {
			opts = append(opts, acpsdk.WithStartLocations(v.locations))
		}
		u.mu.Lock() // held while sending: a terminal shown meanwhile follows the start
		defer u.mu.Unlock()
		u.calls[d.CallID] = v
		if term, ok := u.terminals[d.CallID]; ok {
			opts = append(opts, acpsdk.WithStartContent([]acpsdk.ToolCallContent{terminalContent(term)}))
		}
		u.send(acpsdk.StartToolCall(acpsdk.ToolCallId(d.CallID), v.title, opts...))
	case session.ToolResult:
		status := acpsdk.ToolCallStatusCompleted
		if d.Error != nil {
			status = acpsdk.ToolCallStatusFailed
		}
		var text string
		if len(d.Message.Content) == 1 {
			text = content.JoinText(d.Message.Content[0].Content)
		}
		id := d.Message.Source.CallID
		u.mu.Lock()
		v := u.calls[id]
		term, inTerminal := u.terminals[id]
		delete(u.calls, id)
		delete(u.terminals, id)
		u.mu.Unlock()
		var body []acpsdk.ToolCallContent
		if inTerminal {
			body = append(body, terminalContent(term)) // the editor goes on showing its output
		}
		if status == acpsdk.ToolCallStatusCompleted {
			body = append(body, v.diff...) // the change made, which an editor shows as a diff
		}
		if text != "" {
			body = append(body, acpsdk.ToolContent(acpsdk.TextBlock(clip(text, maxToolText))))
		}
		opts := []acpsdk.ToolCallUpdateOpt{acpsdk.WithUpdateStatus(status), acpsdk.WithUpdateContent(body)}
		if len(v.locations) > 0 {
			opts = append(opts, acpsdk.WithUpdateLocations(v.locations))
		}
		u.send(acpsdk.UpdateToolCall(acpsdk.ToolCallId(id), opts...))
	}
}

// maxToolText bounds the text of a tool's result sent to the client.
const maxToolText = 16 << 10

func (u *updater) messageID(turn, step int) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := [2]int{turn, step}
	if id, ok := u.messages[k]; ok {
		return id
	}
	id := uuid.NewString()
	u.messages[k] = id
	return id
}

func (u *updater) send(up acpsdk.SessionUpdate) {
	if err := u.conn.SessionUpdate(context.Background(), acpsdk.SessionNotification{SessionId: u.id, Update: up}); err != nil {
		u.log.Debug("acp: session/update not delivered", "session", u.id, "err", err)
	}
}

// kindOf classifies a tool for the client's display.
func kindOf(name string) acpsdk.ToolKind {
	switch name {
	case "read_file":
		return acpsdk.ToolKindRead
	case "write_file", "edit_file":
		return acpsdk.ToolKindEdit
	case "glob", "grep":
		return acpsdk.ToolKindSearch
	case "bash":
		return acpsdk.ToolKindExecute
	}
	return acpsdk.ToolKindOther
}
