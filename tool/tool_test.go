package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo returns a definition answering "<reply>".
func echo(name, reply string) tool.Definition {
	return tool.Definition{Name: name, Description: "says " + reply,
		Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.TextResult(reply), nil }}
}

func mustRegister(t *testing.T, register func(tool.Definition) (func(), error), def tool.Definition) func() {
	t.Helper()
	dispose, err := register(def)
	if err != nil {
		t.Fatalf("register %s: %v", def.Name, err)
	}
	t.Cleanup(dispose)
	return dispose
}

func exec(t *testing.T, s *tool.Scope, name, args string) (tool.Result, string) {
	t.Helper()
	return execCtx(t.Context(), s, name, args)
}

func execCtx(ctx context.Context, s *tool.Scope, name, args string) (tool.Result, string) {
	var raw json.RawMessage
	if args != "" {
		raw = json.RawMessage(args)
	}
	res := s.Execute(ctx, tool.Call{ID: "c1", Name: name, Arguments: raw})
	return res, content.JoinText(res.Content)
}

func wantError(t *testing.T, res tool.Result, code, textPrefix string) {
	t.Helper()
	text := content.JoinText(res.Content)
	if !res.IsError || res.Code != code {
		t.Errorf("result = {IsError:%v Code:%q Text:%q}, want error %s", res.IsError, res.Code, text, code)
	}
	if !strings.HasPrefix(text, textPrefix) {
		t.Errorf("result text = %q, want prefix %q", text, textPrefix)
	}
}

func specNames(s *tool.Scope) []string {
	var names []string
	for _, sp := range s.Specs() {
		names = append(names, sp.Name)
	}
	return names
}

func isCode(err error, code string) bool { return errors.Is(err, &tool.Error{Code: code}) }

func TestRegisterDuplicateGlobalRefused(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("read", "first"))
	_, err := r.Register(echo("read", "second"))
	if !isCode(err, tool.CodeDuplicate) {
		t.Fatalf("duplicate global register error = %v, want %s", err, tool.CodeDuplicate)
	}
	if !strings.Contains(err.Error(), "read") {
		t.Errorf("error %q does not name the tool", err)
	}
	_, text := exec(t, r.NewScope(), "read", "{}")
	if text != "first" {
		t.Errorf("after refused duplicate, tool answers %q, want first", text)
	}
	if got := r.Names(); !slices.Equal(got, []string{"read"}) {
		t.Errorf("Names = %v", got)
	}
}

func TestRegisterDuplicateInScopeRefused(t *testing.T) {
	r := tool.NewRegistry()
	s := r.NewScope()
	mustRegister(t, s.Register, echo("x", "first"))
	_, err := s.Register(echo("x", "second"))
	if !isCode(err, tool.CodeDuplicate) {
		t.Fatalf("duplicate scoped register error = %v, want %s", err, tool.CodeDuplicate)
	}
	if _, text := exec(t, s, "x", ""); text != "first" {
		t.Errorf("scoped tool answers %q, want first", text)
	}
	// The same name in another scope is fine.
	mustRegister(t, r.NewScope().Register, echo("x", "other"))
}

func TestRegisterInvalidDefinition(t *testing.T) {
	run := func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{}, nil }
	tests := []struct {
		name string
		def  tool.Definition
	}{
		{"no name", tool.Definition{Execute: run}},
		{"no execute", tool.Definition{Name: "x"}},
		{"string parameters", tool.Definition{Name: "x", Execute: run, Parameters: &jsonschema.Schema{Type: "string"}}},
		{"array parameters", tool.Definition{Name: "x", Execute: run, Parameters: &jsonschema.Schema{Type: "array"}}},
		{"untyped parameters", tool.Definition{Name: "x", Execute: run, Parameters: &jsonschema.Schema{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tool.NewRegistry()
			if _, err := r.Register(tt.def); !isCode(err, tool.CodeInvalidDefinition) {
				t.Errorf("global Register error = %v, want %s", err, tool.CodeInvalidDefinition)
			}
			if _, err := r.NewScope().Register(tt.def); !isCode(err, tool.CodeInvalidDefinition) {
				t.Errorf("scoped Register error = %v, want %s", err, tool.CodeInvalidDefinition)
			}
			if len(r.Names()) != 0 {
				t.Errorf("refused tool registered: %v", r.Names())
			}
		})
	}
}

func TestNilParametersMeansOpenObject(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("open", "ok"))
	s := r.NewScope()
	specs := s.Specs()
	if len(specs) != 1 {
		t.Fatalf("Specs = %v", specs)
	}
	var schema map[string]any
	if err := json.Unmarshal(specs[0].Parameters, &schema); err != nil {
		t.Fatalf("parameters are not JSON: %v", err)
	}
	if schema["type"] != "object" {
		t.Errorf("nil Parameters spec = %s, want an object schema", specs[0].Parameters)
	}
	if specs[0].Description != "says ok" {
		t.Errorf("Description = %q", specs[0].Description)
	}
	if res, _ := exec(t, s, "open", `{"anything":[1,2]}`); res.IsError {
		t.Errorf("open object refused arguments: %+v", res)
	}
	res, _ := exec(t, s, "open", `[1]`)
	wantError(t, res, tool.CodeInvalidArgs, "Error: invalid arguments")
}

func TestScopedToolShadowsGlobalForItsScopeOnly(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("x", "global"))
	a, b := r.NewScope(), r.NewScope()
	disposeA := mustRegister(t, a.Register, echo("x", "scoped"))

	if _, text := exec(t, a, "x", ""); text != "scoped" {
		t.Errorf("scope a runs %q, want scoped", text)
	}
	if _, text := exec(t, b, "x", ""); text != "global" {
		t.Errorf("scope b runs %q, want global", text)
	}
	if got := a.Specs(); len(got) != 1 || got[0].Description != "says scoped" {
		t.Errorf("scope a Specs = %+v, want only the scoped x", got)
	}
	if got := b.Specs(); len(got) != 1 || got[0].Description != "says global" {
		t.Errorf("scope b Specs = %+v, want only the global x", got)
	}

	disposeA()
	if _, text := exec(t, a, "x", ""); text != "global" {
		t.Errorf("after disposing the scoped tool, scope a runs %q, want global", text)
	}
}

func TestScopedToolNotVisibleGlobally(t *testing.T) {
	r := tool.NewRegistry()
	a := r.NewScope()
	mustRegister(t, a.Register, echo("mine", "m"))
	if len(r.Names()) != 0 {
		t.Errorf("scoped tool appears in global Names: %v", r.Names())
	}
	res, _ := exec(t, r.NewScope(), "mine", "")
	wantError(t, res, tool.CodeUnknownTool, `Error: unknown tool "mine"`)
}

func TestDisposeRemoves(t *testing.T) {
	r := tool.NewRegistry()
	dispose, err := r.Register(echo("x", "one"))
	if err != nil {
		t.Fatal(err)
	}
	s := r.NewScope()
	if !s.Has("x") {
		t.Fatal("registered tool not visible")
	}
	dispose()
	if s.Has("x") || len(r.Names()) != 0 {
		t.Error("disposed tool still visible")
	}
	res, _ := exec(t, s, "x", "")
	wantError(t, res, tool.CodeUnknownTool, "Error: unknown tool")

	// Re-register the name; the old disposer must not remove the new tool.
	mustRegister(t, r.Register, echo("x", "two"))
	dispose()
	if _, text := exec(t, s, "x", ""); text != "two" {
		t.Errorf("stale disposer removed the re-registered tool: got %q", text)
	}
}

// The global tools come first, sorted, then the scope's own: an agent's
// tool list starts with what every agent shares (prompt-cache reuse).
func TestSpecsGlobalsFirstThenScoped(t *testing.T) {
	r := tool.NewRegistry()
	for _, n := range []string{"zeta", "alpha", "mid"} {
		mustRegister(t, r.Register, echo(n, n))
	}
	s := r.NewScope()
	for _, n := range []string{"beta", "omega"} {
		mustRegister(t, s.Register, echo(n, n))
	}
	want := []string{"alpha", "mid", "zeta", "beta", "omega"}
	if got := specNames(s); !slices.Equal(got, want) {
		t.Errorf("Specs names = %v, want %v", got, want)
	}
	if got := r.Names(); !slices.Equal(got, []string{"alpha", "mid", "zeta"}) {
		t.Errorf("Names = %v", got)
	}
}

// Scopes without their own tools or restrictions share the registry's
// specs, which follow registrations and removals.
func TestSpecsOfPlainScopesFollowTheRegistry(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("b", "b"))
	s1, s2 := r.NewScope(), r.NewScope()
	if !slices.Equal(specNames(s1), []string{"b"}) || !slices.Equal(specNames(s2), []string{"b"}) {
		t.Fatalf("specs %v, %v", specNames(s1), specNames(s2))
	}
	dispose := mustRegister(t, r.Register, echo("a", "a"))
	if got := specNames(s1); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after a registration: %v", got)
	}
	dispose()
	if got := specNames(s2); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after a removal: %v", got)
	}
	if _, err := s2.Restrict(tool.Restriction{Deny: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	if got := specNames(s2); len(got) != 0 {
		t.Fatalf("restricted scope: %v", got)
	}
	if got := specNames(s1); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("another scope's restriction leaked: %v", got)
	}
}

func TestSpecsShadowedToolListedOnce(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("b", "global b"))
	s := r.NewScope()
	mustRegister(t, s.Register, echo("b", "scoped b"))
	mustRegister(t, s.Register, echo("c", "scoped c"))
	want := []string{"b", "c"}
	if got := specNames(s); !slices.Equal(got, want) {
		t.Errorf("Specs names = %v, want %v", got, want)
	}
}

func TestSpecsShadowedToolListedOnceAfterEarlierScopedName(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("m", "global m"))
	s := r.NewScope()
	mustRegister(t, s.Register, echo("a", "scoped a"))
	mustRegister(t, s.Register, echo("m", "scoped m"))
	want := []string{"m", "a"} // the shadowing m keeps the global's place
	if got := specNames(s); !slices.Equal(got, want) {
		t.Errorf("Specs names = %v, want %v", got, want)
	}
}

func TestRestrict(t *testing.T) {
	globals := []string{"bash", "edit", "grep", "read"}
	tests := []struct {
		name         string
		restrictions []tool.Restriction
		want         []string
	}{
		{"allow", []tool.Restriction{{Allow: []string{"read", "grep"}}}, []string{"grep", "read"}},
		{"deny", []tool.Restriction{{Deny: []string{"bash"}}}, []string{"edit", "grep", "read"}},
		{"allow then deny", []tool.Restriction{{Allow: []string{"read", "grep", "bash"}, Deny: []string{"bash"}}},
			[]string{"grep", "read"}},
		{"masks intersect", []tool.Restriction{
			{Allow: []string{"read", "grep", "edit"}},
			{Allow: []string{"grep", "edit", "bash"}},
			{Deny: []string{"edit"}},
		}, []string{"grep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tool.NewRegistry()
			for _, n := range globals {
				mustRegister(t, r.Register, echo(n, n))
			}
			s := r.NewScope()
			for _, rs := range tt.restrictions {
				d, err := s.Restrict(rs)
				if err != nil {
					t.Fatalf("Restrict(%+v): %v", rs, err)
				}
				t.Cleanup(d)
			}
			if got := specNames(s); !slices.Equal(got, tt.want) {
				t.Errorf("visible = %v, want %v", got, tt.want)
			}
			for _, n := range globals {
				visible := slices.Contains(tt.want, n)
				if s.Has(n) != visible {
					t.Errorf("Has(%s) = %v, want %v", n, s.Has(n), visible)
				}
				res, text := exec(t, s, n, "")
				if visible && (res.IsError || text != n) {
					t.Errorf("visible %s: result %+v", n, res)
				}
				if !visible {
					wantError(t, res, tool.CodeUnknownTool, fmt.Sprintf("Error: unknown tool %q", n))
				}
			}
			// Unrestricted scopes see everything.
			if got := specNames(r.NewScope()); !slices.Equal(got, globals) {
				t.Errorf("other scope sees %v, want %v", got, globals)
			}
		})
	}
}

func TestRestrictLaterGlobals(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("read", "r"))
	mustRegister(t, r.Register, echo("bash", "b"))

	denied := r.NewScope()
	if _, err := denied.Restrict(tool.Restriction{Deny: []string{"bash"}}); err != nil {
		t.Fatal(err)
	}
	allowed := r.NewScope()
	if _, err := allowed.Restrict(tool.Restriction{Allow: []string{"read"}}); err != nil {
		t.Fatal(err)
	}

	mustRegister(t, r.Register, echo("late", "l"))
	if !denied.Has("late") {
		t.Error("deny-only mask hides a global registered later")
	}
	if allowed.Has("late") {
		t.Error("allow mask admits a global registered later")
	}
	res, _ := exec(t, allowed, "late", "")
	wantError(t, res, tool.CodeUnknownTool, "Error: unknown tool")
}

func TestRestrictNeverMasksScopedTools(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("read", "global read"))
	mustRegister(t, r.Register, echo("bash", "global bash"))
	s := r.NewScope()
	mustRegister(t, s.Register, echo("bash", "scoped bash"))
	mustRegister(t, s.Register, echo("own", "own"))
	if _, err := s.Restrict(tool.Restriction{Allow: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restrict(tool.Restriction{Deny: []string{"bash"}}); err != nil {
		t.Fatal(err)
	}
	if got, want := specNames(s), []string{"bash", "read", "own"}; !slices.Equal(got, want) {
		t.Errorf("visible = %v, want %v", got, want)
	}
	if _, text := exec(t, s, "bash", ""); text != "scoped bash" {
		t.Errorf("bash runs %q, want the scoped tool", text)
	}
	if _, text := exec(t, s, "own", ""); text != "own" {
		t.Errorf("own runs %q", text)
	}
}

func TestRestrictRefused(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("read", "r"))
	mustRegister(t, r.Register, echo("bash", "b"))
	s := r.NewScope()
	mustRegister(t, s.Register, echo("scoped", "s"))

	tests := []struct {
		name string
		r    tool.Restriction
		want []string // substrings of the message
	}{
		{"empty", tool.Restriction{}, nil},
		{"empty deny", tool.Restriction{Deny: []string{}}, nil},
		{"unknown allow", tool.Restriction{Allow: []string{"read", "nope"}}, []string{"nope", "bash", "read"}},
		{"unknown deny", tool.Restriction{Deny: []string{"ghost"}}, []string{"ghost", "bash", "read"}},
		{"scoped name is not a global", tool.Restriction{Deny: []string{"scoped"}}, []string{"scoped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := s.Restrict(tt.r)
			if err == nil {
				d()
				t.Fatalf("Restrict(%+v) accepted", tt.r)
			}
			if !errors.Is(err, &tool.Error{Code: tool.CodeInvalidRestriction}) {
				t.Errorf("error = %v, want code %s", err, tool.CodeInvalidRestriction)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Nothing was masked by the refused restrictions.
	if got, want := specNames(s), []string{"bash", "read", "scoped"}; !slices.Equal(got, want) {
		t.Errorf("visible after refused restrictions = %v, want %v", got, want)
	}
}

func TestRestrictDisposerRestoresVisibility(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("read", "r"))
	mustRegister(t, r.Register, echo("bash", "b"))
	s := r.NewScope()
	d1, err := s.Restrict(tool.Restriction{Deny: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := s.Restrict(tool.Restriction{Allow: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := specNames(s); len(got) != 0 {
		t.Fatalf("both masks: visible = %v, want none", got)
	}
	d1()
	if got, want := specNames(s), []string{"bash"}; !slices.Equal(got, want) {
		t.Errorf("after disposing deny: visible = %v, want %v", got, want)
	}
	d1() // idempotent
	if got, want := specNames(s), []string{"bash"}; !slices.Equal(got, want) {
		t.Errorf("after disposing deny twice: visible = %v, want %v", got, want)
	}
	d2()
	if got, want := specNames(s), []string{"bash", "read"}; !slices.Equal(got, want) {
		t.Errorf("after disposing both: visible = %v, want %v", got, want)
	}
	if _, text := exec(t, s, "bash", ""); text != "b" {
		t.Errorf("restored bash runs %q", text)
	}
}

// strictArgs is a tool with a required string and an optional integer.
func strictArgs(ran *atomic.Int32) tool.Definition {
	return tool.Definition{
		Name: "strict",
		Parameters: &jsonschema.Schema{
			Type:     "object",
			Required: []string{"path"},
			Properties: map[string]*jsonschema.Schema{
				"path":  {Type: "string"},
				"limit": {Type: "integer"},
			},
		},
		Execute: func(_ context.Context, call tool.Call) (tool.Result, error) {
			ran.Add(1)
			return tool.TextResult(string(call.Arguments)), nil
		},
	}
}

func TestExecuteArgumentValidation(t *testing.T) {
	var ran atomic.Int32
	r := tool.NewRegistry()
	mustRegister(t, r.Register, strictArgs(&ran))
	s := r.NewScope()

	tests := []struct {
		name, args string
	}{
		{"not JSON", `{"path":`},
		{"not an object", `"read"`},
		{"missing required", `{"limit":3}`},
		{"wrong type", `{"path":42}`},
		{"wrong nested type", `{"path":"a","limit":"ten"}`},
		{"empty means {} which lacks path", ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, text := exec(t, s, "strict", tt.args)
			wantError(t, res, tool.CodeInvalidArgs, "Error: invalid arguments")
			if !strings.HasPrefix(text, "Error: ") {
				t.Errorf("text %q lacks Error: prefix", text)
			}
		})
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("tool body ran %d times on invalid arguments", n)
	}

	res, text := exec(t, s, "strict", `{"path":"a","limit":3,"extra":true}`)
	if res.IsError || text != `{"path":"a","limit":3,"extra":true}` {
		t.Errorf("valid call: result %+v text %q", res, text)
	}
}

func TestExecuteEmptyArgumentsAreEmptyObject(t *testing.T) {
	r := tool.NewRegistry()
	var got json.RawMessage
	var args map[string]any
	mustRegister(t, r.Register, tool.Definition{Name: "noargs",
		Execute: func(_ context.Context, call tool.Call) (tool.Result, error) {
			got, args = call.Arguments, call.Args
			return tool.TextResult("ok"), nil
		}})
	res, _ := exec(t, r.NewScope(), "noargs", "")
	if res.IsError {
		t.Fatalf("empty arguments refused: %+v", res)
	}
	if string(got) != "{}" {
		t.Errorf("tool saw arguments %q, want {}", got)
	}
	if args == nil || len(args) != 0 {
		t.Errorf("tool saw Args %#v, want an empty map", args)
	}
}

func TestExecutePassesCall(t *testing.T) {
	r := tool.NewRegistry()
	var got tool.Call
	mustRegister(t, r.Register, tool.Definition{Name: "see",
		Execute: func(_ context.Context, call tool.Call) (tool.Result, error) {
			got = call
			return tool.TextResult("ok"), nil
		}})
	caller := &struct{ name string }{"agent"}
	call := tool.Call{ID: "id-9", Name: "see", Arguments: json.RawMessage(`{"a":1}`), Cwd: "/tmp/w", Caller: caller}
	r.NewScope().Execute(t.Context(), call)
	if got.ID != "id-9" || got.Name != "see" || string(got.Arguments) != `{"a":1}` || got.Cwd != "/tmp/w" || got.Caller != caller {
		t.Errorf("tool saw call %+v, want %+v", got, call)
	}
	// The arguments arrive decoded too, as the scope validated them.
	if !reflect.DeepEqual(got.Args, map[string]any{"a": 1.0}) {
		t.Errorf("tool saw Args %#v, want the decoded arguments", got.Args)
	}
}

func TestExecuteUnknownTool(t *testing.T) {
	res, _ := exec(t, tool.NewRegistry().NewScope(), "nope", "{}")
	wantError(t, res, tool.CodeUnknownTool, `Error: unknown tool "nope"`)
}

func TestExecuteCancelledBeforeDispatch(t *testing.T) {
	var ran atomic.Int32
	r := tool.NewRegistry()
	mustRegister(t, r.Register, strictArgs(&ran))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, text := execCtx(ctx, r.NewScope(), "strict", `{"path":"a"}`)
	wantError(t, res, tool.CodeAbortedBeforeDispatch, "Error: tool call aborted before dispatch")
	if text != "Error: tool call aborted before dispatch" {
		t.Errorf("text = %q", text)
	}
	if ran.Load() != 0 {
		t.Error("tool body ran on a cancelled context")
	}
}

func TestExecuteErrors(t *testing.T) {
	tests := []struct {
		name     string
		fn       func(context.Context, tool.Call) (tool.Result, error)
		code     string
		text     string
		textPart string
	}{
		{
			name: "tool error keeps its code",
			fn: func(context.Context, tool.Call) (tool.Result, error) {
				return tool.Result{}, tool.Errorf("NOT_FOUND", "file %s not found", "a.txt")
			},
			code: "NOT_FOUND", text: "Error: file a.txt not found",
		},
		{
			name: "wrapped tool error keeps its code",
			fn: func(context.Context, tool.Call) (tool.Result, error) {
				return tool.Result{}, fmt.Errorf("reading: %w", &tool.Error{Code: "EACCES", Msg: "denied"})
			},
			code: "EACCES", text: "Error: reading: denied",
		},
		{
			name: "plain error becomes TOOL_FAILED",
			fn: func(context.Context, tool.Call) (tool.Result, error) {
				return tool.TextResult("ignored"), errors.New("disk on fire")
			},
			code: tool.CodeFailed, text: "Error: disk on fire",
		},
		{
			name: "panic becomes an error result",
			fn: func(context.Context, tool.Call) (tool.Result, error) {
				panic("kaboom")
			},
			code: tool.CodeFailed, textPart: "kaboom",
		},
		{
			name: "runtime panic becomes an error result",
			fn: func(context.Context, tool.Call) (tool.Result, error) {
				var p *tool.Call
				_ = p.ID
				return tool.Result{}, nil
			},
			code: tool.CodeFailed, textPart: "panicked",
		},
		{
			name: "error result returned as value is kept",
			fn: func(context.Context, tool.Call) (tool.Result, error) {
				return tool.ErrorResult("CUSTOM", "bad input"), nil
			},
			code: "CUSTOM", text: "Error: bad input",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tool.NewRegistry()
			mustRegister(t, r.Register, tool.Definition{Name: "t", Execute: tt.fn})
			res, text := exec(t, r.NewScope(), "t", "{}")
			wantError(t, res, tt.code, "Error: ")
			if tt.text != "" && text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
			if tt.textPart != "" && !strings.Contains(text, tt.textPart) {
				t.Errorf("text = %q, want it to contain %q", text, tt.textPart)
			}
		})
	}
}

// A call that completed as its ctx ended reports ABORTED but keeps what
// it spent (a child's tokens) and its meta.
func TestExecuteCancelledKeepsUsage(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := tool.NewRegistry()
	mustRegister(t, r.Register, tool.Definition{Name: "spend",
		Execute: func(context.Context, tool.Call) (tool.Result, error) {
			cancel()
			res := tool.TextResult("done")
			res.Usage, res.Meta = map[string]content.Usage{"p/m": {Input: 4}}, json.RawMessage(`{"k":1}`)
			return res, nil
		}})
	res, _ := execCtx(ctx, r.NewScope(), "spend", "{}")
	wantError(t, res, tool.CodeAborted, "Error: tool call aborted")
	if res.Usage["p/m"].Input != 4 || string(res.Meta) != `{"k":1}` {
		t.Fatalf("aborted result usage %+v, meta %s: want the call's", res.Usage, res.Meta)
	}
}

func TestExecuteCancelledDuringBody(t *testing.T) {
	tests := []struct {
		name   string
		result func() (tool.Result, error)
		code   string
		text   string
	}{
		{"success becomes ABORTED", func() (tool.Result, error) { return tool.TextResult("done"), nil },
			tool.CodeAborted, "Error: tool call aborted"},
		{"error result wins", func() (tool.Result, error) { return tool.ErrorResult("SPECIFIC", "x"), nil },
			"SPECIFIC", "Error: x"},
		{"returned error wins", func() (tool.Result, error) { return tool.Result{}, tool.Errorf("SPECIFIC", "y") },
			"SPECIFIC", "Error: y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := tool.NewRegistry()
			mustRegister(t, r.Register, tool.Definition{Name: "slow",
				Execute: func(context.Context, tool.Call) (tool.Result, error) {
					cancel()
					return tt.result()
				}})
			res, text := execCtx(ctx, r.NewScope(), "slow", "{}")
			wantError(t, res, tt.code, tt.text)
			if text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
		})
	}
}

func TestExecuteToolHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := tool.NewRegistry()
	started := make(chan struct{})
	mustRegister(t, r.Register, tool.Definition{Name: "wait",
		Execute: func(ctx context.Context, _ tool.Call) (tool.Result, error) {
			close(started)
			<-ctx.Done()
			return tool.TextResult("stopped"), nil
		}})
	done := make(chan tool.Result)
	go func() {
		res, _ := execCtx(ctx, r.NewScope(), "wait", "{}")
		done <- res
	}()
	<-started
	cancel()
	wantError(t, <-done, tool.CodeAborted, "Error: tool call aborted")
}

func TestResultHelpers(t *testing.T) {
	if diff := cmp.Diff(tool.Result{Content: []content.Block{content.Text("hi")}}, tool.TextResult("hi")); diff != "" {
		t.Errorf("TextResult (-want +got):\n%s", diff)
	}
	want := tool.Result{Content: []content.Block{content.Text("Error: nope")}, IsError: true, Code: "C"}
	if diff := cmp.Diff(want, tool.ErrorResult("C", "nope")); diff != "" {
		t.Errorf("ErrorResult (-want +got):\n%s", diff)
	}
}

func TestErrorIs(t *testing.T) {
	err := tool.Errorf(tool.CodeDuplicate, "dup %d", 1)
	if err.Error() != "dup 1" {
		t.Errorf("Error() = %q", err.Error())
	}
	if !errors.Is(err, &tool.Error{Code: tool.CodeDuplicate}) {
		t.Error("errors.Is with same code = false")
	}
	if errors.Is(err, &tool.Error{Code: tool.CodeUnknownTool}) {
		t.Error("errors.Is with another code = true")
	}
	if errors.Is(err, errors.New("dup 1")) {
		t.Error("errors.Is with a plain error = true")
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), &tool.Error{Code: tool.CodeDuplicate}) {
		t.Error("errors.Is through wrapping = false")
	}
}

func TestConcurrencySafe(t *testing.T) {
	r := tool.NewRegistry()
	safe := echo("safe", "s")
	safe.ConcurrencySafe = true
	mustRegister(t, r.Register, safe)
	mustRegister(t, r.Register, echo("unsafe", "u"))
	s := r.NewScope()
	scopedSafe := echo("unsafe", "scoped")
	scopedSafe.ConcurrencySafe = true
	other := r.NewScope()
	mustRegister(t, other.Register, scopedSafe)

	if !s.ConcurrencySafe("safe") {
		t.Error("safe tool reported unsafe")
	}
	if s.ConcurrencySafe("unsafe") {
		t.Error("unsafe tool reported safe")
	}
	if s.ConcurrencySafe("missing") {
		t.Error("unknown tool reported safe")
	}
	if !other.ConcurrencySafe("unsafe") {
		t.Error("scoped shadow's flag not used")
	}
	if _, err := s.Restrict(tool.Restriction{Deny: []string{"safe"}}); err != nil {
		t.Fatal(err)
	}
	if s.ConcurrencySafe("safe") {
		t.Error("hidden tool reported safe")
	}
}

type readArgs struct {
	Path   string   `json:"path" jsonschema:"file to read"`
	Limit  int      `json:"limit,omitempty"`
	Tags   []string `json:"tags,omitempty"`
	Nested *struct {
		Deep bool `json:"deep"`
	} `json:"nested,omitempty"`
}

func TestFunc(t *testing.T) {
	var got readArgs
	var gotCall tool.Call
	def := tool.Func("read", "reads a file", true, func(_ context.Context, call tool.Call, a readArgs) (tool.Result, error) {
		got, gotCall = a, call
		return tool.TextResult("read " + a.Path), nil
	})
	if def.Name != "read" || def.Description != "reads a file" || !def.ConcurrencySafe {
		t.Errorf("definition = %+v", def)
	}
	if def.Parameters == nil || def.Parameters.Type != "object" {
		t.Fatalf("inferred schema = %+v, want an object", def.Parameters)
	}
	if !slices.Contains(def.Parameters.Required, "path") || slices.Contains(def.Parameters.Required, "limit") {
		t.Errorf("Required = %v, want path only", def.Parameters.Required)
	}
	if def.Parameters.AdditionalProperties != nil {
		t.Errorf("root additionalProperties = %+v, want open (nil)", def.Parameters.AdditionalProperties)
	}

	r := tool.NewRegistry()
	mustRegister(t, r.Register, def)
	s := r.NewScope()
	if !s.ConcurrencySafe("read") {
		t.Error("Func safe flag lost")
	}

	res, text := exec(t, s, "read", `{"path":"a.go","limit":5,"tags":["x"],"extra":"ignored"}`)
	if res.IsError || text != "read a.go" {
		t.Fatalf("call result %+v %q", res, text)
	}
	if got.Path != "a.go" || got.Limit != 5 || !slices.Equal(got.Tags, []string{"x"}) {
		t.Errorf("decoded args = %+v", got)
	}
	if gotCall.Name != "read" || gotCall.ID != "c1" {
		t.Errorf("call = %+v", gotCall)
	}

	for _, bad := range []string{`{}`, `{"path":1}`, `{"path":"a","limit":"x"}`, `{"path":"a","tags":"x"}`,
		`{"path":"a","nested":{"deep":true,"extra":1}}`} {
		res, _ := exec(t, s, "read", bad)
		wantError(t, res, tool.CodeInvalidArgs, "Error: invalid arguments")
	}

	var spec map[string]any
	if err := json.Unmarshal(s.Specs()[0].Parameters, &spec); err != nil {
		t.Fatal(err)
	}
	if _, ok := spec["additionalProperties"]; ok {
		t.Errorf("spec root has additionalProperties: %s", s.Specs()[0].Parameters)
	}
	props, _ := spec["properties"].(map[string]any)
	if _, ok := props["path"]; !ok {
		t.Errorf("spec lacks the path property: %s", s.Specs()[0].Parameters)
	}
}

func TestFuncDecodeFailureIsInvalidArgs(t *testing.T) {
	// Called directly, bypassing the registry's validation.
	def := tool.Func("n", "", false, func(context.Context, tool.Call, readArgs) (tool.Result, error) {
		t.Error("body ran on undecodable arguments")
		return tool.Result{}, nil
	})
	_, err := def.Execute(t.Context(), tool.Call{Arguments: json.RawMessage(`{"path":3}`)})
	if !errors.Is(err, &tool.Error{Code: tool.CodeInvalidArgs}) {
		t.Errorf("error = %v, want %s", err, tool.CodeInvalidArgs)
	}
}

func TestFuncUninferableSchemaPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Func with a channel argument type did not panic")
		}
	}()
	tool.Func("bad", "", false, func(context.Context, tool.Call, chan int) (tool.Result, error) {
		return tool.Result{}, nil
	})
}

func TestConcurrentUse(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("base", "b"))
	s := r.NewScope()
	done := make(chan struct{})
	for i := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range 50 {
				name := fmt.Sprintf("t%d_%d", i, j)
				d, err := r.Register(echo(name, name))
				if err != nil {
					t.Error(err)
					return
				}
				d2, err := s.Restrict(tool.Restriction{Deny: []string{"base"}})
				if err != nil {
					t.Error(err)
					return
				}
				s.Specs()
				s.Execute(context.Background(), tool.Call{Name: name})
				d2()
				d()
			}
		}()
	}
	for range 4 {
		<-done
	}
	if got := specNames(s); !slices.Equal(got, []string{"base"}) {
		t.Errorf("after churn visible = %v", got)
	}
}

func TestRestrictExplicitEmptyAllowHidesAllGlobals(t *testing.T) {
	// Documented: Allow, when non-nil, keeps only the named tools, so an
	// explicit empty allow list is a valid restriction that hides every
	// global tool while scoped tools stay.
	r := tool.NewRegistry()
	mustRegister(t, r.Register, echo("read", "r"))
	s := r.NewScope()
	mustRegister(t, s.Register, echo("own", "o"))
	d, err := s.Restrict(tool.Restriction{Allow: []string{}})
	if err != nil {
		t.Fatalf("Restrict(Allow: []) = %v", err)
	}
	defer d()
	if got := specNames(s); !slices.Equal(got, []string{"own"}) {
		t.Errorf("visible = %v, want [own]", got)
	}
}

// After sees every call that reached its tool, and may replace the result;
// refused, unknown and invalid calls never reach it.
func TestAfter(t *testing.T) {
	r := tool.NewRegistry()
	mustRegister(t, r.Register, tool.Definition{Name: "x", Parameters: &jsonschema.Schema{Type: "object",
		Properties: map[string]*jsonschema.Schema{"n": {Type: "integer"}}},
		Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.TextResult("out"), nil }})
	mustRegister(t, r.Register, tool.Definition{Name: "boom",
		Execute: func(context.Context, tool.Call) (tool.Result, error) { panic("boom") }})
	s := r.NewScope()
	s.Guard(func(_ context.Context, c tool.Call) error {
		if c.Name == "boom" && string(c.Arguments) == `{"refuse":true}` {
			return errors.New("no")
		}
		return nil
	})
	var seen []string
	dispose := s.After(func(_ context.Context, c tool.Call, res tool.Result) tool.Result {
		seen = append(seen, fmt.Sprintf("%s:%v:%s", c.Name, res.IsError, content.JoinText(res.Content)))
		res.Content = append(res.Content, content.Text("+after"))
		return res
	})
	if _, text := exec(t, s, "x", `{"n":1}`); text != "out+after" {
		t.Errorf("x answers %q", text)
	}
	exec(t, s, "boom", `{}`)
	exec(t, s, "boom", `{"refuse":true}`)
	exec(t, s, "x", `{"n":"one"}`)
	exec(t, s, "missing", `{}`)
	want := []string{"x:false:out", "boom:true:Error: tool boom panicked: boom"}
	if !slices.Equal(seen, want) {
		t.Errorf("After saw %q, want %q", seen, want)
	}
	dispose()
	if _, text := exec(t, s, "x", `{}`); text != "out" {
		t.Errorf("after dispose, x answers %q", text)
	}
}
