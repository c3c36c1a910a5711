package prompt_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/dsh-go/dsh/prompt"
)

// must returns a checker of a registration: it fails the test on error and
// disposes the registration at cleanup.
func must(t *testing.T) func(dispose func(), err error) func() {
	return func(dispose func(), err error) func() {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(dispose)
		return dispose
	}
}

func value(v string) prompt.VariableFunc { return func() (string, bool) { return v, true } }

func noValue() (string, bool) { return "", false }

func render(t *testing.T, s *prompt.Scope) string {
	t.Helper()
	out, err := s.Render()
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return out
}

func names(secs []prompt.Section) []string {
	var out []string
	for _, s := range secs {
		out = append(out, s.Name)
	}
	return out
}

func TestSectionsOrderedByOrderThenName(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Section(prompt.Section{Name: "tools:bash", Order: 110, Text: "bash"}))
	must(t)(r.Section(prompt.Section{Name: prompt.PersonaSection, Order: prompt.PersonaOrder, Text: "persona"}))
	must(t)(r.Section(prompt.Section{Name: "tools:alpha", Order: 110, Text: "alpha"}))
	must(t)(r.Section(prompt.Section{Name: prompt.IdentitySection, Order: prompt.IdentityOrder, Text: "identity"}))
	must(t)(r.Section(prompt.Section{Name: "tools:read", Order: 100, Text: "read"}))
	s := r.NewScope()
	must(t)(s.Section(prompt.Section{Name: "agent:extra", Order: 105, Text: "extra"}))
	must(t)(s.Section(prompt.Section{Name: "agent:negative", Order: -5, Text: "neg"}))

	want := []string{prompt.IdentitySection, "agent:negative", prompt.PersonaSection, "tools:read", "agent:extra", "tools:alpha", "tools:bash"}
	if got := names(s.Sections()); !slices.Equal(got, want) {
		t.Errorf("Sections = %v, want %v", got, want)
	}
	if got, want := render(t, s), "identity\n\nneg\n\npersona\n\nread\n\nextra\n\nalpha\n\nbash"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

func TestSectionsExtremeOrders(t *testing.T) {
	r := prompt.NewRegistry()
	s := r.NewScope()
	must(t)(s.Section(prompt.Section{Name: "last", Order: math.MaxInt, Text: "last"}))
	must(t)(s.Section(prompt.Section{Name: "early", Order: -1, Text: "early"}))
	must(t)(s.Section(prompt.Section{Name: "first", Order: math.MinInt, Text: "first"}))
	if got, want := names(s.Sections()), []string{"first", "early", "last"}; !slices.Equal(got, want) {
		t.Errorf("Sections = %v, want %v", got, want)
	}
}

func TestEmptySectionsDropped(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Variable("blank", value("  \n ")))
	must(t)(r.Section(prompt.Section{Name: "a", Order: 1, Text: "A"}))
	must(t)(r.Section(prompt.Section{Name: "b", Order: 2, Text: ""}))
	must(t)(r.Section(prompt.Section{Name: "c", Order: 3, Text: " \n\t"}))
	must(t)(r.Section(prompt.Section{Name: "d", Order: 4, Text: "{{blank}}"}))
	must(t)(r.Section(prompt.Section{Name: "e", Order: 5, Text: "E\nline two"}))
	if got, want := render(t, r.NewScope()), "A\n\nE\nline two"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	if got := render(t, prompt.NewRegistry().NewScope()); got != "" {
		t.Errorf("Render of nothing = %q, want empty", got)
	}
}

func TestScopedPersonaShadowsGlobal(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Section(prompt.Section{Name: prompt.IdentitySection, Order: prompt.IdentityOrder, Text: "I am dsh."}))
	must(t)(r.Section(prompt.Section{Name: prompt.PersonaSection, Order: prompt.PersonaOrder, Text: "Be terse."}))
	must(t)(r.Section(prompt.Section{Name: "tools", Order: 100, Text: "Use tools."}))

	child := r.NewScope()
	disposePersona := must(t)(child.Section(prompt.Section{Name: prompt.PersonaSection, Order: prompt.PersonaOrder, Text: "You are a reviewer."}))
	sibling := r.NewScope()

	if got, want := render(t, child), "I am dsh.\n\nYou are a reviewer.\n\nUse tools."; got != want {
		t.Errorf("child Render = %q, want %q", got, want)
	}
	if got, want := render(t, sibling), "I am dsh.\n\nBe terse.\n\nUse tools."; got != want {
		t.Errorf("sibling Render = %q, want %q", got, want)
	}
	if n := len(child.Sections()); n != 3 {
		t.Errorf("child has %d sections, want 3 (shadowed one counted once)", n)
	}

	disposePersona()
	if got, want := render(t, child), "I am dsh.\n\nBe terse.\n\nUse tools."; got != want {
		t.Errorf("child Render after dispose = %q, want %q", got, want)
	}
}

func TestScopedEmptyPersonaHidesGlobal(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Section(prompt.Section{Name: prompt.PersonaSection, Text: "global persona"}))
	must(t)(r.Section(prompt.Section{Name: "other", Order: 1, Text: "other"}))
	s := r.NewScope()
	must(t)(s.Section(prompt.Section{Name: prompt.PersonaSection, Text: ""}))
	if got := render(t, s); got != "other" {
		t.Errorf("Render = %q, want other", got)
	}
}

func TestScopedSectionMayChangeOrder(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Section(prompt.Section{Name: "a", Order: 1, Text: "A"}))
	must(t)(r.Section(prompt.Section{Name: "b", Order: 2, Text: "B"}))
	s := r.NewScope()
	must(t)(s.Section(prompt.Section{Name: "a", Order: 3, Text: "A2"}))
	if got := render(t, s); got != "B\n\nA2" {
		t.Errorf("Render = %q, want B then A2", got)
	}
}

func TestInterpolate(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Variable("model", value("deepseek-flash")))
	must(t)(r.Variable("cwd", value("/work")))
	must(t)(r.Variable("tricky", value("{{model}} and {{nope}}")))
	must(t)(r.Variable("empty", value("")))
	must(t)(r.Variable("v_2", value("two")))
	s := r.NewScope()

	tests := []struct{ in, want string }{
		{"", ""},
		{"no templates", "no templates"},
		{"model {{model}} in {{cwd}}", "model deepseek-flash in /work"},
		{"{{model}}{{model}}", "deepseek-flashdeepseek-flash"},
		{"spaces {{ cwd }} ok", "spaces /work ok"},
		{"digits {{v_2}}", "digits two"},
		{"empty [{{empty}}]", "empty []"},
		{"lone {{ brace", "lone {{ brace"},
		{"ends with {{", "ends with {{"},
		{"{{cwd}} then lone {{", "/work then lone {{"},
		{"closing }} alone", "closing }} alone"},
		{"single {braces} {x}", "single {braces} {x}"},
		{"not rescanned: {{tricky}}", "not rescanned: {{model}} and {{nope}}"},
		{"multi-byte é {{cwd}} ü", "multi-byte é /work ü"},
	}
	for _, tt := range tests {
		got, err := s.Interpolate(tt.in)
		if err != nil {
			t.Errorf("Interpolate(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Interpolate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestInterpolateErrors(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Variable("model", value("m")))
	must(t)(r.Variable("unset", noValue))
	s := r.NewScope()

	tests := []struct {
		in       string
		mentions []string
	}{
		{"hello {{user}}", []string{"unknown variable", "user"}},
		{"ok {{model}} then {{missing}}", []string{"missing"}},
		{"value {{unset}}", []string{"unset", "no value"}},
		{"{{Foo Bar}}", []string{"malformed", "{{Foo Bar}}"}},
		{"{{Model}}", []string{"malformed"}},
		{"{{}}", []string{"malformed"}},
		{"{{1abc}}", []string{"malformed"}},
		{"{{a-b}}", []string{"malformed"}},
		{"{{ {{model}}", []string{"malformed"}},
	}
	for _, tt := range tests {
		got, err := s.Interpolate(tt.in)
		if err == nil {
			t.Errorf("Interpolate(%q) = %q, want an error", tt.in, got)
			continue
		}
		if got != "" {
			t.Errorf("Interpolate(%q) returned %q alongside the error", tt.in, got)
		}
		var pe *prompt.Error
		if !errors.As(err, &pe) {
			t.Errorf("Interpolate(%q) error %T is not *prompt.Error", tt.in, err)
		}
		for _, m := range tt.mentions {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("Interpolate(%q) error %q does not mention %q", tt.in, err, m)
			}
		}
	}
}

func TestRenderFailsOnBadTemplate(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Section(prompt.Section{Name: "good", Text: "fine"}))
	must(t)(r.Section(prompt.Section{Name: "bad", Order: 1, Text: "hi {{who}}"}))
	out, err := r.NewScope().Render()
	if err == nil {
		t.Fatalf("Render = %q, want an error", out)
	}
	if !strings.Contains(err.Error(), "bad") || !strings.Contains(err.Error(), "who") {
		t.Errorf("error %q should name the section and the variable", err)
	}
	var pe *prompt.Error
	if !errors.As(err, &pe) {
		t.Errorf("error %v does not wrap *prompt.Error", err)
	}
}

func TestVariableScoping(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Variable("model", value("global-model")))
	must(t)(r.Section(prompt.Section{Name: "s", Text: "model={{model}}"}))
	a, b := r.NewScope(), r.NewScope()
	dispose := must(t)(a.Variable("model", value("child-model")))
	must(t)(a.Variable("only_a", value("x")))

	if got := render(t, a); got != "model=child-model" {
		t.Errorf("scope a Render = %q", got)
	}
	if got := render(t, b); got != "model=global-model" {
		t.Errorf("scope b Render = %q", got)
	}
	if _, err := b.Interpolate("{{only_a}}"); err == nil {
		t.Error("scope b sees scope a's variable")
	}
	dispose()
	if got := render(t, a); got != "model=global-model" {
		t.Errorf("scope a Render after dispose = %q", got)
	}
}

func TestVariableEvaluatedAtRender(t *testing.T) {
	r := prompt.NewRegistry()
	v := "one"
	must(t)(r.Variable("v", func() (string, bool) { return v, true }))
	s := r.NewScope()
	if got, _ := s.Interpolate("{{v}}"); got != "one" {
		t.Errorf("first = %q", got)
	}
	v = "two"
	if got, _ := s.Interpolate("{{v}}"); got != "two" {
		t.Errorf("second = %q", got)
	}
}

func TestVariableNamesValidated(t *testing.T) {
	valid := []string{"a", "model", "cwd", "a1", "snake_case_2"}
	invalid := []string{"", "Model", "1a", "_a", "a-b", "a b", "a.b", "é", " a"}
	for _, n := range valid {
		r := prompt.NewRegistry()
		if _, err := r.Variable(n, value("x")); err != nil {
			t.Errorf("global Variable(%q) refused: %v", n, err)
		}
		if _, err := r.NewScope().Variable(n, value("x")); err != nil {
			t.Errorf("scoped Variable(%q) refused: %v", n, err)
		}
	}
	for _, n := range invalid {
		r := prompt.NewRegistry()
		if _, err := r.Variable(n, value("x")); err == nil {
			t.Errorf("global Variable(%q) accepted", n)
		}
		if _, err := r.NewScope().Variable(n, value("x")); err == nil {
			t.Errorf("scoped Variable(%q) accepted", n)
		}
	}
	if _, err := prompt.NewRegistry().Variable("ok", nil); err == nil {
		t.Error("Variable with nil provider accepted")
	}
}

func TestDuplicatesRefusedPerLayer(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Section(prompt.Section{Name: "s", Text: "first"}))
	if _, err := r.Section(prompt.Section{Name: "s", Text: "second"}); err == nil {
		t.Error("duplicate global section accepted")
	} else if !strings.Contains(err.Error(), `"s"`) {
		t.Errorf("error %q does not name the section", err)
	}
	must(t)(r.Variable("v", value("first")))
	if _, err := r.Variable("v", value("second")); err == nil {
		t.Error("duplicate global variable accepted")
	}

	s := r.NewScope()
	// Shadowing the global layer is fine...
	must(t)(s.Section(prompt.Section{Name: "s", Text: "scoped"}))
	must(t)(s.Variable("v", value("scoped")))
	// ...a duplicate in the same scope is not.
	if _, err := s.Section(prompt.Section{Name: "s", Text: "again"}); err == nil {
		t.Error("duplicate scoped section accepted")
	}
	if _, err := s.Variable("v", value("again")); err == nil {
		t.Error("duplicate scoped variable accepted")
	}

	if got := render(t, r.NewScope()); got != "first" {
		t.Errorf("global section replaced by a refused duplicate: %q", got)
	}
	if got, _ := r.NewScope().Interpolate("{{v}}"); got != "first" {
		t.Errorf("global variable replaced by a refused duplicate: %q", got)
	}
	if got := render(t, s); got != "scoped" {
		t.Errorf("scoped Render = %q", got)
	}
}

func TestSectionNeedsName(t *testing.T) {
	if _, err := prompt.NewRegistry().Section(prompt.Section{Text: "x"}); err == nil {
		t.Error("global section without name accepted")
	}
	if _, err := prompt.NewRegistry().NewScope().Section(prompt.Section{Text: "x"}); err == nil {
		t.Error("scoped section without name accepted")
	}
}

func TestDisposers(t *testing.T) {
	r := prompt.NewRegistry()
	dSec, err := r.Section(prompt.Section{Name: "s", Text: "{{v}}"})
	if err != nil {
		t.Fatal(err)
	}
	dVar, err := r.Variable("v", value("val"))
	if err != nil {
		t.Fatal(err)
	}
	s := r.NewScope()
	if got := render(t, s); got != "val" {
		t.Fatalf("Render = %q", got)
	}
	dVar()
	if _, err := s.Render(); err == nil {
		t.Error("Render after disposing the variable succeeded")
	}
	dSec()
	if got := render(t, s); got != "" {
		t.Errorf("Render after disposing the section = %q", got)
	}

	// Re-registering after dispose works, and a repeated old disposer is a no-op.
	must(t)(r.Section(prompt.Section{Name: "s", Text: "new"}))
	must(t)(r.Variable("v", value("new")))
	dSec()
	dVar()
	if got := render(t, s); got != "new" {
		t.Errorf("stale disposer removed the new section: %q", got)
	}
	if got, _ := s.Interpolate("{{v}}"); got != "new" {
		t.Errorf("stale disposer removed the new variable: %q", got)
	}
}

func TestErrorMessage(t *testing.T) {
	err := &prompt.Error{Msg: "x"}
	if err.Error() != "prompt: x" {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestConcurrentRenderAndRegister(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Variable("v", value("x")))
	s := r.NewScope()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 100 {
				name := string(rune('a'+i)) + string(rune('a'+j%26))
				d, err := r.Section(prompt.Section{Name: name + "-g" + string(rune('0'+j/26)), Text: "{{v}}"})
				if err != nil {
					t.Error(err)
					return
				}
				d2, err := s.Section(prompt.Section{Name: name + "-s" + string(rune('0'+j/26)), Text: "y"})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Render(); err != nil {
					t.Error(err)
				}
				d()
				d2()
			}
		})
	}
	wg.Wait()
	if got := render(t, s); got != "" {
		t.Errorf("after churn Render = %q", got)
	}
}

// RenderLike returns Render's text: prev itself when it is equal (no copy
// built), a new string when it is not, however prev differs (a prefix, an
// extension, another separator, another variable's value), and Render's
// error.
func TestRenderLikeReturnsAnEqualPrevItself(t *testing.T) {
	r := prompt.NewRegistry()
	must(t)(r.Section(prompt.Section{Name: "a", Text: "first"}))
	must(t)(r.Section(prompt.Section{Name: "b", Order: 1, Text: "  "}))
	must(t)(r.Section(prompt.Section{Name: "c", Order: 2, Text: "model {{m}}"}))
	must(t)(r.Variable("m", value("x")))
	s := r.NewScope()
	want := render(t, s)
	prev := strings.Clone(want)
	got, err := s.RenderLike(prev)
	if err != nil || got != want || unsafe.StringData(got) != unsafe.StringData(prev) {
		t.Fatalf("RenderLike(an equal copy) = %q, %v: want that copy itself", got, err)
	}
	for _, other := range []string{"", "first", "first\n\n", want + "\n\n", want + "x", "first\nmodel x", "first\n\nmodel y", "model x\n\nfirst", "firs"} {
		got, err := s.RenderLike(other)
		if err != nil || got != want {
			t.Errorf("RenderLike(%q) = %q, %v; want %q", other, got, err, want)
		}
	}
	empty := prompt.NewRegistry().NewScope()
	if got, err := empty.RenderLike("stale"); err != nil || got != "" {
		t.Errorf("RenderLike of no sections = %q, %v; want empty", got, err)
	}
	must(t)(r.Section(prompt.Section{Name: "d", Order: 3, Text: "{{unknown}}"}))
	if _, err := s.RenderLike(prev); err == nil {
		t.Error("RenderLike of a bad template: no error")
	}
}
