package subagent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/jsonschema-go/jsonschema"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a service with a recorded bus and a parent agent.
type fixture struct {
	t      *testing.T
	svc    *subagent.Service
	parent *agent.Agent
	mu     sync.Mutex
	events []event.Event
}

func newFixture(t *testing.T, depth int, opts agent.Options) *fixture {
	bus := event.New(nil)
	f := &fixture{t: t, svc: subagent.NewService(bus, nil), parent: subagenttest.NewParent(t, nil, depth, opts).Agent}
	bus.Subscribe(func(e event.Event) {
		f.mu.Lock()
		f.events = append(f.events, e)
		f.mu.Unlock()
	})
	return f
}

func (f *fixture) register(p subagent.Provider) func() {
	f.t.Helper()
	un, err := f.svc.Register(p)
	if err != nil {
		f.t.Fatal(err)
	}
	return un
}

func (f *fixture) eventTypes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		out = append(out, e.EventType())
	}
	return out
}

func (f *fixture) req(prompt string) subagent.StartRequest {
	return subagent.StartRequest{Prompt: subagenttest.Prompt(prompt), Parent: f.parent}
}

func done(text string) subagenttest.Script {
	return subagenttest.Script{Result: subagent.Result{Output: []content.Block{content.Text(text)}}}
}

func allCaps() subagent.Capabilities {
	return subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true, Policy: true}
}

func mustHooks(t *testing.T) *hook.Set {
	s, err := hook.New(hook.Config{hook.Stop: {{Hooks: []hook.Command{{Command: "true"}}}}}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// A1, A2, A3, A4: registry order, duplicate refusal, added/removed events.
func TestRegistry(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	first := &subagenttest.Provider{ProviderName: "a"}
	unA := f.register(first)
	f.register(&subagenttest.Provider{ProviderName: "b"})
	if got := f.svc.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("names = %v", got)
	}
	_, err := f.svc.Register(&subagenttest.Provider{ProviderName: "a"})
	if !errors.Is(err, subagent.ErrDuplicateProvider) {
		t.Fatalf("duplicate: %v", err)
	}
	if p, _ := f.svc.Provider("a"); p != first {
		t.Fatal("duplicate registration replaced the first")
	}
	unA()
	unA()
	if _, ok := f.svc.Provider("a"); ok || !slices.Equal(f.svc.Names(), []string{"b"}) {
		t.Fatal("unregister did not remove the provider")
	}
	want := []string{"subagent/provider-added", "subagent/provider-added", "subagent/provider-removed"}
	if got := f.eventTypes(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if _, err := f.svc.Register(&subagenttest.Provider{}); !errors.Is(err, subagent.ErrInvalidRequest) {
		t.Fatalf("nameless provider: %v", err)
	}
}

// B1, B2, B3, B4, G4 and the bad-input cases: every refusal happens before
// the provider is called and emits no run event.
func TestStartValidation(t *testing.T) {
	schema := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"x": {Type: "string"}}}
	cases := []struct {
		name     string
		provider string
		caps     subagent.Capabilities
		mutate   func(r *subagent.StartRequest)
		want     error
		check    func(t *testing.T, err error)
	}{
		{name: "empty provider name", provider: "", caps: allCaps(), want: subagent.ErrInvalidRequest},
		{name: "nil parent", provider: "p", caps: allCaps(), mutate: func(r *subagent.StartRequest) { r.Parent = nil }, want: subagent.ErrInvalidRequest},
		{name: "empty prompt", provider: "p", caps: allCaps(), mutate: func(r *subagent.StartRequest) { r.Prompt = subagenttest.Prompt("  ") }, want: subagent.ErrInvalidRequest},
		{name: "B1 unknown provider", provider: "nope", caps: allCaps(), want: subagent.ErrNoProvider,
			check: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "p") {
					t.Errorf("message %q should name the provider and list the registered ones", err)
				}
			}},
		{name: "B1 outputSchema checked first", provider: "p", mutate: func(r *subagent.StartRequest) {
			r.OutputSchema, r.MaxDepth, r.Persona = schema, ptr(3), ptr("x")
		}, want: subagent.ErrUnsupportedCapability, check: capability(subagent.CapOutputSchema)},
		{name: "B1 depthLimit before toolFilter", provider: "p", caps: subagent.Capabilities{OutputSchema: true},
			mutate: func(r *subagent.StartRequest) {
				r.MaxDepth, r.ToolFilter = ptr(3), &tool.Restriction{Deny: []string{"x"}}
			},
			want: subagent.ErrUnsupportedCapability, check: capability(subagent.CapDepthLimit)},
		{name: "B3 empty persona still needs the capability", provider: "p", caps: subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true},
			mutate: func(r *subagent.StartRequest) { r.Persona = ptr("") }, want: subagent.ErrUnsupportedCapability, check: capability(subagent.CapPersona)},
		{name: "B3 empty allow list still needs toolFilter", provider: "p",
			mutate: func(r *subagent.StartRequest) { r.ToolFilter = &tool.Restriction{Allow: []string{}} },
			want:   subagent.ErrUnsupportedCapability, check: capability(subagent.CapToolFilter)},
		{name: "policy needs the capability", provider: "p", caps: subagent.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true, Persona: true},
			mutate: func(r *subagent.StartRequest) { r.Policy = &permission.Policy{} }, want: subagent.ErrUnsupportedCapability, check: capability(subagent.CapPolicy)},
		{name: "hooks need the policy capability", provider: "p",
			mutate: func(r *subagent.StartRequest) { r.Hooks = mustHooks(t) }, want: subagent.ErrUnsupportedCapability, check: capability(subagent.CapPolicy)},
		{name: "relative cwd", provider: "p", caps: allCaps(), mutate: func(r *subagent.StartRequest) { r.Cwd = "work/tree" }, want: subagent.ErrInvalidRequest},
		{name: "B4 negative maxDepth", provider: "p", caps: allCaps(), mutate: func(r *subagent.StartRequest) { r.MaxDepth = ptr(-1) }, want: subagent.ErrInvalidRequest},
		{name: "B4 capability check precedes the domain check", provider: "p", mutate: func(r *subagent.StartRequest) { r.MaxDepth = ptr(-1) },
			want: subagent.ErrUnsupportedCapability, check: capability(subagent.CapDepthLimit)},
		{name: "G4 maxDepth 0 forbids delegation from a top-level agent", provider: "p", caps: allCaps(),
			mutate: func(r *subagent.StartRequest) { r.MaxDepth = ptr(0) }, want: subagent.ErrDepthExceeded,
			check: func(t *testing.T, err error) {
				var se *subagent.Error
				if !errors.As(err, &se) || se.Attempted != 1 || se.Max != 0 || !strings.Contains(err.Error(), "depth 1 exceeds maxDepth 0") {
					t.Errorf("depth error = %#v", err)
				}
			}},
		{name: "B5 non-object schema", provider: "p", caps: allCaps(),
			mutate: func(r *subagent.StartRequest) { r.OutputSchema = &jsonschema.Schema{Type: "string"} }, want: subagent.ErrUnsupportedSchema},
		{name: "B5 every violation listed", provider: "p", caps: allCaps(), mutate: func(r *subagent.StartRequest) {
			r.OutputSchema = &jsonschema.Schema{Type: "object", Pattern: "x", Required: []string{"missing"},
				Properties: map[string]*jsonschema.Schema{"n": {Type: "integer", Enum: []any{1.5}}, "r": {Ref: "#/x"}}}
		}, want: subagent.ErrUnsupportedSchema, check: func(t *testing.T, err error) {
			var se *subagent.Error
			errors.As(err, &se)
			if len(se.Violations) != 5 || !strings.HasPrefix(err.Error(), "subagent: unsupported JSON schema: ") {
				t.Errorf("violations = %q", se.Violations)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0, agent.Options{})
			p := &subagenttest.Provider{ProviderName: "p", Caps: tc.caps, Default: done("x")}
			f.register(p)
			req := f.req("task")
			if tc.mutate != nil {
				tc.mutate(&req)
			}
			run, err := f.svc.Start(context.Background(), tc.provider, req)
			if err == nil {
				run.Dispose(context.Background())
				t.Fatal("start succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			if p.Starts() != 0 {
				t.Fatalf("provider started %d times", p.Starts())
			}
			if got := f.eventTypes(); !slices.Equal(got, []string{"subagent/provider-added"}) {
				t.Fatalf("events = %v", got)
			}
		})
	}
}

func capability(name string) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		var se *subagent.Error
		if !errors.As(err, &se) || se.Capability != name || se.Provider != "p" || !strings.Contains(err.Error(), name) {
			t.Errorf("err = %v: want capability %s named", err, name)
		}
	}
}

func TestValidSchemaAccepted(t *testing.T) {
	s := &jsonschema.Schema{Type: "object", Description: "d", AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
		Required: []string{"a"}, Properties: map[string]*jsonschema.Schema{
			"a": {Type: "string", Enum: []any{"x", "y"}},
			"b": {Type: "array", Items: &jsonschema.Schema{Type: "integer", Const: ptr[any](3.0)}},
			"c": {OneOf: []*jsonschema.Schema{{Type: "string"}, {Type: "null"}}},
		}}
	if err := subagent.CheckSchema(s); err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
}

// G1, G3: the child's depth is the parent's effective depth plus one, and
// runtime depth never lowers the durable one.
func TestDepth(t *testing.T) {
	for _, tc := range []struct {
		name          string
		header, rtime int
		max           int
		ok            bool
		want          int
	}{
		{"durable depth counts", 2, 0, 3, true, 3},
		{"runtime deepens", 0, 2, 3, true, 3},
		{"runtime never lowers durable", 3, 1, 3, false, 4},
		{"top level within cap", 0, 0, 1, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.header, agent.Options{SubagentDepth: tc.rtime})
			p := &subagenttest.Provider{ProviderName: "p", Caps: allCaps(), Default: done("x")}
			f.register(p)
			req := f.req("task")
			req.MaxDepth = &tc.max
			run, err := f.svc.Start(context.Background(), "p", req)
			if !tc.ok {
				var se *subagent.Error
				if !errors.As(err, &se) || se.Code != subagent.CodeDepthExceeded || se.Attempted != tc.want {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer run.Dispose(context.Background())
			if got := p.Requests()[0].Depth; got != tc.want {
				t.Fatalf("child depth = %d, want %d", got, tc.want)
			}
		})
	}
}

// D1, D3, D4, D5, D6: start only after readiness, unique run ids, end after
// start even when the result settled before Start returned, the output
// carried only when non-empty. In a bubble, so that the check before
// readiness runs once the gated start is parked.
func TestLifecycleEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 0, agent.Options{})
		gate := make(chan struct{})
		f.register(&subagenttest.Provider{ProviderName: "p", Default: done("answer"),
			ByPrompt: map[string]subagenttest.Script{
				"gated": {Gate: gate, Result: subagent.Result{Output: []content.Block{content.Text("g")}}},
				"empty": {Result: subagent.Result{StopReason: subagent.Failed}},
			}})
		started := make(chan subagent.Run, 1)
		go func() {
			run, err := f.svc.Start(context.Background(), "p", f.req("gated"))
			if err != nil {
				t.Error(err)
			}
			started <- run
		}()
		synctest.Wait() // the start is parked on the gate: a wrong implementation has announced by now
		if got := f.eventTypes(); slices.Contains(got, "subagent/start") {
			t.Error("subagent/start emitted before readiness")
		}
		close(gate)
		runs := []subagent.Run{<-started}
		for _, prompt := range []string{"now", "empty"} {
			run, err := f.svc.Start(context.Background(), "p", f.req(prompt))
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, run)
		}
		for _, r := range runs {
			if err := r.Dispose(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		starts := map[string]int{}
		ids := map[string]bool{}
		for i, e := range f.events {
			switch e := e.(type) {
			case subagent.Started:
				starts[e.RunID] = i
				if ids[e.RunID] || e.Local || e.Provider != "p" || e.ParentID != f.parent.ID() {
					t.Errorf("start %+v", e)
				}
				ids[e.RunID] = true
			case subagent.Ended:
				si, ok := starts[e.RunID]
				if !ok || si > i {
					t.Errorf("end %s before its start", e.RunID)
				}
				switch e.StopReason {
				case subagent.Completed:
					if len(e.LastAssistantMessage) != 1 {
						t.Errorf("end %+v lacks the output", e)
					}
				case subagent.Failed:
					if e.LastAssistantMessage != nil {
						t.Errorf("empty output reported as %+v", e.LastAssistantMessage)
					}
				}
			}
		}
		if len(ids) != 3 {
			t.Fatalf("%d distinct runs announced, want 3", len(ids))
		}
	})
}

// A6, D7: removing a provider blocks new starts but not accepted runs, whose
// end still names the provider.
func TestRemovalDoesNotRevokeRuns(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	un := f.register(&subagenttest.Provider{ProviderName: "p", Default: subagenttest.Script{Hang: true}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := f.svc.Start(ctx, "p", f.req("task"))
	if err != nil {
		t.Fatal(err)
	}
	un()
	if _, err := f.svc.Start(context.Background(), "p", f.req("task")); !errors.Is(err, subagent.ErrNoProvider) {
		t.Fatalf("start after removal: %v", err)
	}
	select {
	case <-run.Done():
		t.Fatal("removal settled an accepted run")
	default:
	}
	cancel()
	res, _ := run.Wait(context.Background())
	run.Dispose(context.Background())
	if res.StopReason != subagent.Aborted {
		t.Fatalf("stop = %q", res.StopReason)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last, ok := f.events[len(f.events)-1].(subagent.Ended)
	if !ok || last.Provider != "p" {
		t.Fatalf("last event %+v", f.events[len(f.events)-1])
	}
}

// D1: a start that fails before readiness emits neither event.
func TestFailedStartEmitsNothing(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	f.register(&subagenttest.Provider{ProviderName: "p", Default: subagenttest.Script{FailStart: errors.New("spawn failed")}})
	if _, err := f.svc.Start(context.Background(), "p", f.req("task")); err == nil {
		t.Fatal("start succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.svc.Start(ctx, "p", f.req("task")); !errors.Is(err, subagent.ErrAbortedBeforeReady) {
		t.Fatalf("cancelled start: %v", err)
	}
	if got := f.eventTypes(); !slices.Equal(got, []string{"subagent/provider-added"}) {
		t.Fatalf("events = %v", got)
	}
}

// D8: a panicking listener affects neither the run nor other listeners.
func TestPanickingListenerIsContained(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	bus := event.New(nil)
	svc := subagent.NewService(bus, nil)
	bus.Subscribe(func(event.Event) { panic("listener bug") })
	var ends int
	var mu sync.Mutex
	event.On(bus, func(subagent.Ended) { mu.Lock(); ends++; mu.Unlock() })
	svc.Register(&subagenttest.Provider{ProviderName: "p", Default: done("fine")})
	run, err := svc.Start(context.Background(), "p", f.req("task"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Wait(context.Background())
	run.Dispose(context.Background())
	if err != nil || res.StopReason != subagent.Completed || content.JoinText(res.Output) != "fine" {
		t.Fatalf("res = %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ends != 1 {
		t.Fatalf("ends = %d", ends)
	}
}

// Progress: child activity is observable per run id, after its start.
func TestProgressEvents(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	f.register(&subagenttest.Provider{ProviderName: "p", Default: done("working")})
	run, err := f.svc.Start(context.Background(), "p", f.req("task"))
	if err != nil {
		t.Fatal(err)
	}
	run.Dispose(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	var kinds []subagent.ProgressKind
	sawStart := false
	for _, e := range f.events {
		switch e := e.(type) {
		case subagent.Started:
			sawStart = true
		case subagent.ProgressEvent:
			if !sawStart || e.ChildID != run.ID() {
				t.Errorf("progress %+v before start or for another run", e)
			}
			kinds = append(kinds, e.Kind)
		}
	}
	want := []subagent.ProgressKind{subagent.ProgressTurnStart, subagent.ProgressText, subagent.ProgressTurnEnd}
	if !slices.Equal(kinds, want) {
		t.Fatalf("progress = %v, want %v", kinds, want)
	}
}

func TestDiagnosticIsBounded(t *testing.T) {
	long := strings.Repeat("é", subagent.MaxDiagnostic) // 2 bytes a rune
	d := subagent.Diagnostic(long)
	if len(d) > subagent.MaxDiagnostic || !strings.HasSuffix(d, "…[truncated]") || !strings.HasPrefix(d, "éé") {
		t.Fatalf("len %d, suffix %q", len(d), d[len(d)-20:])
	}
	for i, r := range strings.TrimSuffix(d, "…[truncated]") {
		if r != 'é' {
			t.Fatalf("rune %d cut: %q", i, r)
		}
	}
	if subagent.Diagnostic("short") != "short" {
		t.Fatal("short diagnostic changed")
	}
}

func TestStopReasonKnown(t *testing.T) {
	for _, r := range []subagent.StopReason{subagent.Completed, subagent.Aborted, subagent.Failed, subagent.MaxTokens, subagent.Refusal} {
		if !r.Known() {
			t.Errorf("%s unknown", r)
		}
	}
	if subagent.StopReason("exploded").Known() {
		t.Error("an unknown reason counted as known")
	}
}

// steerable wraps the scripted provider's runs with a SendMessage method.
type steerable struct{ *subagenttest.Provider }

type steerRun struct {
	subagent.Run
	got chan []content.Block
}

func (s steerRun) SendMessage(ctx context.Context, msg []content.Block) error {
	s.got <- msg
	return nil
}

func (p steerable) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	r, err := p.Provider.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return steerRun{Run: r, got: make(chan []content.Block, 1)}, nil
}

// Optional interfaces of a provider's run survive the service's wrapper.
func TestSteererVisibleThroughService(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	f.register(steerable{&subagenttest.Provider{ProviderName: "p", Default: done("x")}})
	run, err := f.svc.Start(context.Background(), "p", f.req("task"))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Dispose(context.Background())
	s, ok := run.(subagent.Steerer)
	if !ok {
		t.Fatal("run lost its Steerer")
	}
	if err := s.SendMessage(context.Background(), []content.Block{content.Text("more")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := run.(subagent.Resumer); ok {
		t.Fatal("run gained a Resumer")
	}
}
