package session

import "github.com/dsh-go/dsh/content"

// MaxCoalesced bounds the text of a stored delta chunk: consecutive deltas
// of one block are merged into events of at most this many bytes (a single
// larger delta is stored whole). A million one-byte deltas are thus a few
// hundred events, not a million.
const MaxCoalesced = 4 << 10

// pendingChunk is the log's last event while it is a delta chunk that may
// still grow. It is committed to the log when another event is appended,
// when the log is read (Events) or flushed.
type pendingChunk struct {
	first  Event // the first delta's event, stored as is if no other joins it
	buf    []byte
	active bool
	merged bool // later deltas joined it: its text is in buf
}

// deltaText returns the text a delta chunk adds to its block.
func deltaText(c content.Chunk) string {
	if c.Type == content.ChunkToolCallDelta {
		return c.ArgumentsDelta
	}
	return c.Text
}

// joins reports whether delta next may be merged into the pending chunk: the
// same turn, step, chunk type and block, and for a tool call only more
// argument text (a new id or name starts a new event, as it would a new
// call).
func (p *pendingChunk) joins(next AssistantChunk) bool {
	if p == nil || !p.active {
		return false
	}
	data := p.first.Data.(AssistantChunk)
	first, c := data.Chunk, next.Chunk
	if data.Turn != next.Turn || data.Step != next.Step || first.Type != c.Type || first.Index != c.Index {
		return false
	}
	if c.Type == content.ChunkToolCallDelta && (c.ID != "" || c.Name != "") {
		return false
	}
	size := len(deltaText(first))
	if p.merged {
		size = len(p.buf)
	}
	return size+len(deltaText(c)) <= MaxCoalesced
}

// appendDelta stores delta c (data is c, boxed), merging it into the
// pending chunk when it joins it, and returns the event observers see: the
// raw delta under the seq of the event that holds it. s.mu must be held.
func (s *Session) appendDelta(c AssistantChunk, data any, now int64) Event {
	p := s.pending
	if p.joins(c) {
		if !p.merged {
			p.buf = append(p.buf[:0], deltaText(p.first.Data.(AssistantChunk).Chunk)...)
			p.merged = true
		}
		p.buf = append(p.buf, deltaText(c.Chunk)...)
		return Event{Seq: p.first.Seq, Time: now, Type: TypeAssistantChunk, Data: data}
	}
	s.commitPending()
	e := Event{Seq: int64(len(s.events)), Time: now, Type: TypeAssistantChunk, Data: data}
	if p == nil { // a session's first delta: a child parked before its answer holds none
		p = new(pendingChunk)
		s.pending = p
	}
	*p = pendingChunk{active: true, first: e, buf: p.buf[:0]}
	return e
}

// commitPending adds the pending chunk, if any, to the log. s.mu must be
// held.
func (s *Session) commitPending() {
	p := s.pending
	if p == nil || !p.active {
		return
	}
	e := p.first
	if p.merged {
		data := e.Data.(AssistantChunk)
		if data.Chunk.Type == content.ChunkToolCallDelta {
			data.Chunk.ArgumentsDelta = string(p.buf)
		} else {
			data.Chunk.Text = string(p.buf)
		}
		e.Data = data
	}
	s.commit(e)
	*p = pendingChunk{buf: p.buf[:0]} // the buffer never outgrows MaxCoalesced
}
