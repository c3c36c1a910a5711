package subagent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
)

// What the manager of continuable children (Continuation) uses of the
// service: the checks and caps every start passes, the run announcements,
// the wake budget and the log.

// Validate makes the checks of Start on req for the named provider, before
// any child exists, and sets req.Depth (see Start for their order).
func (s *Service) Validate(name string, req *StartRequest) error { return s.validate(name, req) }

// AdmitChild counts a child of parent's tree against the live-children
// cap, and against the cap of parent's running turn (LIMIT_REACHED), and
// returns its release.
func (s *Service) AdmitChild(name string, parent *agent.Agent) (release func(), err error) {
	return s.admit(name, parent)
}

// ChildSlots returns what a provider tells a child of parent's tree that
// runs in another process about the tree's live-children cap, or nil when
// nothing limits it (see StartRequest.LiveSlots).
func (s *Service) ChildSlots(name string, parent *agent.Agent) *LiveSlots {
	return s.liveSlots(name, parent)
}

// WakeBudget returns the LimitWakes bound.
func (s *Service) WakeBudget() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxWakes <= 0 {
		return DefaultMaxWakes
	}
	return s.maxWakes
}

// Logger returns the service's logger.
func (s *Service) Logger() *slog.Logger { return s.log }

// TeardownFailure logs that the provider's child, settled with stop,
// could not be torn down (err), and returns the error Result.Teardown
// carries (ACTIVATION_TEARDOWN_FAILED).
func (s *Service) TeardownFailure(provider, child string, stop StopReason, err error) error {
	s.log.Warn("subagent: teardown failed; the child's outcome stands", "child", child,
		"code", CodeTeardownFailed, "stop", stop, "err", err)
	return TeardownFailed(provider, child, err)
}

// Epoch is one activation of a continuable child announced as a run, like
// any other: subagent/start at Announce, progress while it runs,
// subagent/end (with the child's usage recorded in its parent's log) when
// it is settled. Its Settlement's AfterSettle callbacks run after that end.
// The manager of continuable children owns the activation's teardown.
type Epoch struct {
	Settlement
	t     *tracker
	id    string
	agent *agent.Agent
}

// NewEpoch prepares the announcement of the next epoch of a continuable
// child of parent on the named provider, labelled label: its progress is
// buffered until Announce; release runs after subagent/end.
func (s *Service) NewEpoch(parent *agent.Agent, provider, label string, release func()) *Epoch {
	return &Epoch{t: &tracker{svc: s, parent: parent, info: RunInfo{RunID: fmt.Sprintf("run-%d", s.lastRun.Add(1)), Provider: provider,
		ParentID: parent.ID(), Label: label}, release: release}}
}

// Progress reports the epoch's activity (from any goroutine).
func (e *Epoch) Progress(p Progress) { e.t.progress(p) }

// Trace starts the epoch's span (see Service.Trace) under ctx's, for a
// child at depth, and returns ctx carrying it.
func (e *Epoch) Trace(ctx context.Context, depth int) context.Context {
	ctx, e.t.span = e.t.svc.runSpan(ctx, e.t.info, depth)
	return ctx
}

// Announce emits subagent/start for child id (local: its in-process
// agent, nil for one in another process) and relays buffered progress;
// subagent/end follows Settle.
func (e *Epoch) Announce(id string, local *agent.Agent) {
	e.id, e.agent = id, local
	e.t.announce(epochRun{e})
}

// epochRun is an Epoch as the Run the tracker announces.
type epochRun struct{ *Epoch }

func (e epochRun) ID() string                               { return e.id }
func (e epochRun) LocalAgent() *agent.Agent                 { return e.agent }
func (e epochRun) Dispose(ctx context.Context) error        { return nil }
func (e epochRun) Wait(ctx context.Context) (Result, error) { return e.Settlement.Wait(ctx) }

// SettledNotice is the settlement notice a continuable child's parent
// receives: the summary, then the epoch's closing message, or that it left
// none.
func SettledNotice(id string, res Result) content.Message {
	text := settledSummary(id, res.StopReason)
	if res.Diagnostic != "" {
		text += "\nDiagnostic: " + res.Diagnostic
	}
	if closing := strings.TrimSpace(content.JoinText(res.Output)); closing != "" {
		text += "\nIts closing message:\n" + closing
	} else {
		text += "\nIt left no closing message."
	}
	m := content.UserText(text)
	m.Source = content.Source{Kind: content.SourcePlugin, Plugin: SourcePlugin, Form: FormSettled, Sender: id}
	return m
}
