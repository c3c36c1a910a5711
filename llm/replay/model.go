package replay

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/session"
)

// Timing says how fast a Model plays a call's chunks.
type Timing int

// The timings.
const (
	// Instant plays every chunk at once.
	Instant Timing = iota
	// AsRecorded waits before each chunk as long as the recording did.
	AsRecorded
)

// Options configure a Model.
type Options struct {
	Timing Timing
	// Live returns a live session of the runtime the model serves. Through
	// it a request's session is bound to the recorded child of its
	// parent's recorded session, its working directory is compared as
	// {{cwd}}, and calls keep the recorded order across sessions (see
	// Model). Nil: sessions bind by their first request alone, working
	// directories must be the recorded ones, and no order is kept.
	Live func(id string) (*session.Session, bool)
	// OrderWait bounds how long a call's last chunk waits for other
	// sessions to reach the point they had reached in the recording
	// (default 10s); past it the call ends anyway.
	OrderWait time.Duration
}

// Model is an llm.Model that answers each live session from its recorded
// counterpart. It is safe for concurrent use.
//
// A live session is bound to a recorded one at its first request: to the
// first unbound recorded child of its parent's recorded session (by
// creation order) whose first request is the same — so that parallel
// children with different tasks find their own recordings whatever order
// they start in — or, for a session whose parent is not served here (the
// top-level session, a child in another process), to the first unbound
// recorded session whose first request is the same. Each later request of
// the session must equal the next recorded one.
//
// Children run concurrently with their parents, so the interleaving of
// sessions matters when one tells another something (a background child's
// completion notice). A call's last chunk therefore waits until every other
// session served here has logged as many events as it had when that chunk
// was recorded (events of the same millisecond excepted), at most
// OrderWait.
type Model struct {
	rec  *Recording
	opts Options

	mu          sync.Mutex
	bound       map[string]*binding // live session id → binding
	taken       map[*Session]bool
	divergences []*Divergence
	ids         map[string]string // recorded id → the live one that took its place

	sigMu   sync.Mutex
	changed chan struct{} // closed and replaced when a bound session logs an event
}

// binding is a live session answered from a recorded one.
type binding struct {
	rec     *Session
	liveCwd string // the live session's working directory
	next    int    // the next recorded call; guarded by Model.mu

	progress *progress // nil without Options.Live
}

// progress counts the events other than chunks a live session has logged.
type progress struct {
	mu   sync.Mutex
	seen map[int64]bool
	stop func()
}

func (p *progress) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

// NewModel returns a model answering from rec.
func NewModel(rec *Recording, opts Options) *Model {
	if opts.OrderWait <= 0 {
		opts.OrderWait = 10 * time.Second
	}
	for _, s := range rec.Sessions {
		slices.Sort(s.structural)
	}
	return &Model{rec: rec, opts: opts, bound: map[string]*binding{}, taken: map[*Session]bool{}, ids: map[string]string{},
		changed: make(chan struct{})}
}

// Recording returns the recording the model answers from.
func (m *Model) Recording() *Recording { return m.rec }

// Divergences returns the requests the model refused, in order.
func (m *Model) Divergences() []*Divergence {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.divergences)
}

// Bound returns the recorded session a live session was bound to.
func (m *Model) Bound(live string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bound[live]
	if !ok {
		return nil, false
	}
	return b.rec, true
}

// Unplayed lists what the recording holds that no request asked for: the
// recorded sessions never bound, and the calls left of the bound ones.
func (m *Model) Unplayed() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	played := map[*Session]int{}
	for _, b := range m.bound {
		played[b.rec] = b.next
	}
	var out []string
	for _, s := range m.rec.Sessions {
		n, ok := played[s]
		switch {
		case !ok && len(s.Calls) > 0:
			out = append(out, s.Label()+": never replayed")
		case n < len(s.Calls):
			out = append(out, fmt.Sprintf("%s: %d of %d calls replayed", s.Label(), n, len(s.Calls)))
		}
	}
	return out
}

// Close stops observing the live sessions.
func (m *Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.bound {
		if b.progress != nil {
			b.progress.stop()
		}
	}
}

// Stream implements llm.Model.
func (m *Model) Stream(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
	return func(yield func(content.Chunk) bool) {
		call, b, div := m.take(req)
		if div != nil {
			m.mu.Lock()
			m.divergences = append(m.divergences, div)
			m.mu.Unlock()
			yield(llm.FinishError(CodeDiverged, "%s", div.Error()))
			return
		}
		m.play(ctx, b, call, yield)
	}
}

// take binds the request's session if needed and returns the recorded call
// that answers it, or the divergence.
func (m *Model) take(req *llm.Request) (*Call, *binding, *Divergence) {
	live, liveCwd, known := m.live(req.SessionID)
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bound[req.SessionID]
	if !ok {
		var div *Divergence
		if b, div = m.bind(req, live, liveCwd, known); div != nil {
			return nil, nil, div
		}
	}
	if b.next >= len(b.rec.Calls) {
		return nil, nil, &Divergence{Session: b.rec, Live: req.SessionID,
			Detail: fmt.Sprintf("an extra model call: the recording has %d calls for this session, all of them replayed", len(b.rec.Calls))}
	}
	call := &b.rec.Calls[b.next]
	rn, ln := newNormalizer(b.rec.Header.Cwd), newNormalizer(b.liveCwd)
	if d := diffRequests(call.Request, rn, req, ln); d != "" {
		return nil, nil, &Divergence{Session: b.rec, Live: req.SessionID, Turn: call.Turn, Step: call.Step, Detail: d}
	}
	m.learn(rn, ln)
	b.next++
	return call, b, nil
}

// learn notes which live id took the place of each recorded one in two
// requests found equal, so that the recorded answers name the live ids.
// m.mu must be held.
func (m *Model) learn(rec, live *normalizer) {
	for i := range min(len(rec.ids), len(live.ids)) {
		if rec.ids[i] != live.ids[i] {
			m.ids[rec.ids[i]] = live.ids[i]
		}
	}
}

// live returns the live session of id and its working directory; ok is
// false when the session is not known, and then its working directory is
// taken to be the recorded one.
func (m *Model) live(id string) (s *session.Session, cwd string, ok bool) {
	if m.opts.Live == nil {
		return nil, "", false
	}
	if s, ok = m.opts.Live(id); !ok {
		return nil, "", false
	}
	return s, s.Header().Cwd, true
}

// bind binds the request's session to a recorded one. m.mu must be held.
func (m *Model) bind(req *llm.Request, live *session.Session, liveCwd string, known bool) (*binding, *Divergence) {
	cands := m.candidates(live)
	cwdOf := func(c *Session) string {
		if !known {
			return c.Header.Cwd
		}
		return liveCwd
	}
	for _, c := range cands {
		rn, ln := newNormalizer(c.Header.Cwd), newNormalizer(cwdOf(c))
		if diffRequests(c.Calls[0].Request, rn, req, ln) == "" {
			b := &binding{rec: c, liveCwd: cwdOf(c)}
			if live != nil {
				b.progress = m.observe(live)
			}
			m.bound[req.SessionID], m.taken[c] = b, true
			m.ids[c.Header.ID] = req.SessionID
			return b, nil
		}
	}
	if len(cands) == 0 {
		return nil, &Divergence{Live: req.SessionID, Detail: "no recorded session is left to answer it (every recorded session of its parent is replayed already)"}
	}
	c := cands[0]
	first := c.Calls[0]
	return nil, &Divergence{Session: c, Live: req.SessionID, Turn: first.Turn, Step: first.Step,
		Detail: "its first request matches no recorded session; against this one, " +
			diffRequests(first.Request, newNormalizer(c.Header.Cwd), req, newNormalizer(cwdOf(c)))}
}

// candidates returns the unbound recorded sessions a live session may be
// bound to, best first. m.mu must be held.
func (m *Model) candidates(live *session.Session) []*Session {
	pool, wantChild := m.rec.Sessions, false
	if live != nil {
		parent := live.Header().ParentSession
		if pb, ok := m.bound[parent]; ok {
			pool = pb.rec.Children
		}
		wantChild = parent != ""
	}
	var first, rest []*Session
	for _, s := range pool {
		if m.taken[s] || len(s.Calls) == 0 {
			continue
		}
		if (s.Parent != nil) == wantChild {
			first = append(first, s)
		} else {
			rest = append(rest, s)
		}
	}
	return append(first, rest...)
}

// observe counts a live session's events from now on, and the ones it has.
func (m *Model) observe(s *session.Session) *progress {
	p := &progress{seen: map[int64]bool{}}
	p.stop = s.Observe(func(e session.Event) {
		if !structural(e.Type) {
			return
		}
		p.mu.Lock()
		p.seen[e.Seq] = true
		p.mu.Unlock()
		m.signal()
	})
	for _, e := range s.Events() {
		if structural(e.Type) {
			p.mu.Lock()
			p.seen[e.Seq] = true
			p.mu.Unlock()
		}
	}
	return p
}

// structural reports whether events of type t count for the order between
// sessions: every event but model chunks and retries.
func structural(t string) bool { return t != session.TypeAssistantChunk && t != session.TypeLLMRetry }

func (m *Model) signal() {
	m.sigMu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.sigMu.Unlock()
}

func (m *Model) changes() <-chan struct{} {
	m.sigMu.Lock()
	defer m.sigMu.Unlock()
	return m.changed
}

// play yields a recorded call's chunks.
func (m *Model) play(ctx context.Context, b *binding, call *Call, yield func(content.Chunk) bool) {
	prev := call.RequestTime
	for i, c := range call.Chunks {
		if m.opts.Timing == AsRecorded {
			if !sleep(ctx, time.Duration(call.ChunkTimes[i]-prev)*time.Millisecond) {
				yield(llm.FinishAborted(context.Cause(ctx)))
				return
			}
			prev = call.ChunkTimes[i]
		}
		if c.Type == content.ChunkFinish {
			if !m.inOrder(ctx, b, call.FinishTime()) {
				yield(llm.FinishAborted(context.Cause(ctx)))
				return
			}
		}
		if ctx.Err() != nil {
			yield(llm.FinishAborted(context.Cause(ctx)))
			return
		}
		if !yield(m.rewrite(c)) {
			return
		}
	}
	if !call.Finished {
		yield(llm.FinishError(CodeIncomplete, "the recording of %s ends during its call of turn %d step %d (its process stopped while the model answered)",
			b.rec.Label(), call.Turn, call.Step))
	}
}

// rewrite puts the live ids in place of the recorded ones a chunk names
// (the model of a continued child addresses it by id).
func (m *Model) rewrite(c content.Chunk) content.Chunk {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.ids) == 0 {
		return c
	}
	swap := func(s string) string {
		if len(s) < 36 {
			return s
		}
		return uuidPattern().ReplaceAllStringFunc(s, func(id string) string { return cmp.Or(m.ids[id], id) })
	}
	c.Text, c.ArgumentsDelta = swap(c.Text), swap(c.ArgumentsDelta)
	if c.Block != nil {
		b := *c.Block
		b.Text, b.Arguments = swap(b.Text), swap(b.Arguments)
		c.Block = &b
	}
	return c
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// inOrder waits until every other live session served here has logged the
// events its recorded counterpart had logged before at (Unix ms), at most
// OrderWait. It reports false when ctx ended first.
func (m *Model) inOrder(ctx context.Context, self *binding, at int64) bool {
	if self.progress == nil {
		return true
	}
	var timeout <-chan time.Time
	for {
		changed := m.changes()
		if m.caughtUp(self, at) {
			return true
		}
		if timeout == nil {
			t := time.NewTimer(m.opts.OrderWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

func (m *Model) caughtUp(self *binding, at int64) bool {
	m.mu.Lock()
	others := make([]*binding, 0, len(m.bound))
	for _, b := range m.bound {
		if b != self && b.progress != nil {
			others = append(others, b)
		}
	}
	m.mu.Unlock()
	for _, b := range others {
		need := sort.Search(len(b.rec.structural), func(i int) bool { return b.rec.structural[i] >= at })
		if b.progress.count() < need {
			return false
		}
	}
	return true
}
