// Package session keeps conversations as append-only event logs. Model
// history is never stored: it is derived from the log. A Store holds the live
// sessions and persists them through a Backend (in memory, or JSONL files in
// package session/jsonl).
package session

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dsh-go/dsh/content"
)

// FormatVersion is the only session format version this package reads.
const FormatVersion = 0

// OriginSubagent marks a session created for a delegated child.
const OriginSubagent = "subagent"

// Header describes a session. It is immutable and kept out of the event log.
type Header struct {
	Version         int    `json:"version"`
	ID              string `json:"id"`
	CreatedAt       int64  `json:"createdAt"` // Unix ms
	Cwd             string `json:"cwd,omitempty"`
	ParentSession   string `json:"parentSession,omitempty"`
	SeedLength      int    `json:"seedLength,omitempty"`
	Origin          string `json:"origin,omitempty"`
	DelegationDepth int    `json:"delegationDepth"`
}

// Event is one record of a session log. Seq is its position (contiguous from
// 0), Time the Unix ms at append, Data its typed payload (one of this
// package's payload structs, content.Message for user/message, or
// json.RawMessage for types this package does not model).
type Event struct {
	Seq             int64
	Time            int64
	Type            string
	Data            any
	SourceEventSeqs []int64 // assistant message: its chunks; tool result: its call
	Ignorable       bool
}

// SurfaceOp returns the event's surface operation: "append" for the surface
// types (user/message, assistant/message, tool/result), "" for the others.
// It follows from Type, so the log does not store it per event.
func (e Event) SurfaceOp() string {
	if isSurface(e.Type) {
		return SurfaceAppend
	}
	return ""
}

// SurfaceAppend is the only surface operation this package writes and reads.
const SurfaceAppend = "append"

// Error codes of this package.
const (
	CodeInvalidSeed   = "INVALID_SEED"
	CodeInvalidHeader = "INVALID_HEADER"
	CodeExists        = "SESSION_ALREADY_EXISTS"
	CodeNotFound      = "SESSION_NOT_FOUND"
	CodeClosed        = "SESSION_CLOSED"
	CodeUnknownEvent  = "UNKNOWN_EVENT_TYPE"
	CodeFormat        = "UNSUPPORTED_FORMAT"
	CodeCorrupt       = "CORRUPT_SESSION"
	CodeBusy          = "SESSION_BUSY" // a live writer holds the session
)

// Error is a session failure with a stable code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return "session: " + e.Msg }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// Is matches another *Error with the same code, so errors.Is(err,
// &session.Error{Code: session.CodeNotFound}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func errorf(code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Session is a live event log. It is safe for concurrent use.
type Session struct {
	header Header

	mu        sync.Mutex
	events    []Event
	pending   *pendingChunk     // a delta chunk still growing, stored as event len(events); made by the first delta
	messages  []content.Message // derived history, kept in step with events
	msgBytes  int64             // MessageSize of messages
	turn      int               // last turn number seen
	observers []*observer
	outbox    []Event // appended events for observers, in seq order
	// Indexes of events (int32: a log of 2^31 events would not fit in
	// memory), beside the flag, in two words.
	completed int32 // events up to and including the last turn end
	persisted int32 // events before this index were handed to the persister
	sent      int32 // outbox events already delivered
	closed    bool
	// publishing: a goroutine is delivering events to the observers (see
	// publish); later events wait in outbox.
	publishing bool

	ioMu      sync.Mutex // orders persister writes
	persister Persister
	writeErr  *error // the first write error, sticky; apart, as few sessions meet one

	loaded *loadedLog // PrepareLoad's, until Enter or Abandon
}

// loadedLog is what PrepareLoad read, apart from Session: only a loaded
// session has one (each Session is 416 B, not 448).
type loadedLog struct {
	p Persister // its writer
	n int       // the events stored
}

type observer struct {
	fn func(Event)
	s  *Session
}

// childEvents is a new child log's room: what a child holds while parked
// in its first model call (the descriptor, the inbox splice, the turn and
// step starts, the task, the request header), which fills the 480-byte
// size class. A child that outgrows it jumps to initialEvents, what a
// one-shot child's turn writes when it answers at once (about 13 events),
// so that a delegation grows its log once. A root session (one per run or
// conversation, never thousands parked) starts at rootEvents, what a turn
// that calls a tool once writes (about 20 events; 25 fill the 2,048-byte
// size class), and with room for rootMessages derived messages (the
// user's, the call, its result, the answer): a first turn grows neither.
const (
	childEvents   = 6
	initialEvents = 14
	minEvents     = 16
	rootEvents    = 25
	rootMessages  = 4
	// spliceLookback bounds the events derive looks back through for the
	// inbox splice of a child's first message (the splice, the turn and
	// step starts lie between them).
	spliceLookback = 8
)

// growEvents returns events with room for add more. A log shorter than
// initialEvents grows to it; a full log grows by half, to at least
// minEvents: append would double a short log, and grow a long one by
// about a quarter, which copies each event some five times over a long
// run (a parent's log gains an event per child it delegates to); by half,
// three times.
func growEvents(events []Event, add int) []Event {
	n := len(events)
	if n+add <= cap(events) {
		return events
	}
	room := minEvents
	if n < initialEvents {
		room = initialEvents
	}
	return append(make([]Event, 0, max(n+n/2, n+add, room)), events...)
}

func newSession(h Header, seed []Event) *Session {
	room := rootEvents
	if h.ParentSession != "" {
		room = childEvents
	}
	s := &Session{header: h, events: make([]Event, 0, max(len(seed)+1, room))}
	for _, e := range seed {
		s.commit(e)
	}
	return s
}

// ID returns the session id.
func (s *Session) ID() string { return s.header.ID }

// Header returns the session header.
func (s *Session) Header() Header { return s.header }

// Len returns the number of events in the log.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil && s.pending.active {
		return len(s.events) + 1
	}
	return len(s.events)
}

// Events returns a snapshot of the log. The returned slice must not be
// modified. A delta chunk still growing is completed: later deltas go to a
// new event.
func (s *Session) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitPending()
	return s.events[:len(s.events):len(s.events)]
}

// Messages returns the model history derived from the log: user messages,
// non-empty assistant messages and tool results, in log order. The returned
// slice must not be modified.
func (s *Session) Messages() []content.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messages[:len(s.messages):len(s.messages)]
}

// CompletedPrefix returns the log up to and including its last turn end
// (nil when no turn has ended): what the function CompletedPrefix finds in
// Events, without a scan of what followed that end (a parent's log can
// hold a usage event per child since its last turn). The returned slice
// must not be modified.
func (s *Session) CompletedPrefix() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.completed == 0 {
		return nil
	}
	return s.events[:s.completed:s.completed]
}

// LastTurn returns the number of the last turn started in the log (0: none).
func (s *Session) LastTurn() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn
}

// Append adds an event of type typ with payload data and returns it. Surface
// events (user/message, assistant/message, tool/result) are marked as such;
// sourceSeqs names the events a surface event was built from. Observers are
// notified after the event is committed, in seq order. Append never blocks on
// disk I/O except at step and turn ends, where the pending batch is written.
//
// Consecutive delta chunks of one block (assistant/chunk events carrying
// text, reasoning or tool-call argument deltas) are stored as one event of
// at most a few KiB: each such Append returns, and observers receive, the
// raw delta under the seq of the event it joins, while the log keeps their
// concatenation. Every other chunk is stored as it comes.
func (s *Session) Append(typ string, data any, sourceSeqs ...int64) (Event, error) {
	if typ == "" {
		return Event{}, errorf(CodeInvalidSeed, "append: empty event type")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Event{}, errorf(CodeClosed, "append %s to closed session %s", typ, s.header.ID)
	}
	now := time.Now().UnixMilli()
	var e Event
	if c, ok := data.(AssistantChunk); ok && typ == TypeAssistantChunk && c.Chunk.IsBareDelta() {
		e = s.appendDelta(c, data, now)
	} else {
		s.commitPending()
		e = Event{Seq: int64(len(s.events)), Time: now, Type: typ, Data: data, Ignorable: !knownType(typ)}
		if isSurface(typ) {
			e.SourceEventSeqs = sourceSeqs
			if e.SourceEventSeqs == nil && typ == TypeAssistantMessage {
				e.SourceEventSeqs = []int64{}
			}
		}
		s.commit(e)
	}
	direct := false
	switch {
	case len(s.observers) == 0:
	case s.publishing:
		s.outbox = append(s.outbox, e)
	default:
		s.publishing, direct = true, true
	}
	s.mu.Unlock()
	if direct {
		s.publish(e, true)
	}
	if typ == TypeTurnEnd || typ == TypeStepEnd {
		s.Flush()
	}
	return e, nil
}

// commit adds e to the log and the derived history. s.mu must be held.
func (s *Session) commit(e Event) {
	s.events = append(growEvents(s.events, 1), e)
	if e.Type == TypeTurnEnd {
		s.completed = int32(len(s.events))
	}
	switch e.Data.(type) {
	case TurnStart:
		s.turn = e.Data.(TurnStart).Turn
	case content.Message, AssistantMessage, ToolResult:
		s.derive(e)
	case Compaction:
		s.compact(e.Data)
	}
}

// derive adds the message e holds, if any, to the derived history. It is
// apart from commit so that commit's frame, on the deepest path of every
// goroutine that appends (an agent's, while it streams), holds no copy of
// a message: with them it was 1.6 KB, and a child's goroutine grew its
// stack once more there, in every delegation.
func (s *Session) derive(e Event) {
	var m content.Message
	switch d := e.Data.(type) {
	case content.Message:
		if e.Type != TypeUserMessage {
			return
		}
		m = d
	case AssistantMessage:
		if len(d.Message.Content) == 0 {
			return
		}
		m = d.Message
	case ToolResult:
		m = d.Message
	default:
		return
	}
	switch {
	case s.messages != nil:
	case s.header.ParentSession == "":
		s.messages = make([]content.Message, 0, rootMessages)
	default:
		// A child's first message was spliced into its inbox just before:
		// its history shares the splice's copy (capped, so that the next
		// message is appended to an array of the history's own).
		if one := s.splicedCopy(m); one != nil {
			s.messages = one
			s.msgBytes += MessageSize(m)
			return
		}
	}
	s.messages = append(s.messages, m)
	s.msgBytes += MessageSize(m)
}

// splicedCopy returns a one-message slice of the last few events' inbox
// splice that holds m itself (its id and its blocks, not an equal copy),
// or nil. s.mu must be held.
func (s *Session) splicedCopy(m content.Message) []content.Message {
	for i := len(s.events) - 1; i >= max(0, len(s.events)-spliceLookback); i-- {
		sp, ok := s.events[i].Data.(InboxSpliced)
		if !ok {
			continue
		}
		for j := range sp.Inserted {
			if sameMessage(&sp.Inserted[j], &m) {
				return sp.Inserted[j : j+1 : j+1]
			}
		}
		return nil
	}
	return nil
}

// sameMessage reports whether a and b are one message value: the same id
// and the same blocks (one array, not equal copies: a log read from a file
// shares nothing), so that sharing a's copy shares what b holds.
func sameMessage(a, b *content.Message) bool {
	if a.ID != b.ID || a.Role != b.Role || a.Source != b.Source || len(a.Content) != len(b.Content) {
		return false
	}
	return len(a.Content) > 0 && &a.Content[0] == &b.Content[0]
}

// publish delivers e (when have is set), then the queued events, to the
// observers in seq order, until the queue is empty. Its caller set
// s.publishing: an event appended meanwhile (on another goroutine, or by
// an observer appending re-entrantly) is queued for it, and an append
// while none is at work delivers its event without queueing it (a parked
// child's session keeps no queue).
func (s *Session) publish(e Event, have bool) {
	s.mu.Lock()
	for {
		if !have {
			if int(s.sent) == len(s.outbox) {
				s.outbox, s.sent, s.publishing = s.outbox[:0], 0, false
				s.mu.Unlock()
				return
			}
			e = s.outbox[s.sent]
			s.outbox[s.sent] = Event{} // keep no payload alive
			s.sent++
		}
		have = false
		obs := s.observers
		s.mu.Unlock()
		for _, o := range obs {
			deliver(o, e)
		}
		s.mu.Lock()
	}
}

func deliver(o *observer, e Event) {
	defer func() {
		if r := recover(); r != nil { // an observer cannot affect the appender
			slog.Error("session observer panicked", "event", e.Type, "seq", e.Seq, "panic", r)
		}
	}()
	o.fn(e)
}

// Observe calls fn with every event appended from now on, in seq order, and
// returns its disposer. fn runs synchronously on the appending goroutine; a
// panic in fn is contained.
func (s *Session) Observe(fn func(Event)) (dispose func()) {
	o := &observer{fn: fn, s: s}
	s.mu.Lock()
	s.observers = append(slices.Clip(s.observers), o)
	s.mu.Unlock()
	return o.dispose
}

// dispose removes o from its session's observers; a second call finds
// nothing to remove. An observer and its disposer are 32 B, not a
// closure over a Once besides it (56 B), for every parked child.
func (o *observer) dispose() {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.observers, o); i >= 0 {
		s.observers = slices.Delete(slices.Clone(s.observers), i, i+1)
	}
}

// Flush hands every pending event to the persister and returns the first
// write error the session has met (sticky: a session that failed to persist
// keeps reporting it).
func (s *Session) Flush() error {
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	p := s.persister
	var log []Event
	from := int(s.persisted)
	s.commitPending()
	if p != nil {
		log = s.events[:len(s.events):len(s.events)]
		s.persisted = int32(len(s.events))
	}
	s.mu.Unlock()
	if p != nil && len(log) > from && s.writeErr == nil {
		var err error
		if k, ok := p.(logKeeper); ok {
			err = k.keepLog(log, from)
		} else {
			err = p.Append(log[from:])
		}
		if err != nil {
			werr := fmt.Errorf("session %s: persist: %w", s.header.ID, err)
			s.writeErr = &werr
		}
	}
	if s.writeErr != nil {
		return *s.writeErr
	}
	return nil
}

// logKeeper is a persister that may keep a session's log itself rather
// than a copy of it (the memory store): a committed event is never changed
// (commit only appends; a delta chunk still growing is not committed until
// it is complete), so the log's prefix a persister was handed stays as it
// was.
type logKeeper interface {
	// keepLog stores log, whose events before from are stored already.
	keepLog(log []Event, from int) error
}

// close refuses further appends, flushes, and closes the persister.
func (s *Session) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.Flush()
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	p := s.persister
	s.persister = nil
	s.mu.Unlock()
	if p != nil {
		if cerr := p.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	return err
}

// validateHeader checks the header fields a store relies on.
func validateHeader(h Header) error {
	switch {
	case h.Version != FormatVersion:
		return errorf(CodeFormat, "session %s: unsupported format version %d", h.ID, h.Version)
	case h.ID == "":
		return errorf(CodeInvalidHeader, "header has no id")
	case h.Cwd != "" && !filepath.IsAbs(h.Cwd):
		return errorf(CodeInvalidHeader, "session %s: cwd %q is not absolute", h.ID, h.Cwd)
	case h.DelegationDepth < 0:
		return errorf(CodeInvalidHeader, "session %s: negative delegation depth", h.ID)
	case h.CreatedAt < 0:
		return errorf(CodeInvalidHeader, "session %s: negative createdAt", h.ID)
	}
	return nil
}
