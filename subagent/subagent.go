// Package subagent is dsh's subagent seam: an agent delegates a
// self-contained task to a child agent through a registry of named
// providers. The package defines the vocabulary (capabilities, start
// request, result, run, provider), validates every start before a child
// exists, and announces run lifecycle on the runtime's event bus. It knows no
// transport: providers live in sibling packages.
//
// Every caller reaches a child by one road, Service.Delegate (see
// delegate.go): the subagent tool in every mode, `dsh mcp` through that
// tool, and embedders. Beneath it is the provider-level Start whose Run
// the caller owns. This package is the vocabulary, the registry with its
// admission and validation, the run announcements and that road; the
// continuable children (their residency, settlement, notices, interrupts,
// drains and listing) are kept by package subagent/continuable, which
// continuable.Serve hands the service as its Continuation, and which
// builds on the small service API in manage.go. The seam builds no child
// agent: providers do, and the agents of continuable children are built by
// the ChildBuilder the manager is handed (package inproc's). A child's
// outcome is read from its log in one place (outcome.go), its usage
// reaches its parent's log one way (UsageType, when its end is announced),
// and a settlement comes up the call stack (agent.OnIdle), not from an
// event listener.
package subagent

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/tool"
)

// Capabilities are the start-time features a provider honours. The service
// refuses a request that needs one the provider lacks, before any child
// exists.
type Capabilities struct {
	OutputSchema bool // honours StartRequest.OutputSchema
	DepthLimit   bool // enforces StartRequest.MaxDepth
	ToolFilter   bool // applies StartRequest.ToolFilter
	Persona      bool // applies StartRequest.Persona
	// Policy: applies StartRequest.Policy and StartRequest.Hooks to the
	// child's own tool calls.
	Policy bool
}

// StartRequest is what a caller asks of a child. A nil pointer field means
// "not requested"; a non-nil one needs the matching capability, even when it
// points at a zero value.
type StartRequest struct {
	// Label is a short human name for the run (optional).
	Label string
	// Prompt is the child's task, sent as one user message.
	Prompt []content.Block
	// Parent is the delegating agent (required): its session gives the
	// child's cwd, lineage and depth.
	Parent *agent.Agent
	// AgentOptions override the child's model route and limits; unset
	// fields inherit the parent's.
	AgentOptions *agent.Options
	// OutputSchema asks for a structured result matching an object-rooted
	// schema within the enforced subset (see CheckSchema).
	OutputSchema *jsonschema.Schema
	// MaxDepth caps the child's delegation depth.
	MaxDepth *int
	// ToolFilter restricts the child's global tools.
	ToolFilter *tool.Restriction
	// Persona replaces the deployment persona for this child.
	Persona *string
	// Policy narrows the permission policy the child inherits from Parent
	// (it can never widen it).
	Policy *permission.Policy
	// Hooks are run in the child after those it inherits from Parent.
	Hooks *hook.Set
	// Subagent describes the child to its hooks (its subagent_type, the
	// delegation's provider, description and prompt). An in-process
	// provider gives it to the child's agent (agent.CreateOptions.Subagent),
	// which then runs its SubagentStop hooks itself; others ignore it.
	Subagent *agent.Subagent
	// Cwd is the child's working directory (absolute), instead of the
	// parent's; every provider honours it, over its own configured cwd.
	Cwd string
	// Foreground, set by Service.Delegate (Start and Admit clear it), says
	// that the caller waits for the run at once, with a Wait whose ctx
	// cannot end: an in-process provider may then run the child's turn on
	// the waiting goroutine instead of a goroutine of its own. Providers
	// may ignore it.
	Foreground bool

	// Depth is the child's delegation depth, set by the service to the
	// parent's depth + 1. Providers read it and never compute it (see
	// CheckLineage).
	Depth int
	// Progress, set by the service, reports the child's activity; providers
	// call it (from any goroutine) and may ignore it.
	Progress func(Progress)
	// Descriptor, set by the service, is the child's descriptor: a provider
	// that keeps the child's session writes it there (AppendDescriptor),
	// before the child's first model request.
	Descriptor *Descriptor
	// LiveSlots, set by the service, admits the child's own children
	// against its tree's live-children cap when the child runs in another
	// process (nil: no cap); a provider whose child can ask passes them on.
	LiveSlots *LiveSlots
}

// CheckLineage is a provider's check that req came through the service: it
// has a parent agent and the depth the service set (INVALID_REQUEST
// otherwise, naming provider).
func CheckLineage(provider string, req StartRequest) error {
	switch {
	case req.Parent == nil:
		return &Error{Code: CodeInvalidRequest, Provider: provider, Msg: "start: the request has no parent agent"}
	case req.Depth < 1:
		return &Error{Code: CodeInvalidRequest, Provider: provider,
			Msg: fmt.Sprintf("start: the request has no delegation depth (got %d): start children through subagent.Service, which sets it", req.Depth)}
	}
	return nil
}

// StopReason says why a run ended. The set is open: consumers treat any
// value other than the constants below as a failure.
type StopReason string

// The known stop reasons.
const (
	Completed StopReason = "completed"
	Aborted   StopReason = "aborted"
	Failed    StopReason = "error"
	MaxTokens StopReason = "max-tokens"
	Refusal   StopReason = "refusal"
	// MaxSteps: the child's turn reached its step cap.
	MaxSteps StopReason = "max-steps"
	// BudgetSpent: the delegation tree spent its token budget.
	BudgetSpent StopReason = "budget"
)

// Known reports whether r is one of the known stop reasons.
func (r StopReason) Known() bool {
	switch r {
	case Completed, Aborted, Failed, MaxTokens, Refusal, MaxSteps, BudgetSpent:
		return true
	}
	return false
}

// Result is a run's terminal outcome. A StopReason other than Completed
// means Output may be partial.
type Result struct {
	// Output is the child's final assistant output.
	Output []content.Block
	// Structured is the captured value when an OutputSchema was satisfied.
	Structured any
	// StopReason says why the run ended.
	StopReason StopReason
	// Diagnostic is a provider-authored explanation of a failure, at most
	// MaxDiagnostic bytes (see Diagnostic).
	Diagnostic string
	// Usage counts tokens per model, keyed "provider/model".
	Usage map[string]content.Usage
	// CostUSD is the cost the child's product reported, in US dollars
	// (0 when unknown).
	CostUSD float64
	// Teardown is a failure while a settled continuable child was torn
	// down (its log's flush or its detach): an *Error with code
	// ACTIVATION_TEARDOWN_FAILED (ErrTeardownFailed). The outcome and
	// output above stand; nil when the teardown succeeded.
	Teardown error
}

// Run is a ready child. Consumers Wait for its result and must always
// Dispose it.
type Run interface {
	// ID is the run's id: the child session id for a local run, an id
	// unique in the parent's namespace for a remote one.
	ID() string
	// LocalAgent is the in-process child, or nil for a remote run.
	LocalAgent() *agent.Agent
	// Wait returns the result once the run settles. Child failures are a
	// StopReason; the error is only for infrastructure faults or a ctx that
	// ended first.
	Wait(ctx context.Context) (Result, error)
	// Done is closed when the run has settled.
	Done() <-chan struct{}
	// Dispose cancels remaining work and returns once no goroutine or
	// process of the run remains. It is idempotent.
	Dispose(ctx context.Context) error
}

// Steerer is a run that accepts messages between the child's steps.
type Steerer interface {
	SendMessage(ctx context.Context, msg []content.Block) error
}

// Resumer is a run whose settled, undisposed child accepts a follow-up
// task, continuing its session in a new run. It lives only as long as the
// run: a child that must continue after its run is disposed, or in another
// process, is a continuable one (Service.StartContinuable,
// Service.Followup), which supersedes it.
type Resumer interface {
	Resume(ctx context.Context, req ResumeRequest) (Run, error)
}

// ResumeRequest is a follow-up task for a Resumer.
type ResumeRequest struct {
	Prompt []content.Block
	// Progress, set by the service, reports the new run's activity.
	Progress func(Progress)
}

// Provider is one transport for running a child agent.
type Provider interface {
	// Name is the provider's registry name.
	Name() string
	// Capabilities are the start-time features the provider honours.
	Capabilities() Capabilities
	// InheritsParentContext reports whether the child sees the parent's
	// conversation (descriptive only; consumers derive wording from it).
	InheritsParentContext() bool
	// Start returns a ready run. ctx governs the whole run: cancelled
	// before readiness, Start cleans up and returns an error; cancelled
	// after, the run settles Aborted.
	Start(ctx context.Context, req StartRequest) (Run, error)
}

// ChildLabel names a child in its delegation tree: "provider · label", or
// the provider alone.
func ChildLabel(provider, label string) string {
	if label == "" {
		return provider
	}
	return provider + " · " + label
}

// MaxDiagnostic bounds Result.Diagnostic, in bytes.
const MaxDiagnostic = 4096

const truncatedMarker = "…[truncated]"

// Diagnostic returns s cut to at most MaxDiagnostic bytes on a rune
// boundary, ending with a marker when it was cut.
func Diagnostic(s string) string {
	if len(s) <= MaxDiagnostic {
		return s
	}
	cut := MaxDiagnostic - len(truncatedMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMarker
}
