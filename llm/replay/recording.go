// Package replay answers model requests from recorded session logs, so that
// a conversation, nested children included, re-runs without a model or a
// key. A Recording is a tree of sessions (a top-level session and its
// descendants); a Model serves each live session the chunks its recorded
// counterpart received, call by call, and fails a request that differs
// from the recorded one with a readable diff. Compare checks the tree a
// re-run wrote against the recorded one.
package replay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// Error codes of this package, carried by the error finish chunks a Model
// yields.
const (
	// CodeDiverged: a live request differs from the recorded one, or has
	// no recorded counterpart.
	CodeDiverged = "REPLAY_DIVERGED"
	// CodeIncomplete: the recording ends in the middle of the call (its
	// process stopped while the model answered).
	CodeIncomplete = "REPLAY_INCOMPLETE"
	// CodeRecording: a recording cannot be read.
	CodeRecording = "INVALID_RECORDING"
)

// Error is a failure of this package with a stable code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return "replay: " + e.Msg }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

func recordingError(format string, args ...any) error {
	return &Error{Code: CodeRecording, Msg: fmt.Sprintf(format, args...)}
}

// Log is one session as stored: its header and its events.
type Log struct {
	Header session.Header
	Events []session.Event
}

// Recording is a recorded tree of sessions: a top-level session and its
// descendants.
type Recording struct {
	// Sessions are in creation order; the root is first.
	Sessions []*Session
	byID     map[string]*Session
}

// Session is one recorded session and the model calls it made.
type Session struct {
	Log
	// Calls are the model calls, in the order they were made.
	Calls []Call
	// Children are the sessions it delegated to, in creation order.
	Children []*Session
	// Parent is the session that delegated to it; nil for the root.
	Parent *Session
	// structural holds the times of the events other than model chunks
	// and retries, in log order: what a replay waits for (see Model).
	structural []int64
}

// Call is one recorded model call: the request the agent sent and the
// chunks it received.
type Call struct {
	Turn, Step int
	Request    Request
	Chunks     []content.Chunk
	// ChunkTimes are the times (Unix ms) the chunks were logged, and
	// RequestTime that of the last event before the first chunk.
	ChunkTimes  []int64
	RequestTime int64
	// Finished reports whether the call ended with its finish chunk; a
	// recording whose process stopped mid-answer lacks it.
	Finished bool
}

// FinishTime returns when the call's last chunk was logged.
func (c *Call) FinishTime() int64 {
	if n := len(c.ChunkTimes); n > 0 {
		return c.ChunkTimes[n-1]
	}
	return c.RequestTime
}

// Request is what a model request carries that replay compares: the route,
// the system prompt, the tools and the messages.
type Request struct {
	Provider  string
	Model     string
	MaxTokens int
	System    string
	Tools     []content.ToolSpec
	Messages  []content.Message
}

// Root returns the top-level session.
func (r *Recording) Root() *Session { return r.Sessions[0] }

// Session returns the recorded session with id.
func (r *Recording) Session(id string) (*Session, bool) {
	s, ok := r.byID[id]
	return s, ok
}

// Label names a recorded session for messages: its short id, and for a
// child its parent's short id and the text of its first user message.
func (s *Session) Label() string {
	if s.Parent == nil {
		return "session " + short(s.Header.ID) + " (top level)"
	}
	return fmt.Sprintf("session %s (child of %s, task %q)", short(s.Header.ID), short(s.Parent.Header.ID), clip(s.Task(), 60))
}

// Task returns the text of the session's first own user message (after
// any seed), the task of a child; for an in-process child, without its
// instructions.
func (s *Session) Task() string { return firstTask(s.Events, s.Header.SeedLength) }

func firstTask(events []session.Event, from int) string {
	for _, e := range events[min(from, len(events)):] {
		if m, ok := e.Data.(content.Message); ok && e.Type == session.TypeUserMessage {
			return taskText(content.JoinText(m.Content))
		}
	}
	return ""
}

// taskText drops the <subagent-instructions> frame an in-process child's
// first message opens with.
func taskText(text string) string {
	if rest, ok := strings.CutPrefix(text, "<subagent-instructions>\n"); ok {
		if _, task, ok := strings.Cut(rest, "\n</subagent-instructions>\n\n"); ok {
			return task
		}
	}
	return text
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// New builds a recording from session logs: one root (a session whose
// parent is not among them) and its descendants. Sessions outside the
// root's tree are refused.
func New(logs []Log) (*Recording, error) {
	if len(logs) == 0 {
		return nil, recordingError("no sessions")
	}
	r := &Recording{byID: make(map[string]*Session, len(logs))}
	for _, l := range logs {
		if l.Header.ID == "" {
			return nil, recordingError("a session has no id")
		}
		if _, dup := r.byID[l.Header.ID]; dup {
			return nil, recordingError("session %s appears twice", l.Header.ID)
		}
		s := &Session{Log: l}
		if err := s.derive(); err != nil {
			return nil, recordingError("session %s: %v", l.Header.ID, err)
		}
		r.byID[l.Header.ID] = s
		r.Sessions = append(r.Sessions, s)
	}
	slices.SortStableFunc(r.Sessions, func(a, b *Session) int {
		return cmp.Or(cmp.Compare(a.Header.CreatedAt, b.Header.CreatedAt), cmp.Compare(a.Header.ID, b.Header.ID))
	})
	var roots []*Session
	for _, s := range r.Sessions {
		if p, ok := r.byID[s.Header.ParentSession]; ok && p != s {
			s.Parent = p
			p.Children = append(p.Children, s)
		} else {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 {
		ids := make([]string, len(roots))
		for i, s := range roots {
			ids[i] = s.Header.ID
		}
		return nil, recordingError("a recording holds one tree; these sessions have no parent in it: %s", strings.Join(ids, ", "))
	}
	// The root first, then the others in creation order.
	i := slices.Index(r.Sessions, roots[0])
	r.Sessions = slices.Insert(slices.Delete(r.Sessions, i, i+1), 0, roots[0])
	return r, nil
}

// derive extracts the session's model calls: each run of assistant chunks
// of one step, up to its finish chunk, with the request the agent had
// built from the log up to then.
func (s *Session) derive() error {
	var (
		header   session.RequestHeader
		messages []content.Message
		open     *Call
		last     int64 // time of the last event before the current one
	)
	for i, e := range s.Events {
		if e.Seq != int64(i) {
			return fmt.Errorf("event %d has seq %d", i, e.Seq)
		}
		if e.Type != session.TypeAssistantChunk && e.Type != session.TypeLLMRetry {
			s.structural = append(s.structural, e.Time)
		}
		switch d := e.Data.(type) {
		case session.RequestHeader:
			header = d
		case content.Message:
			if e.Type == session.TypeUserMessage {
				messages = append(messages, d)
			}
		case session.AssistantMessage:
			if len(d.Message.Content) > 0 {
				messages = append(messages, d.Message)
			}
		case session.ToolResult:
			messages = append(messages, d.Message)
		case session.AssistantChunk:
			if open != nil && (open.Turn != int(d.Turn) || open.Step != int(d.Step)) {
				return fmt.Errorf("event %d: a chunk of turn %d step %d inside the unfinished call of turn %d step %d",
					i, d.Turn, d.Step, open.Turn, open.Step)
			}
			if open == nil {
				s.Calls = append(s.Calls, Call{Turn: int(d.Turn), Step: int(d.Step), RequestTime: last,
					Request: Request{Provider: header.Config.Provider, Model: header.Config.Model, MaxTokens: header.Config.MaxTokens,
						System: header.System, Tools: header.Tools, Messages: slices.Clip(messages)}})
				open = &s.Calls[len(s.Calls)-1]
			}
			open.Chunks = append(open.Chunks, d.Chunk)
			open.ChunkTimes = append(open.ChunkTimes, e.Time)
			if d.Chunk.Type == content.ChunkFinish {
				open.Finished, open = true, nil
			}
		}
		last = e.Time
	}
	return nil
}

// FromStore reads the recorded tree of session root from a store: root and
// every stored session that descends from it.
func FromStore(st *session.Store, root string) (*Recording, error) {
	hs, err := st.List()
	if err != nil {
		return nil, err
	}
	children := map[string][]string{}
	found := false
	for _, h := range hs {
		children[h.ParentSession] = append(children[h.ParentSession], h.ID)
		found = found || h.ID == root
	}
	if !found {
		return nil, &session.Error{Code: session.CodeNotFound, Msg: fmt.Sprintf("no stored session %q", root)}
	}
	var logs []Log
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		h, events, err := st.Read(queue[0])
		if err != nil {
			return nil, err
		}
		logs = append(logs, Log{Header: h, Events: events})
		queue = append(queue, children[queue[0]]...)
	}
	return New(logs)
}

// headerRecord is the first line of a session file (see session/jsonl).
type headerRecord struct {
	Type string `json:"type"`
	session.Header
}

// MaxFile bounds a session file ReadDir accepts.
const MaxFile = 256 << 20

// ReadDir reads a recording from the session files (*.jsonl, at any depth)
// under dir: a folder WriteDir wrote, or a JSONL sessions root holding one
// tree.
func ReadDir(dir string) (*Recording, error) {
	var logs []Log
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".jsonl") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > MaxFile {
			return recordingError("%s: over %d bytes", path, MaxFile)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		l, err := ParseLog(data)
		if err != nil {
			return recordingError("%s: %v", path, err)
		}
		logs = append(logs, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(logs) == 0 {
		return nil, recordingError("no session files (*.jsonl) under %s", dir)
	}
	return New(logs)
}

// ParseLog decodes the content of one session file: the header line, then
// one event per line. A torn last line (no newline, not JSON) is left out,
// as a reader of a crashed session would.
func ParseLog(data []byte) (Log, error) {
	line, rest, _ := bytes.Cut(data, []byte{'\n'})
	var h headerRecord
	if err := json.Unmarshal(line, &h); err != nil {
		return Log{}, fmt.Errorf("line 1: %w", err)
	}
	if h.Type != "session" || h.ID == "" {
		return Log{}, errors.New("line 1 is not a session header")
	}
	if h.Version != session.FormatVersion {
		return Log{}, fmt.Errorf("unsupported format version %d", h.Version)
	}
	l := Log{Header: h.Header}
	var dec session.Decoder
	for n := 2; len(rest) > 0; n++ {
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, err := dec.Decode(line)
		if err != nil {
			if len(rest) == 0 && !bytes.HasSuffix(data, []byte{'\n'}) && !json.Valid(line) {
				break // torn
			}
			return Log{}, fmt.Errorf("line %d: %w", n, err)
		}
		l.Events = append(l.Events, e)
	}
	if err := session.Expand(l.Events); err != nil {
		return Log{}, err
	}
	return l, nil
}

// WriteDir writes the recording's sessions under dir, which it creates:
// session.jsonl for the root, session.1.jsonl, session.2.jsonl, … for the
// others in creation order. ReadDir reads it back.
func (r *Recording) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, s := range r.Sessions {
		name := "session.jsonl"
		if i > 0 {
			name = fmt.Sprintf("session.%d.jsonl", i)
		}
		b, err := json.Marshal(headerRecord{Type: "session", Header: s.Header})
		if err != nil {
			return err
		}
		b = append(b, '\n')
		for _, e := range s.Events {
			if b, err = e.AppendJSON(b); err != nil {
				return err
			}
			b = append(b, '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
