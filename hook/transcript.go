package hook

import (
	"bytes"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/dsh-go/dsh/content"
)

// Transcript is a session's conversation written as Claude Code writes its
// transcripts, for hooks' transcript_path: a JSONL file of one record a
// message ({"type": "user"|"assistant", "uuid", "parentUuid", "sessionId",
// "cwd", "timestamp", "message": {"role", "content": [blocks]}}), whose
// blocks are Claude Code's (text, thinking, tool_use with Claude Code's
// tool names and arguments, tool_result). It lives in the temporary
// directory, which a sandboxed hook may read, until Remove. Its methods
// are safe for concurrent use.
type Transcript struct {
	mu        sync.Mutex
	path      string
	sessionID string
	cwd       string
	ids       []string // the ids of the messages written, in order
	dirty     bool     // a write failed: the file is written anew
}

// NewTranscript makes the (empty) transcript file of the session with id
// and working directory cwd.
func NewTranscript(sessionID, cwd string) (*Transcript, error) {
	f, err := os.CreateTemp("", "dsh-transcript-*.jsonl")
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return &Transcript{path: f.Name(), sessionID: sessionID, cwd: cwd}, nil
}

// Path returns the file.
func (t *Transcript) Path() string { return t.path }

// Sync brings the file up to msgs, the session's conversation: the
// messages after those already written are appended; a conversation that
// is not a continuation of what was written (it was compacted) is written
// anew.
func (t *Transcript) Sync(msgs []content.Message) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	flag := os.O_WRONLY | os.O_APPEND
	if t.dirty || len(msgs) < len(t.ids) || !continues(msgs, t.ids) {
		flag, t.ids = os.O_WRONLY|os.O_TRUNC, nil
	}
	if len(msgs) == len(t.ids) && flag&os.O_TRUNC == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	ids := t.ids
	for _, m := range msgs[len(ids):] {
		var parent *string
		if n := len(ids); n > 0 {
			parent = &ids[n-1]
		}
		if err := enc.Encode(t.record(m, parent)); err != nil {
			return err
		}
		ids = append(ids, m.ID)
	}
	f, err := os.OpenFile(t.path, flag, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	t.ids, t.dirty = ids, err != nil
	return err
}

// continues reports whether msgs begins with the messages of ids.
func continues(msgs []content.Message, ids []string) bool {
	for i, id := range ids {
		if msgs[i].ID != id {
			return false
		}
	}
	return true
}

// Remove deletes the file.
func (t *Transcript) Remove() error { return os.Remove(t.path) }

type transcriptRecord struct {
	Type        string            `json:"type"`
	UUID        string            `json:"uuid"`
	ParentUUID  *string           `json:"parentUuid"`
	SessionID   string            `json:"sessionId"`
	Cwd         string            `json:"cwd"`
	Timestamp   string            `json:"timestamp"`
	IsSidechain bool              `json:"isSidechain"`
	Message     transcriptMessage `json:"message"`
}

type transcriptMessage struct {
	Role    string           `json:"role"`
	Model   string           `json:"model,omitempty"`
	Content []map[string]any `json:"content"`
}

func (t *Transcript) record(m content.Message, parent *string) transcriptRecord {
	r := transcriptRecord{Type: "user", UUID: m.ID, ParentUUID: parent, SessionID: t.sessionID, Cwd: t.cwd,
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Message: transcriptMessage{Role: "user", Content: []map[string]any{}}}
	if m.Role == content.RoleAssistant {
		r.Type, r.Message.Role, r.Message.Model = "assistant", "assistant", m.Source.Model
	}
	for _, b := range m.Content {
		switch b.Type {
		case content.TypeText:
			r.Message.Content = append(r.Message.Content, map[string]any{"type": "text", "text": b.Text})
		case content.TypeReasoning:
			r.Message.Content = append(r.Message.Content, map[string]any{"type": "thinking", "thinking": b.Text})
		case content.TypeToolCall:
			input := claudeInput(b.Name, t.cwd, json.RawMessage(b.Arguments))
			if !json.Valid(input) {
				input = json.RawMessage(`{}`)
			}
			r.Message.Content = append(r.Message.Content, map[string]any{"type": "tool_use", "id": b.ID, "name": ClaudeName(b.Name), "input": input})
		case content.TypeToolResult:
			r.Message.Content = append(r.Message.Content, map[string]any{"type": "tool_result", "tool_use_id": b.ToolCallID,
				"content": content.JoinText(b.Content), "is_error": b.IsError})
		case content.TypeImage:
			r.Message.Content = append(r.Message.Content, map[string]any{"type": "text", "text": "[image]"})
		}
	}
	return r
}
