package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// Difference is where a re-run's tree of sessions departs from the
// recorded one.
type Difference struct {
	// Recorded and Live are the sessions compared; one is nil when a
	// session has no counterpart.
	Recorded, Live *Session
	// Event is the index of the first differing event in the compared
	// form of the logs (-1 for a difference of the headers or a missing
	// session).
	Event  int
	Detail string
	// Failure is the replay divergence that failed one of the re-run
	// session's turns, if any (a child process reports its own so).
	Failure string
}

func (d Difference) String() string {
	switch {
	case d.Live == nil:
		return d.Recorded.Label() + ": the re-run has no such session"
	case d.Recorded == nil:
		return fmt.Sprintf("the re-run has a session the recording lacks: %s (child of %s, task %q)",
			short(d.Live.Header.ID), short(d.Live.Header.ParentSession), clip(d.Live.Task(), 60))
	}
	s := d.Recorded.Label() + ": " + d.Detail
	if d.Failure != "" {
		s += "\n  the re-run's turn failed: " + d.Failure
	}
	return s
}

// Compare checks a re-run's tree of sessions against the recorded one,
// ignoring session and message ids, times, working directories (compared
// as {{cwd}}), how the model's deltas were cut into events, retries, and
// the order in which children's usage records arrived.
// Children are paired with their recorded counterparts by task and mode,
// then by creation order. It returns the first difference of each session, none
// when the trees match.
func Compare(rec, live *Recording) []Difference {
	var pairs [][2]*Session
	var diffs []Difference
	var walk func(r, l *Session)
	walk = func(r, l *Session) {
		pairs = append(pairs, [2]*Session{r, l})
		matched := make([]*Session, len(r.Children))
		used := map[*Session]bool{}
		for pass := range 2 { // by task, then by order
			for i, rc := range r.Children {
				if matched[i] != nil {
					continue
				}
				for _, lc := range l.Children {
					if !used[lc] && (pass == 1 || sameChild(rc, lc)) {
						matched[i], used[lc] = lc, true
						break
					}
				}
			}
		}
		for i, rc := range r.Children {
			if matched[i] == nil {
				diffs = append(diffs, Difference{Recorded: rc, Event: -1})
				continue
			}
			walk(rc, matched[i])
		}
		for _, lc := range l.Children {
			if !used[lc] {
				diffs = append(diffs, Difference{Live: lc, Event: -1})
			}
		}
	}
	walk(rec.Root(), live.Root())
	recIDs, liveIDs := map[string]string{}, map[string]string{}
	for i, p := range pairs {
		token := fmt.Sprintf("session#%d", i)
		recIDs[p[0].Header.ID], liveIDs[p[1].Header.ID] = token, token
	}
	for _, p := range pairs {
		if d, ok := compareSessions(p[0], recIDs, p[1], liveIDs); !ok {
			diffs = append(diffs, d)
		}
	}
	return diffs
}

func compareSessions(r *Session, rIDs map[string]string, l *Session, lIDs map[string]string) (Difference, bool) {
	d := Difference{Recorded: r, Live: l, Event: -1}
	rh, lh := r.Header, l.Header
	switch {
	case rh.Origin != lh.Origin:
		d.Detail = fmt.Sprintf("origin %q recorded, %q in the re-run", rh.Origin, lh.Origin)
	case rh.DelegationDepth != lh.DelegationDepth:
		d.Detail = fmt.Sprintf("delegation depth %d recorded, %d in the re-run", rh.DelegationDepth, lh.DelegationDepth)
	case rh.SeedLength != lh.SeedLength:
		d.Detail = fmt.Sprintf("seed of %d events recorded, %d in the re-run", rh.SeedLength, lh.SeedLength)
	}
	if d.Detail != "" {
		return d, false
	}
	re, le := comparable(r, rIDs), comparable(l, lIDs)
	for i := range max(len(re), len(le)) {
		switch {
		case i >= len(le):
			d.Event, d.Detail = i, fmt.Sprintf("the re-run stops after %d events where the recording goes on; next recorded event: %s", i, clipRunes(re[i], 300))
		case i >= len(re):
			d.Event, d.Detail = i, fmt.Sprintf("the re-run goes on after the recording's %d events; next event: %s", i, clipRunes(le[i], 300))
		case re[i] != le[i]:
			d.Event, d.Detail = i, fmt.Sprintf("event %d differs%s", i, diffWith(re[i], le[i], func(s string) string { return s }))
		default:
			continue
		}
		d.Failure = failure(l)
		return d, false
	}
	return d, true
}

// failure returns the message of a replay divergence that failed one of the
// session's turns (a child process reports its own divergences so).
func failure(s *Session) string {
	for _, e := range s.Events {
		if end, ok := e.Data.(session.TurnEnd); ok && end.Reason.Error != nil && end.Reason.Error.Code == CodeDiverged {
			return end.Reason.Error.Message
		}
	}
	return ""
}

// comparable renders a session's events in the form Compare compares: one
// JSON text per event, retries left out, consecutive deltas of a block
// merged, ids replaced by tokens (sessions by ids, messages by order) and
// the working directory by {{cwd}}.
func comparable(s *Session, sessionIDs map[string]string) []string {
	n := newNormalizer(s.Header.Cwd)
	messages := map[string]string{}
	var out []string
	var pending *session.AssistantChunk
	flush := func() {
		if pending != nil {
			out = append(out, render(session.TypeAssistantChunk, *pending, n, sessionIDs, messages))
			pending = nil
		}
	}
	var usage []string // the usage records of children, in whichever order they settled
	for _, e := range s.Events {
		if e.Type == session.TypeLLMRetry {
			continue
		}
		if e.Type == childUsageType {
			usage = append(usage, render(e.Type, e.Data, n, sessionIDs, messages))
			continue
		}
		if c, ok := e.Data.(session.AssistantChunk); ok && c.Chunk.IsBareDelta() {
			if pending != nil && joins(*pending, c) {
				if c.Chunk.Type == content.ChunkToolCallDelta {
					pending.Chunk.ArgumentsDelta += c.Chunk.ArgumentsDelta
				} else {
					pending.Chunk.Text += c.Chunk.Text
				}
				continue
			}
			flush()
			pending = &c
			continue
		}
		flush()
		out = append(out, render(e.Type, e.Data, n, sessionIDs, messages))
	}
	flush()
	slices.Sort(usage)
	return append(out, usage...)
}

// sameChild reports whether a recorded and a live child do the same: the
// same task, in the same mode (a dsh child in another process has two
// sessions with its task: the record its parent keeps, and its own).
func sameChild(r, l *Session) bool {
	return newNormalizer(r.Header.Cwd).text(r.Task()) == newNormalizer(l.Header.Cwd).text(l.Task()) && childMode(r) == childMode(l)
}

// childMode is the mode a child session's descriptor gives it ("" for
// none).
func childMode(s *Session) string {
	for _, e := range s.Events {
		if raw, ok := e.Data.(json.RawMessage); ok && e.Type == descriptorType {
			var d struct {
				Mode string `json:"mode"`
			}
			json.Unmarshal(raw, &d)
			return d.Mode
		}
	}
	return ""
}

// descriptorType is a child's descriptor event (subagent.DescriptorType).
const descriptorType = "subagent/descriptor"

// childUsageType is the event a parent logs when a continuable child's
// activation settles (subagent.UsageType); parallel children settle in any
// order, so these compare as a set.
const childUsageType = "subagent/usage"

func joins(p, c session.AssistantChunk) bool {
	return p.Turn == c.Turn && p.Step == c.Step && p.Chunk.Type == c.Chunk.Type && p.Chunk.Index == c.Chunk.Index &&
		(c.Chunk.Type != content.ChunkToolCallDelta || (c.Chunk.ID == "" && c.Chunk.Name == ""))
}

func render(typ string, data any, n *normalizer, sessionIDs, messages map[string]string) string {
	raw, err := json.Marshal(data)
	if err != nil {
		return typ + " (unencodable: " + err.Error() + ")"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return typ + " " + string(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{"type": typ, "data": scrub(v, n, sessionIDs, messages)})
	return strings.TrimSuffix(buf.String(), "\n")
}

// scrub replaces ids and the working directory in a decoded JSON value:
// the tree's sessions by their tokens, messages and other ids numbered in
// the order they appear.
func scrub(v any, n *normalizer, sessionIDs, messages map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		if id, ok := x["id"].(string); ok && x["role"] != nil && x["content"] != nil {
			if _, seen := messages[id]; !seen {
				messages[id] = fmt.Sprintf("message#%d", len(messages))
			}
			delete(x, "id")
		}
		for k, e := range x {
			x[k] = scrub(e, n, sessionIDs, messages)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = scrub(e, n, sessionIDs, messages)
		}
		return x
	case string:
		if t, ok := messages[x]; ok {
			return t
		}
		if t, ok := sessionIDs[x]; ok {
			return t
		}
		for id, t := range sessionIDs {
			if strings.Contains(x, id) {
				x = strings.ReplaceAll(x, id, t)
			}
		}
		return n.text(x)
	}
	return v
}
