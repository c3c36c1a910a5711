// Package subagenttool is the model-facing subagent tool: one instance is
// bound by configuration to one provider of the subagent service, and lets
// the model delegate a task in the foreground (wait for the child's answer)
// or in the background (a task collected with the task_* tools).
package subagenttool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool"
)

// Config binds one tool instance to one provider.
type Config struct {
	// Provider is the subagent provider the tool starts children on (required).
	Provider string `yaml:"provider"`
	// ToolName is the model-facing name (default "subagent"); instances
	// need distinct names.
	ToolName string `yaml:"toolName"`
	// EnableRunInBackground exposes run_in_background (default true).
	EnableRunInBackground *bool `yaml:"enableRunInBackground"`
	// AgentOptions override the children's model route and limits.
	AgentOptions *agent.Options `yaml:"agentOptions"`
	// Persona replaces the deployment persona in the children.
	Persona *string `yaml:"persona"`
	// ToolFilter restricts the children's global tools.
	ToolFilter *tool.Restriction `yaml:"toolFilter"`
	// MaxDepth caps delegation depth. Default 3 when the provider enforces
	// depth; setting it for a provider that cannot is an error.
	MaxDepth *int `yaml:"maxDepth"`
}

// DefaultMaxDepth is the depth cap used when none is configured.
const DefaultMaxDepth = 3

// TaskKind is the kind of the background tasks the tool starts.
const TaskKind = "subagent"

// Deps are the services the tool uses.
type Deps struct {
	Subagents *subagent.Service
	Tools     *tool.Registry
	Tasks     *task.Runtime // nil: background runs are unavailable
	Events    *event.Bus
	Log       *slog.Logger
}

// Validate checks cfg on its own and fills in defaults.
func (cfg *Config) validate() error {
	if cfg.Provider == "" {
		return errors.New("subagent tool: provider is required")
	}
	if cfg.ToolName == "" {
		cfg.ToolName = "subagent"
	}
	if cfg.EnableRunInBackground == nil {
		on := true
		cfg.EnableRunInBackground = &on
	}
	if f := cfg.ToolFilter; f != nil && f.Allow == nil && len(f.Deny) == 0 {
		return fmt.Errorf("subagent tool %s: toolFilter needs allow or deny", cfg.ToolName)
	}
	if cfg.MaxDepth != nil && *cfg.MaxDepth < 0 {
		return fmt.Errorf("subagent tool %s: maxDepth must be a non-negative integer, got %d", cfg.ToolName, *cfg.MaxDepth)
	}
	return nil
}

// Mount registers the tool while its provider exists: now if it is
// registered, and whenever it is added later; it unregisters when the
// provider is removed. A configured capability the provider lacks is an
// error (returned when the provider is present at mount, logged when it
// arrives later). The disposer unmounts the tool for good.
func Mount(deps Deps, cfg Config) (dispose func(), err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if *cfg.EnableRunInBackground && deps.Tasks == nil {
		return nil, fmt.Errorf("subagent tool %s: run_in_background needs the task runtime", cfg.ToolName)
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	m := &mount{deps: deps, cfg: cfg}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Subscribe before looking the provider up, so that an addition in
	// between is not missed (its handler waits for m.mu).
	stopAdded := event.On(deps.Events, func(e subagent.ProviderAdded) {
		if e.Provider.Name() != cfg.Provider {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.disposed || m.unregister != nil {
			return
		}
		if err := m.register(e.Provider); err != nil {
			deps.Log.Error("subagent tool cannot mount", "tool", cfg.ToolName, "err", err)
		}
	})
	stopRemoved := event.On(deps.Events, func(e subagent.ProviderRemoved) {
		if e.Name != cfg.Provider {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.unmount()
	})
	if p, ok := deps.Subagents.Provider(cfg.Provider); ok {
		if err := m.register(p); err != nil {
			stopAdded()
			stopRemoved()
			return nil, err
		}
	} else {
		deps.Log.Info("subagent tool waits for its provider", "tool", cfg.ToolName, "provider", cfg.Provider)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopAdded()
			stopRemoved()
			m.mu.Lock()
			defer m.mu.Unlock()
			m.disposed = true
			m.unmount()
		})
	}, nil
}

// mount is one configured tool instance.
type mount struct {
	deps       Deps
	cfg        Config
	mu         sync.Mutex
	unregister func()
	disposed   bool
}

func (m *mount) unmount() {
	if m.unregister != nil {
		m.unregister()
		m.unregister = nil
	}
}

// register checks the provider's capabilities and registers the tool. m.mu
// must be held.
func (m *mount) register(p subagent.Provider) error {
	caps := p.Capabilities()
	need := []struct {
		set  bool
		have bool
		name string
	}{
		{m.cfg.MaxDepth != nil, caps.DepthLimit, subagent.CapDepthLimit},
		{m.cfg.ToolFilter != nil, caps.ToolFilter, subagent.CapToolFilter},
		{m.cfg.Persona != nil, caps.Persona, subagent.CapPersona},
	}
	for _, n := range need {
		if n.set && !n.have {
			return fmt.Errorf("subagent tool %s: provider %q does not support the %s capability; remove it from the tool's config",
				m.cfg.ToolName, p.Name(), n.name)
		}
	}
	maxDepth := m.cfg.MaxDepth
	if maxDepth == nil && caps.DepthLimit {
		d := DefaultMaxDepth
		maxDepth = &d
	}
	t := &instance{deps: m.deps, cfg: m.cfg, maxDepth: maxDepth}
	un, err := m.deps.Tools.Register(t.definition(p.InheritsParentContext()))
	if err != nil {
		return err
	}
	m.unregister = un
	return nil
}

// instance executes calls of one mounted tool.
type instance struct {
	deps     Deps
	cfg      Config
	maxDepth *int
}

// Model-visible wording.
const (
	freshWording = "Delegate a self-contained task to a subagent: a new agent that does NOT see this conversation. " +
		"Write a standalone prompt with everything the subagent needs (goal, context, constraints, what to return). " +
		"Its final answer comes back as the result."
	inheritWording = "Delegate a task to a subagent that already sees the completed turns of this conversation " +
		"(not the current, in-progress turn). State only what is new: the task and anything decided in this turn. " +
		"Its final answer comes back as the result."
	backgroundWording = " Set run_in_background to true to start it as a background task and keep working: the call " +
		"returns a task id at once; collect the result with task_output and stop it with task_kill (default false)."
	foregroundWording = " The call waits for the subagent's result."
	disabledMessage   = "run_in_background is disabled for this tool instance; call it without run_in_background"
	// uncachedWording is added for an instance whose children inherit the
	// conversation but not the prompt: a persona, a tool filter or another
	// model changes the request's prefix, so the provider's prompt cache
	// cannot serve the conversation again. Such an instance is allowed; it
	// says what it costs.
	uncachedWording = " This subagent's persona, tools or model differ from yours, so it re-reads the whole conversation " +
		"at full price: prefer it for tasks that need them."
)

func (t *instance) definition(inherits bool) tool.Definition {
	desc := freshWording
	if inherits {
		desc = inheritWording
		if o := t.cfg.AgentOptions; t.cfg.Persona != nil || t.cfg.ToolFilter != nil || (o != nil && (o.Provider != "" || o.Model != "")) {
			desc += uncachedWording
		}
	}
	props := map[string]*jsonschema.Schema{
		"description": {Type: "string", Description: "A short (3-7 word) label for the task."},
		"prompt":      {Type: "string", Description: "The task for the subagent."},
	}
	if *t.cfg.EnableRunInBackground {
		desc += backgroundWording
		props["run_in_background"] = &jsonschema.Schema{Type: "boolean", Description: "Run the subagent as a background task."}
	} else {
		desc += foregroundWording
	}
	return tool.Definition{Name: t.cfg.ToolName, Description: desc, ConcurrencySafe: true,
		Parameters: &jsonschema.Schema{Type: "object", Properties: props, Required: []string{"description", "prompt"}},
		Execute:    t.execute}
}

type args struct {
	Description     string `json:"description"`
	Prompt          string `json:"prompt"`
	RunInBackground *bool  `json:"run_in_background"`
}

func (t *instance) execute(ctx context.Context, call tool.Call) (tool.Result, error) {
	parent, ok := call.Caller.(*agent.Agent)
	if !ok || parent == nil {
		return tool.Result{}, errors.New("the subagent tool requires a calling agent")
	}
	var a args
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "invalid arguments: %v", err)
	}
	background := a.RunInBackground != nil && *a.RunInBackground
	if background && !*t.cfg.EnableRunInBackground {
		return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, disabledMessage)
	}
	req := subagent.StartRequest{Label: a.Description, Prompt: []content.Block{content.Text(a.Prompt)}, Parent: parent,
		AgentOptions: t.cfg.AgentOptions, Persona: t.cfg.Persona, ToolFilter: t.cfg.ToolFilter, MaxDepth: t.maxDepth}
	if background {
		return t.startBackground(ctx, parent, req)
	}
	req.Foreground = true
	run, err := t.deps.Subagents.Start(ctx, t.cfg.Provider, req)
	if err != nil {
		return tool.Result{}, err
	}
	res, werr := run.Wait(context.WithoutCancel(ctx))
	derr := run.Dispose(context.WithoutCancel(ctx))
	meta := usageMeta(res.Usage)
	switch {
	case werr != nil || derr != nil:
		r := tool.ErrorResult(tool.CodeFailed, errors.Join(werr, derr).Error())
		r.Meta = meta
		return r, nil
	case res.StopReason != subagent.Completed:
		r := tool.ErrorResult(string(res.StopReason), Failure(res))
		r.Meta = meta
		return r, nil
	}
	text := content.JoinText(res.Output)
	if strings.TrimSpace(text) == "" {
		text = "(the subagent returned no text)"
	}
	return tool.Result{Content: []content.Block{content.Text(text)}, Meta: meta}, nil
}

func usageMeta(u map[string]content.Usage) json.RawMessage {
	if len(u) == 0 {
		return nil
	}
	raw, _ := json.Marshal(subagent.UsageMeta{SubagentUsage: u})
	return raw
}

// Headline says in one line why a run did not complete.
func Headline(r subagent.StopReason) string {
	switch r {
	case subagent.Aborted:
		return "subagent run cancelled"
	case subagent.Failed:
		return "subagent run failed"
	case subagent.MaxTokens:
		return "subagent run hit the token limit"
	case subagent.Refusal:
		return "subagent declined the task"
	}
	return fmt.Sprintf("subagent run ended abnormally (%s)", r)
}

// Failure renders a run that did not complete: the headline, the
// diagnostic, and any partial output labelled as such.
func Failure(res subagent.Result) string {
	msg := Headline(res.StopReason)
	if res.Diagnostic != "" {
		msg += "\nDiagnostic: " + res.Diagnostic
	}
	if text := content.JoinText(res.Output); strings.TrimSpace(text) != "" {
		msg += "\nPartial output before the run ended:\n" + text
	}
	return msg
}

// startBackground registers a task owned by the parent and returns its id
// at once; the child runs under the task's cancellation, not the call's.
func (t *instance) startBackground(ctx context.Context, parent *agent.Agent, req subagent.StartRequest) (tool.Result, error) {
	if ctx.Err() != nil {
		return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call aborted")
	}
	adm, err := t.deps.Subagents.Admit(t.cfg.Provider, req) // a refusal is this call's error, not the task's
	if err != nil {
		return tool.Result{}, err
	}
	id, err := t.deps.Tasks.Start(task.Spec{Kind: TaskKind, Label: req.Label, Owner: parent,
		Run: func(tctx context.Context, done func(task.Outcome)) {
			go t.runBackground(telemetry.Continue(tctx, ctx), adm, done) // the call's trace, the task's lifetime
		}})
	if err != nil {
		adm.Release()
		return tool.Result{}, err
	}
	return tool.TextResult("started background subagent task " + id), nil
}

// runBackground starts the child of a background task. Once it is ready
// no goroutine waits for it: the run's settlement finishes the task.
func (t *instance) runBackground(ctx context.Context, adm *subagent.Admission, done func(task.Outcome)) {
	run, err := adm.Start(ctx)
	if err != nil {
		if ctx.Err() != nil {
			done(task.Outcome{Status: task.Killed, Detail: killReason(ctx)})
		} else {
			done(task.Outcome{Status: task.Failed, Detail: err.Error()})
		}
		return
	}
	finish := func() { done(t.finishBackground(ctx, run)) }
	if s, ok := run.(subagent.SettleNotifier); ok {
		// The callback runs on the child's goroutine, which Dispose waits
		// for: dispose from a goroutine of its own.
		s.AfterSettle(func() { go finish() })
		return
	}
	finish()
}

// finishBackground collects a settled background run, disposes it and says
// how the task ended.
func (t *instance) finishBackground(ctx context.Context, run subagent.Run) task.Outcome {
	res, werr := run.Wait(context.WithoutCancel(ctx))
	derr := run.Dispose(context.WithoutCancel(ctx))
	out := task.Outcome{Meta: usageMeta(res.Usage)}
	switch {
	case werr != nil || derr != nil:
		out.Status, out.Detail = task.Failed, errors.Join(werr, derr).Error()
	case res.StopReason == subagent.Completed:
		out.Status, out.Output = task.Completed, content.JoinText(res.Output)
	case res.StopReason == subagent.Aborted:
		out.Status, out.Detail = task.Killed, killReason(ctx)
	default:
		out.Status, out.Detail = task.Failed, string(res.StopReason)
		if res.Diagnostic != "" {
			out.Detail += "; diagnostic: " + res.Diagnostic
		}
		out.Output = content.JoinText(res.Output)
	}
	return out
}

func killReason(ctx context.Context) string {
	var ke *task.KillError
	if errors.As(context.Cause(ctx), &ke) {
		return ke.Reason
	}
	return ""
}
