// Package subagenttool is the model-facing subagent tool: one instance is
// bound by configuration to one provider of the subagent service, and lets
// the model delegate a task in the foreground (wait for the child's answer)
// or in the background (a task collected with the task_* tools).
package subagenttool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/agentdef"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/worktree"
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
	// SubagentTypes offers the agent definitions (Deps.Types) through a
	// subagent_type argument (default: true for the tool named "subagent").
	SubagentTypes *bool `yaml:"subagentTypes"`
	// Continuable makes the children continuable: the result names the
	// child, send_message continues it (see continuable.go). Default: on
	// when the provider can continue children and sessions outlive the
	// process; false keeps one-shot children.
	Continuable *bool `yaml:"continuable"`
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
	// OutputLimit caps in bytes the answer a foreground child returns into
	// the parent's conversation (default tool.DefaultOutputLimit, as for
	// bash and read_file); the whole answer stays in the child's session.
	OutputLimit int
	// Types are the agent definitions a subagent_type names (nil: none).
	Types *agentdef.Catalog
	// Worktrees gives children a git worktree of their own (nil: the
	// isolation argument is not offered).
	Worktrees *worktree.Manager
}

// ConfigError is a bad field of a Config.
type ConfigError struct {
	Tool  string // the tool's name, "subagent" when unset
	Field string // the field's YAML key, e.g. "maxDepth"
	Msg   string // what is wrong, e.g. "must be a non-negative integer, got -1"
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("subagent tool %s: %s %s", e.Tool, e.Field, e.Msg)
}

// ErrorCode returns subagent.CodeInvalidConfig.
func (e *ConfigError) ErrorCode() string { return string(subagent.CodeInvalidConfig) }

// Check checks cfg on its own, without its provider: the first bad field
// is a *ConfigError.
func (cfg Config) Check() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Tool: cmp.Or(cfg.ToolName, "subagent"), Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch f := cfg.ToolFilter; {
	case cfg.Provider == "":
		return bad("provider", "is required")
	case f != nil && f.Allow == nil && len(f.Deny) == 0:
		return bad("toolFilter", "needs allow or deny")
	case cfg.MaxDepth != nil && *cfg.MaxDepth < 0:
		return bad("maxDepth", "must be a non-negative integer, got %d", *cfg.MaxDepth)
	}
	return nil
}

// validate checks cfg (see Check) and fills in defaults.
func (cfg *Config) validate() error {
	if err := cfg.Check(); err != nil {
		return err
	}
	if cfg.ToolName == "" {
		cfg.ToolName = "subagent"
	}
	if cfg.EnableRunInBackground == nil {
		on := true
		cfg.EnableRunInBackground = &on
	}
	if cfg.SubagentTypes == nil {
		on := cfg.ToolName == "subagent"
		cfg.SubagentTypes = &on
	}
	return nil
}

// Mount registers the tool while its provider exists: now if it is
// registered, and whenever it is added later; it unregisters when the
// provider is removed. A configured capability the provider lacks is an
// error: returned by Mount when the provider is present, and by the
// provider's registration (subagent.Service.Register, which refuses it)
// when it arrives later. The disposer unmounts the tool for good.
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
	if deps.OutputLimit <= 0 {
		deps.OutputLimit = tool.DefaultOutputLimit
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
	// A provider that arrives later must suit the tool: Register refuses
	// one that does not, with the check's error naming what it lacks.
	stopRequire := deps.Subagents.Require(cfg.Provider, m.check)
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
			stopRequire()
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
			stopRequire()
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

// check checks that the tool can run on p: the capabilities its config
// and its subagent types need, and continuable children when the config
// asks for them. A missing capability is an UNSUPPORTED_CAPABILITY
// *subagent.Error naming it.
func (m *mount) check(p subagent.Provider) error {
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
			return &subagent.Error{Code: subagent.CodeUnsupportedCapability, Provider: p.Name(), Capability: n.name,
				Msg: fmt.Sprintf("tool %s: provider %q does not support the %s capability; remove it from the tool's config",
					m.cfg.ToolName, p.Name(), n.name)}
		}
	}
	if *m.cfg.SubagentTypes {
		for _, d := range m.deps.Types.List() {
			if d.Provider == "" || d.Provider == p.Name() {
				if err := d.Check(p.Name(), caps); err != nil {
					return fmt.Errorf("subagent tool %s: %w (give the definition a provider that can, or set subagentTypes: false on the tool)", m.cfg.ToolName, err)
				}
			}
		}
	}
	if c := m.cfg.Continuable; c != nil && *c {
		_, err := m.continuable(p)
		return err
	}
	return nil
}

// register checks the provider (see check) and registers the tool. m.mu
// must be held.
func (m *mount) register(p subagent.Provider) error {
	if err := m.check(p); err != nil {
		return err
	}
	t := &instance{deps: m.deps, cfg: m.cfg, caps: p.Capabilities()}
	if !*m.cfg.SubagentTypes {
		t.deps.Types = nil
	}
	continuable, err := m.continuable(p)
	if err != nil {
		return err
	}
	t.continuable = continuable
	un, err := m.deps.Tools.Register(t.definition(p.InheritsParentContext()))
	if err != nil {
		return err
	}
	m.unregister = un
	return nil
}

// depthCap is the depth cap of the tool's children on a provider with caps.
func (cfg Config) depthCap(caps subagent.Capabilities) *int {
	if !caps.DepthLimit {
		return nil
	}
	if cfg.MaxDepth != nil {
		return cfg.MaxDepth
	}
	d := DefaultMaxDepth
	return &d
}

// instance executes calls of one mounted tool.
type instance struct {
	deps        Deps
	cfg         Config
	caps        subagent.Capabilities // the provider's
	continuable bool                  // untyped, unisolated children are continuable
}

// request is the start request of an untyped call of the tool instance
// cfg, bound to a provider with caps, on behalf of parent: the task, and
// the instance's agent options, persona, tool filter and depth cap
// (DefaultMaxDepth when unset and the provider enforces depth).
func request(cfg Config, caps subagent.Capabilities, parent *agent.Agent, label, prompt string) subagent.StartRequest {
	return subagent.StartRequest{Label: label, Prompt: []content.Block{content.Text(prompt)}, Parent: parent,
		AgentOptions: cfg.AgentOptions, Persona: cfg.Persona, ToolFilter: cfg.ToolFilter, MaxDepth: cfg.depthCap(caps)}
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
	typesWording     = " Set subagent_type to use a specialised agent; the types are:"
	isolationWording = " Set isolation to \"worktree\" to run the subagent in a git worktree of its own, on a new branch " +
		"of this repository's last commit: its changes stay out of this working tree, and the result says where they are."
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
	if t.continuable {
		desc += continuableWording
	}
	switch {
	case *t.cfg.EnableRunInBackground && t.continuable:
		desc += continuableBackgroundWording
		props["run_in_background"] = &jsonschema.Schema{Type: "boolean", Description: "Start the subagent and keep working."}
	case *t.cfg.EnableRunInBackground:
		desc += backgroundWording
		props["run_in_background"] = &jsonschema.Schema{Type: "boolean", Description: "Run the subagent as a background task."}
	default:
		desc += foregroundWording
	}
	if t.deps.Worktrees != nil {
		desc += isolationWording
		props["isolation"] = &jsonschema.Schema{Type: "string", Description: `"worktree": a git worktree of its own.`}
	}
	if t.deps.Types != nil {
		desc += typesWording + t.deps.Types.Describe()
		props["subagent_type"] = &jsonschema.Schema{Type: "string", Description: "The type of agent to use (default: a plain subagent)."}
	}
	return tool.Definition{Name: t.cfg.ToolName, Description: desc, ConcurrencySafe: true,
		Parameters: &jsonschema.Schema{Type: "object", Properties: props, Required: []string{"description", "prompt"}},
		Execute:    t.execute}
}

// args are a call's arguments.
type args struct {
	Description     string
	Prompt          string
	RunInBackground *bool
	SubagentType    string
	Isolation       string
}

// argsOf reads a call's arguments from the values Scope.Execute decoded
// and validated against the tool's schema, which gives each its type.
func argsOf(call tool.Call) (args, error) {
	m := call.Args
	if m == nil {
		return args{}, tool.Errorf(tool.CodeInvalidArgs, "the subagent tool runs only through a tool scope")
	}
	a := args{}
	a.Description, _ = m["description"].(string)
	a.Prompt, _ = m["prompt"].(string)
	a.SubagentType, _ = m["subagent_type"].(string)
	a.Isolation, _ = m["isolation"].(string)
	if b, ok := m["run_in_background"].(bool); ok {
		a.RunInBackground = &b
	}
	return a, nil
}

func (t *instance) execute(ctx context.Context, call tool.Call) (tool.Result, error) {
	parent, ok := call.Caller.(*agent.Agent)
	if !ok || parent == nil {
		return tool.Result{}, errors.New("the subagent tool requires a calling agent")
	}
	a, err := argsOf(call)
	if err != nil {
		return tool.Result{}, err
	}
	d, err := t.delegation(parent, a)
	if err != nil {
		return tool.Result{}, err
	}
	if d.hooks.Has(hook.SubagentStart) { // an input costs the transcript's write: only for hooks that read it
		if err := d.hooks.Run(ctx, d.hookInput(hook.SubagentStart)); err != nil {
			return tool.Result{}, err
		}
	}
	if err := d.isolate(ctx, t.deps.Worktrees); err != nil {
		return tool.Result{}, err
	}
	continuable := t.continuableFor(d)
	if d.background && !continuable {
		return t.startBackground(ctx, d)
	}
	opts := subagent.DelegateOptions{Continuable: continuable, Background: d.background, Started: started(ctx)}
	if d.background { // a foreground call ends it below
		f := d.following()
		opts.Settled = func(res subagent.Result) { f.end(context.WithoutCancel(ctx), res) }
	}
	del, err := t.deps.Subagents.Delegate(ctx, d.provider, d.req, opts)
	if err != nil {
		d.release(ctx)
		return tool.Result{}, err
	}
	if d.background {
		return tool.TextResult(fmt.Sprintf("started subagent %s in the background; you will be told when it finishes. "+
			"send_message gives it more work, interrupt_agent stops its current turn.", del.ChildID)), nil
	}
	res, _ := del.Wait(ctx) // settled: a foreground Delegate returns once its child has
	note := d.end(ctx, res)
	if tr := traceOf(ctx); tr != nil && tr.Settled != nil {
		tr.Settled(res)
	}
	res.Output = t.capOutput(res.Output, wholeAnswer(del, d.provider))
	head := ""
	if del.Continuable {
		head = "[subagent " + del.ChildID + "; send_message continues it]\n"
	}
	r := tool.Result{Content: []content.Block{content.Text(head + outputText(res) + note)}}
	if res.StopReason != subagent.Completed {
		r = tool.ErrorResult(string(res.StopReason), head+Failure(res)+note)
	}
	r.Meta = runMeta(del.ChildID, d.provider)
	return r, nil
}

// capOutput caps a child's answer at Deps.OutputLimit; where says where
// the whole answer is.
func (t *instance) capOutput(output []content.Block, where string) []content.Block {
	if text := content.JoinText(output); len(text) > t.deps.OutputLimit {
		return []content.Block{content.Text(capAnswer(text, t.deps.OutputLimit, where))}
	}
	return output
}

// outputText is what a completed child returns to the model: its
// structured result as JSON when it has one, else its final text.
func outputText(res subagent.Result) string {
	if res.Structured != nil {
		if b, err := json.Marshal(res.Structured); err == nil {
			return string(b)
		}
	}
	text := content.JoinText(res.Output)
	if strings.TrimSpace(text) == "" {
		text = "(the subagent returned no text)"
	}
	return text
}

// capAnswer keeps the head and the tail of an answer over limit bytes, on
// rune boundaries, and says in between how much was cut and where the
// whole answer is.
func capAnswer(text string, limit int, where string) string {
	head, tail := limit/2, len(text)-(limit-limit/2)
	for head > 0 && !utf8.RuneStart(text[head]) {
		head--
	}
	for tail < len(text) && !utf8.RuneStart(text[tail]) {
		tail++
	}
	return fmt.Sprintf("%s\n[… %d of the answer's %d bytes cut here (the tool result limit is %d); %s …]\n%s",
		text[:head], tail-head, len(text), limit, where, text[tail:])
}

// wholeAnswer says where the whole answer of a delegation is: the child's
// session for a local child; a remote child's product keeps its own record.
func wholeAnswer(del *subagent.Delegation, provider string) string {
	if del.Local {
		return fmt.Sprintf("the whole answer is in the child's session %s: read it with `dsh sessions show %s`", del.ChildID, del.ChildID)
	}
	return fmt.Sprintf("provider %s ran the child out of process (run %s) and dsh keeps no copy of the whole answer; "+
		"ask for a shorter answer, or for the details in a file", provider, del.ChildID)
}

// runMeta is the result meta of a foreground run: which child (run or
// continuable child id) it was, on which provider.
func runMeta(child, provider string) json.RawMessage {
	raw, _ := json.Marshal(subagent.ChildMeta{SubagentChild: child, SubagentProvider: provider})
	return raw
}

// Failure renders a run that did not complete: the headline, the
// diagnostic, and any partial output labelled as such.
func Failure(res subagent.Result) string {
	msg := res.StopReason.Headline()
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
func (t *instance) startBackground(ctx context.Context, d *delegation) (tool.Result, error) {
	if ctx.Err() != nil {
		d.release(ctx)
		return tool.Result{}, tool.Errorf(tool.CodeAborted, "tool call aborted")
	}
	adm, err := t.deps.Subagents.Admit(d.provider, d.req) // a refusal is this call's error, not the task's
	if err != nil {
		d.release(ctx)
		return tool.Result{}, err
	}
	f := d.following() // the admission has the request
	id, err := t.deps.Tasks.Start(task.Spec{Kind: TaskKind, Label: d.req.Label, Owner: d.req.Parent,
		Run: func(tctx context.Context, done func(task.Outcome)) {
			go t.runBackground(telemetry.Continue(tctx, ctx), f, adm, done) // the call's trace, the task's lifetime
		}})
	if err != nil {
		adm.Release()
		d.release(ctx)
		return tool.Result{}, err
	}
	return tool.TextResult("started background subagent task " + id), nil
}

// runBackground starts the child of a background task. Once it is ready
// no goroutine waits for it: the run's settlement finishes the task.
func (t *instance) runBackground(ctx context.Context, d *follow, adm *subagent.Admission, done func(task.Outcome)) {
	_, err := adm.Delegate(ctx, subagent.DelegateOptions{Background: true,
		Settled: func(res subagent.Result) { done(t.finishBackground(ctx, d, res)) }})
	if err != nil {
		note := d.release(ctx)
		if ctx.Err() != nil {
			done(task.Outcome{Status: task.Killed, Detail: killReason(ctx) + note})
		} else {
			done(task.Outcome{Status: task.Failed, Detail: err.Error() + note})
		}
		return
	}
}

// finishBackground says how a background task whose child settled with
// res ended.
func (t *instance) finishBackground(ctx context.Context, d *follow, res subagent.Result) task.Outcome {
	note := d.end(ctx, res)
	var out task.Outcome
	switch {
	case res.StopReason == subagent.Completed:
		out.Status, out.Output = task.Completed, outputText(res)+note
	case res.StopReason == subagent.Aborted:
		out.Status, out.Detail = task.Killed, killReason(ctx)+note
	default:
		out.Status, out.Detail = task.Failed, string(res.StopReason)
		if res.Diagnostic != "" {
			out.Detail += "; diagnostic: " + res.Diagnostic
		}
		out.Detail += note
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
