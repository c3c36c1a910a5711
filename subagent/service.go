package subagent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/telemetry"
)

// Service is the registry of providers and the one way to start a child.
// It is safe for concurrent use.
type Service struct {
	bus     *event.Bus
	log     *slog.Logger
	mu      sync.Mutex
	byName  map[string]Provider
	order   []string
	checks  map[string][]*providerCheck // by provider name; see Require
	lastRun atomic.Uint64

	maxLive  int                        // live children a tree may have; 0: unbounded
	perTurn  int                        // children one turn of an agent may start; 0: unbounded
	maxWakes int                        // consecutive model calls settlement notices alone may cause; 0: DefaultMaxWakes
	live     map[*agent.Agent]int       // live children per root agent; guarded by mu
	upstream map[*agent.Agent]*upstream // roots whose parent process counts too; guarded by mu
	cont     Continuation               // continuable children; nil until UseContinuation

	tracer *telemetry.Tracer // set before the first start; nil: no spans
}

// Trace makes a span of every child run (see runSpan); call it before the
// first start.
func (s *Service) Trace(t *telemetry.Tracer) { s.tracer = t }

// LimitLiveChildren caps the children that one delegation tree (a root
// agent and its in-process descendants, and through LiveSlots and
// CountUpstream those its children in other processes start) may have
// alive at once; a start beyond it fails with LIMIT_REACHED. 0 removes the
// cap.
func (s *Service) LimitLiveChildren(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxLive = max(n, 0)
}

// LimitChildrenPerTurn caps the children that one turn of an agent may
// start (continuing a child counts as a start); a start beyond it fails
// with LIMIT_REACHED. 0 removes the cap. Starts outside a turn (a tool
// host's) are not counted.
func (s *Service) LimitChildrenPerTurn(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perTurn = max(n, 0)
}

// DefaultMaxWakes is how many turns in a row settlement notices may open
// in a parent when LimitWakes was not called.
const DefaultMaxWakes = 3

// LimitWakes bounds the model calls in a row that settlement notices of
// continuable children alone may cause in a parent, with no message of its
// user between them: the turns they open in an idle parent, and the steps
// they add to a turn whose model has answered (n <= 0: DefaultMaxWakes;
// see agent.WakesSinceUser). Past it a notice waits, without waking the
// parent, for its next turn: a model cannot keep itself busy forever by
// sending its children more work at every notice.
func (s *Service) LimitWakes(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxWakes = n
}

// admit counts a child of parent's tree against the live-children cap,
// and against the cap of parent's running turn, and returns its release.
func (s *Service) admit(name string, parent *agent.Agent) (release func(), err error) {
	if release, err = s.admitLive(name, parent); err != nil {
		return nil, err
	}
	s.mu.Lock()
	perTurn := s.perTurn
	s.mu.Unlock()
	if !parent.StartChild(perTurn) { // outside s.mu: the agent's lock is never taken under it
		release()
		return nil, &Error{Code: CodeLimitReached, Provider: name,
			Msg: fmt.Sprintf("this turn has already started %d children, its cap (subagents.maxChildrenPerTurn): "+
				"finish the turn with what they returned", perTurn)}
	}
	return release, nil
}

// admitLive counts a child of parent's tree against the live-children cap,
// in this process and, for a tree whose root's parent is in another
// process, in that one's count too (see CountUpstream), and returns its
// release.
func (s *Service) admitLive(name string, parent *agent.Agent) (release func(), err error) {
	root := rootOf(parent)
	s.mu.Lock()
	up := s.upstream[root]
	if limit := s.liveLimit(up); limit > 0 && s.live[root] >= limit {
		s.mu.Unlock()
		return nil, limitReached(name, limit)
	}
	if s.live == nil {
		s.live = map[*agent.Agent]int{}
	}
	s.live[root]++
	s.mu.Unlock()
	var once sync.Once
	local := func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.live[root]--; s.live[root] <= 0 {
				delete(s.live, root)
			}
		})
	}
	return s.admitUpstream(name, up, local)
}

// NewService returns an empty service announcing on bus.
func NewService(bus *event.Bus, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	if bus == nil {
		bus = event.New(log)
	}
	return &Service{bus: bus, log: log, byName: map[string]Provider{}}
}

// Register adds p under p.Name() and returns its disposer, which removes it
// (runs already started are unaffected). A name already registered is
// refused and the first registration stays.
func (s *Service) Register(p Provider) (unregister func(), err error) {
	if p == nil || p.Name() == "" {
		return nil, invalid("register: a provider needs a non-empty name")
	}
	name := p.Name()
	s.mu.Lock()
	checks := slices.Clone(s.checks[name])
	s.mu.Unlock()
	for _, c := range checks { // outside s.mu: a check may read the service
		if err := c.fn(p); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	if _, dup := s.byName[name]; dup {
		s.mu.Unlock()
		return nil, &Error{Code: CodeDuplicateProvider, Provider: name, Msg: fmt.Sprintf("provider %q is already registered", name)}
	}
	s.byName[name] = p
	s.order = append(s.order, name)
	s.mu.Unlock()
	s.bus.Emit(ProviderAdded{Provider: p})
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.byName[name] != p {
				s.mu.Unlock()
				return
			}
			delete(s.byName, name)
			s.order = slices.DeleteFunc(s.order, func(n string) bool { return n == name })
			s.mu.Unlock()
			s.bus.Emit(ProviderRemoved{Name: name})
		})
	}, nil
}

// providerCheck is one Require.
type providerCheck struct{ fn func(Provider) error }

// Require makes Register run check on every provider registered under
// name from now on, before it is added: an error refuses the registration,
// and Register returns it. A tool configured for a provider that is not
// registered yet uses it, so that a provider lacking a capability the tool
// needs is refused where it is registered, not left unused. It returns
// check's removal.
func (s *Service) Require(name string, check func(Provider) error) (remove func()) {
	c := &providerCheck{fn: check}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checks == nil {
		s.checks = map[string][]*providerCheck{}
	}
	s.checks[name] = append(s.checks[name], c)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.checks[name] = slices.DeleteFunc(s.checks[name], func(x *providerCheck) bool { return x == c }); len(s.checks[name]) == 0 {
			delete(s.checks, name)
		}
	}
}

// Provider returns the provider registered under name.
func (s *Service) Provider(name string) (Provider, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byName[name]
	return p, ok
}

// Names returns the registered provider names in registration order.
func (s *Service) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// Start validates req against the named provider and starts a child. In
// order, before any child exists: the request's shape, provider lookup
// (NO_PROVIDER), each requested capability in the order outputSchema,
// depthLimit, toolFilter, persona, policy (UNSUPPORTED_CAPABILITY for the
// first one missing), an absolute Cwd, the MaxDepth domain, the child's
// depth against MaxDepth (DEPTH_EXCEEDED), the output schema
// (UNSUPPORTED_SCHEMA) and the tree's live-children cap (LIMIT_REACHED).
// Only then is the provider called. ctx governs the whole run (see
// Provider.Start).
func (s *Service) Start(ctx context.Context, name string, req StartRequest) (Run, error) {
	adm, err := s.Admit(name, req)
	if err != nil {
		return nil, err
	}
	return adm.Start(ctx)
}

// Admission is a start that passed every check of Start and holds a place
// under the tree's live-children cap. Start it, or Release it.
type Admission struct {
	s       *Service
	name    string
	req     StartRequest
	release func()
	used    atomic.Bool
}

// Admit makes Start's checks without starting anything, so that a caller
// that starts the child later (a background task) can report a refusal at
// once.
func (s *Service) Admit(name string, req StartRequest) (*Admission, error) {
	req.Foreground = false // only Delegate, which waits at once, may promise it
	if err := s.validate(name, &req); err != nil {
		return nil, err
	}
	release, err := s.admit(name, req.Parent)
	if err != nil {
		return nil, err
	}
	return &Admission{s: s, name: name, req: req, release: release}, nil
}

// Release gives up an admission that will not be started. It is a no-op
// after Start.
func (a *Admission) Release() {
	if a.used.CompareAndSwap(false, true) {
		a.release()
	}
}

// Start starts the admitted child; an admission starts at most once.
func (a *Admission) Start(ctx context.Context) (Run, error) {
	if !a.used.CompareAndSwap(false, true) {
		return nil, invalid("start: the admission was already used or released")
	}
	s, name, req := a.s, a.name, a.req
	p, ok := s.Provider(name)
	if !ok {
		a.release()
		return nil, &Error{Code: CodeNoProvider, Provider: name, Msg: fmt.Sprintf("provider %q was unregistered", name)}
	}
	if err := ctx.Err(); err != nil {
		a.release()
		return nil, AbortedBeforeReady(name, context.Cause(ctx))
	}
	t := &tracker{svc: s, parent: req.Parent, info: RunInfo{RunID: fmt.Sprintf("run-%d", s.lastRun.Add(1)), Provider: name,
		ParentID: req.Parent.ID(), Label: req.Label}, release: a.release}
	req.Progress = t.progress
	req.LiveSlots = s.liveSlots(name, req.Parent)
	req.Descriptor = &Descriptor{Version: DescriptorVersion, Mode: OneShot, Provider: name, Label: req.Label}
	ctx, t.span = s.runSpan(ctx, t.info, req.Depth)
	run, err := p.Start(ctx, req)
	if err != nil {
		telemetry.FailErr(t.traceSpan(), err)
		t.abandon()
		return nil, err
	}
	if run == nil {
		t.abandon()
		return nil, &Error{Code: CodeInvalidRequest, Provider: name, Msg: fmt.Sprintf("provider %q returned no run", name)}
	}
	return t.announce(run), nil
}

func (s *Service) validate(name string, req *StartRequest) error {
	switch {
	case name == "":
		return invalid("start: provider name is empty")
	case req.Parent == nil:
		return invalid("start: the request has no parent agent")
	case !hasContent(req.Prompt):
		return invalid("start: the prompt is empty")
	}
	p, ok := s.Provider(name)
	if !ok {
		return &Error{Code: CodeNoProvider, Provider: name,
			Msg: fmt.Sprintf("no provider %q (registered: %s)", name, strings.Join(s.Names(), ", "))}
	}
	caps := p.Capabilities()
	switch {
	case req.OutputSchema != nil && !caps.OutputSchema:
		return unsupported(name, CapOutputSchema)
	case req.MaxDepth != nil && !caps.DepthLimit:
		return unsupported(name, CapDepthLimit)
	case req.ToolFilter != nil && !caps.ToolFilter:
		return unsupported(name, CapToolFilter)
	case req.Parent.Tools().Restricted() && !caps.ToolFilter:
		return &Error{Code: CodeUnsupportedCapability, Provider: name,
			Msg: fmt.Sprintf("this agent's tools are restricted, and provider %q cannot restrict its children's tools "+
				"(the toolFilter capability), so it cannot start children there: a child sees no more than its parent", name)}
	case req.Persona != nil && !caps.Persona:
		return unsupported(name, CapPersona)
	case (req.Policy != nil || !req.Hooks.Empty()) && !caps.Policy:
		return unsupported(name, CapPolicy)
	case !utf8.ValidString(req.Label):
		return invalid("start: the label is not valid UTF-8 (%q): a child's label is stored as given or not at all", req.Label)
	case req.Persona != nil && !utf8.ValidString(*req.Persona):
		return invalid("start: the persona is not valid UTF-8: a child's persona is stored as given or not at all")
	case req.Cwd != "" && !filepath.IsAbs(req.Cwd):
		return invalid("start: cwd must be an absolute path, got %q", req.Cwd)
	}
	req.Depth = req.Parent.Depth() + 1
	if c := req.Parent.Options().MaxDelegationDepth; c > 0 && req.Depth > c {
		return depthExceeded(req.Depth, c)
	}
	if req.MaxDepth != nil {
		if *req.MaxDepth < 0 {
			return invalid("start: maxDepth must be a non-negative integer, got %d", *req.MaxDepth)
		}
		if req.Depth > *req.MaxDepth {
			return depthExceeded(req.Depth, *req.MaxDepth)
		}
	}
	if req.OutputSchema != nil {
		return CheckSchema(req.OutputSchema)
	}
	return nil
}

func hasContent(blocks []content.Block) bool {
	for _, b := range blocks {
		if b.Type != content.TypeText || strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}

// maxBufferedProgress bounds the progress a run reports before it is
// announced; later reports are dropped until then.
const maxBufferedProgress = 256

// tracker announces one run's lifecycle and relays its progress.
//
// A parked child keeps its tracker: the settled result and the progress
// buffered before the announce are apart (made when there are some), and
// the flags share a word, and its callbacks are one function, so that it
// fits the allocator's 176-byte class, not the 320-byte one.
type tracker struct {
	svc     *Service
	parent  *agent.Agent
	ended   chan struct{} // made by a Dispose that must wait, closed once isEnded; guarded by mu
	release func()        // run after Ended (or abandon), before after; nil: none
	after   func(Result)  // run after Ended, see tracked.AfterSettle (chained); guarded by mu
	result  *Result       // the settled result, once ended; guarded by mu

	mu       sync.Mutex
	info     RunInfo
	started  bool
	finished bool
	isEnded  bool        // Ended is emitted (or the run abandoned); guarded by mu
	buffered *[]Progress // what the run reported before it was announced (most runs: nothing)
	span     trace.Span  // the run's, ended with it; nil: none
}

func (t *tracker) progress(p Progress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.finished:
	case !t.svc.bus.Wants(ProgressEvent{}.EventType()):
	case !t.started:
		if t.buffered == nil {
			t.buffered = new([]Progress)
		}
		if len(*t.buffered) < maxBufferedProgress {
			*t.buffered = append(*t.buffered, p)
		}
	default:
		t.svc.bus.Emit(ProgressEvent{RunInfo: t.info, Progress: p})
	}
}

// abandon drops a run whose provider failed to start it.
func (t *tracker) abandon() {
	t.traceSpan().End()
	t.mu.Lock()
	t.finished, t.buffered = true, nil
	t.setEnded()
	t.mu.Unlock()
	if t.release != nil {
		t.release()
	}
}

// deref returns the slice p points to, nil for a nil p.
func deref[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

// announce emits Started, relays buffered progress, arranges for Ended and
// wraps the run so that Dispose also waits for Ended.
func (t *tracker) announce(run Run) Run {
	t.mu.Lock()
	t.info.ChildID, t.info.Local = run.ID(), run.LocalAgent() != nil
	if t.span != nil {
		t.span.SetAttributes(telemetry.AgentID.String(t.info.ChildID))
	}
	t.started = true
	t.svc.bus.Emit(Started{RunInfo: t.info})
	for _, p := range deref(t.buffered) {
		t.svc.bus.Emit(ProgressEvent{RunInfo: t.info, Progress: p})
	}
	t.buffered = nil
	t.mu.Unlock()
	if s, ok := run.(SettleNotifier); ok {
		s.AfterSettle(t.end)
	} else { // a run that cannot call back is waited for here
		go func() {
			res, err := run.Wait(context.Background())
			if err != nil {
				res = Result{StopReason: Failed, Diagnostic: Diagnostic(err.Error())}
			}
			t.end(res)
		}()
	}
	return wrap(&tracked{Run: run, t: t})
}

// end announces the end of a run settled with res, then runs the
// AfterSettle callbacks.
func (t *tracker) end(res Result) {
	end := Ended{RunInfo: t.info, StopReason: res.StopReason, Usage: res.Usage, CostUSD: res.CostUSD, Diagnostic: res.Diagnostic}
	if len(res.Output) > 0 {
		end.LastAssistantMessage = slices.Clone(res.Output)
	}
	if !t.info.Local { // an in-process child charged its tree as it ran
		for _, u := range res.Usage {
			t.parent.Charge(u)
		}
	}
	recordUsage(t.parent, t.info.ChildID, res.Usage) // the one way a child's usage reaches its parent's log
	endRunSpan(t.traceSpan(), end)
	t.mu.Lock()
	t.finished = true
	t.mu.Unlock()
	t.svc.bus.Emit(end)
	t.mu.Lock()
	after := t.after
	t.after, t.result = nil, &res
	t.setEnded()
	t.mu.Unlock()
	if t.release != nil {
		t.release()
	}
	if after != nil {
		after(res)
	}
}

// tracked is an accepted run whose Dispose also waits for its Ended event.
type tracked struct {
	Run
	t *tracker
}

// AfterSettle calls fn with the result once the run has settled and its
// end has been announced — on the settling goroutine, or at once if that
// is past — so that a consumer can follow a run without a goroutine of its
// own or a Wait.
func (r *tracked) AfterSettle(fn func(Result)) {
	r.t.mu.Lock()
	if r.t.isEnded {
		var res Result
		if r.t.result != nil { // nil for a run abandoned before it started
			res = *r.t.result
		}
		r.t.mu.Unlock()
		fn(res)
		return
	}
	chain(&r.t.after, fn)
	r.t.mu.Unlock()
}

// Dispose disposes the run and waits until its end has been announced.
func (r *tracked) Dispose(ctx context.Context) error {
	err := r.Run.Dispose(ctx)
	r.t.mu.Lock()
	if !r.t.isEnded && r.t.ended == nil {
		r.t.ended = make(chan struct{})
	}
	ended, isEnded := r.t.ended, r.t.isEnded
	r.t.mu.Unlock()
	if isEnded { // the common case: a run's end is announced as it settles
		return err
	}
	select {
	case <-ended:
	case <-ctx.Done():
		if err == nil {
			err = context.Cause(ctx)
		}
	}
	return err
}

// setEnded marks the run's end announced and wakes a Dispose waiting for
// it. t.mu must be held.
func (t *tracker) setEnded() {
	t.isEnded = true
	if t.ended != nil {
		close(t.ended)
	}
}

// wrap keeps the optional Steerer and Resumer of the provider's run visible
// through the tracked wrapper: as the tracked struct under another name,
// whose added methods reach the provider's run, so that a wrapper costs no
// allocation of its own (a struct of the wrapper and the two interfaces
// was 48 B, and a resumer's closure 32 B, per child).
func wrap(r *tracked) Run {
	_, canSteer := r.Run.(Steerer)
	_, canResume := r.Run.(Resumer)
	switch {
	case canSteer && canResume:
		return (*steerableResumable)(r)
	case canSteer:
		return (*steerable)(r)
	case canResume:
		return (*resumable)(r)
	}
	return r
}

// The tracked wrappers of a run that also steers, resumes, or both.
type (
	steerable          tracked
	resumable          tracked
	steerableResumable tracked
)

func (r *steerable) Dispose(ctx context.Context) error { return (*tracked)(r).Dispose(ctx) }
func (r *steerable) AfterSettle(fn func(Result))       { (*tracked)(r).AfterSettle(fn) }
func (r *steerable) SendMessage(ctx context.Context, msg []content.Block) error {
	return r.Run.(Steerer).SendMessage(ctx, msg)
}

func (r *resumable) Dispose(ctx context.Context) error { return (*tracked)(r).Dispose(ctx) }
func (r *resumable) AfterSettle(fn func(Result))       { (*tracked)(r).AfterSettle(fn) }
func (r *resumable) Resume(ctx context.Context, req ResumeRequest) (Run, error) {
	return (*tracked)(r).resume(ctx, req)
}

func (r *steerableResumable) Dispose(ctx context.Context) error { return (*tracked)(r).Dispose(ctx) }
func (r *steerableResumable) AfterSettle(fn func(Result))       { (*tracked)(r).AfterSettle(fn) }
func (r *steerableResumable) SendMessage(ctx context.Context, msg []content.Block) error {
	return r.Run.(Steerer).SendMessage(ctx, msg)
}
func (r *steerableResumable) Resume(ctx context.Context, req ResumeRequest) (Run, error) {
	return (*tracked)(r).resume(ctx, req)
}

// resume continues the provider's run (a Resumer) in a new run, announced
// like any other, its progress included.
func (r *tracked) resume(ctx context.Context, req ResumeRequest) (Run, error) {
	info := r.t.info
	info.RunID = fmt.Sprintf("run-%d", r.t.svc.lastRun.Add(1))
	t := &tracker{svc: r.t.svc, parent: r.t.parent, info: info}
	req.Progress = t.progress
	next, err := r.Run.(Resumer).Resume(ctx, req)
	if err != nil {
		t.abandon()
		return nil, err
	}
	return t.announce(next), nil
}
