package session

import "fmt"

// Replicate makes a live session whose log is written by another process
// (a child running on a remote worker) and copied here: add appends events
// that continue the log exactly (their Seq is the log's length), keeping
// their seqs and times, persists them and notifies the session's observers;
// detach flushes and closes the session, as a live session's detacher does.
// Nothing is stored until the first add.
func (st *Store) Replicate(h Header) (s *Session, add func(events []Event) error, detach func() error, err error) {
	if err := validateHeader(h); err != nil {
		return nil, nil, nil, err
	}
	p, err := st.backend.Create(h)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("session %s: %w", h.ID, err)
	}
	s = newSession(h, nil)
	if err := st.enter(s, p, 0); err != nil {
		p.Close()
		return nil, nil, nil, err
	}
	return s, s.replicate, st.detacher(s), nil
}

// replicate appends events written elsewhere, as they are.
func (s *Session) replicate(events []Event) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errorf(CodeClosed, "replicate into closed session %s", s.header.ID)
	}
	for _, e := range events {
		if want := int64(len(s.events)); e.Seq != want || e.Type == "" {
			s.mu.Unlock()
			return errorf(CodeCorrupt, "session %s: replicated event has seq %d and type %q, want seq %d", s.header.ID, e.Seq, e.Type, want)
		}
		s.commit(e)
		if len(s.observers) > 0 {
			s.outbox = append(s.outbox, e)
		}
	}
	start := !s.publishing && int(s.sent) < len(s.outbox)
	s.publishing = s.publishing || start
	s.mu.Unlock()
	if start {
		s.publish(Event{}, false)
	}
	return s.Flush()
}
