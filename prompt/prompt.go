// Package prompt assembles system prompts from named, ordered sections with
// strict {{variable}} interpolation. A Registry holds the global sections and
// variables; each agent has a Scope whose own sections and variables shadow
// global ones of the same name. The package also owns the frame of a
// child's instructions in its first user message (FrameChildInstructions,
// SplitChildTask), so that whoever reads such a message (a session
// listing, a test model) needs no subagent provider to split it.
package prompt

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Well-known section names and orders.
const (
	IdentitySection = "harness:identity" // order -100
	PersonaSection  = "deployment:persona"
	IdentityOrder   = -100
	PersonaOrder    = 0
)

// Section is one named part of a system prompt. Sections are ordered by
// Order, then Name; empty sections are dropped.
type Section struct {
	Name  string
	Order int
	Text  string
}

// VariableFunc returns a variable's value, or ok=false when it has none.
type VariableFunc func() (value string, ok bool)

var variableName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]*$`) })

// Error is a prompt failure: a bad registration or a failed render.
type Error struct{ Msg string }

func (e *Error) Error() string { return "prompt: " + e.Msg }

// CodePrompt is the code of every prompt failure.
const CodePrompt = "PROMPT_INVALID"

// ErrorCode returns CodePrompt.
func (e *Error) ErrorCode() string { return CodePrompt }

func errorf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// layer is one table of sections and variables.
type layer struct {
	mu        sync.RWMutex
	sections  []Section // few per layer: a slice beats a map
	variables map[string]VariableFunc
}

func (l *layer) section(name string) int {
	return slices.IndexFunc(l.sections, func(s Section) bool { return s.Name == name })
}

func (l *layer) addSection(s Section, where string) (func(), error) {
	if s.Name == "" {
		return nil, errorf("section needs a name")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.section(s.Name) >= 0 {
		return nil, errorf("section %q is already registered in the %s layer", s.Name, where)
	}
	l.sections = append(l.sections, s)
	return l.remover(func() {
		if i := l.section(s.Name); i >= 0 {
			l.sections = slices.Delete(l.sections, i, i+1)
		}
	}), nil
}

func (l *layer) addVariable(name string, fn VariableFunc, where string) (func(), error) {
	if !variableName().MatchString(name) {
		return nil, errorf("variable name %q must match %s", name, variableName())
	}
	if fn == nil {
		return nil, errorf("variable %q has no provider", name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.variables[name]; dup {
		return nil, errorf("variable %q is already registered in the %s layer", name, where)
	}
	if l.variables == nil {
		l.variables = map[string]VariableFunc{}
	}
	l.variables[name] = fn
	return l.remover(func() { delete(l.variables, name) }), nil
}

func (l *layer) remover(del func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			del()
		})
	}
}

// Registry holds the global prompt sections and variables.
type Registry struct{ global layer }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Section registers a global section and returns its disposer.
func (r *Registry) Section(s Section) (dispose func(), err error) {
	return r.global.addSection(s, "global")
}

// Variable registers a global variable and returns its disposer.
func (r *Registry) Variable(name string, fn VariableFunc) (dispose func(), err error) {
	return r.global.addVariable(name, fn, "global")
}

// NewScope returns an empty per-agent scope over the registry.
func (r *Registry) NewScope() *Scope { return &Scope{reg: r} }

// Builtins resolves a scope's built-in variables (an agent's provider,
// model, cwd) without registering each: defined reports whether name is a
// built-in at all, ok whether it has a value.
type Builtins func(name string) (value string, defined, ok bool)

// NewScopeWith returns an empty per-agent scope with built-in variables,
// which shadow global variables and are shadowed by the scope's own.
func (r *Registry) NewScopeWith(builtins Builtins) *Scope { return &Scope{reg: r, builtins: builtins} }

// Scope is one agent's view of the prompt.
type Scope struct {
	reg      *Registry
	builtins Builtins
	local    layer
}

// Section registers a section for this scope only; it shadows a global
// section of the same name (e.g. a child's deployment:persona).
func (s *Scope) Section(sec Section) (dispose func(), err error) {
	return s.local.addSection(sec, "agent")
}

// Variable registers a variable for this scope only.
func (s *Scope) Variable(name string, fn VariableFunc) (dispose func(), err error) {
	return s.local.addVariable(name, fn, "agent")
}

func (s *Scope) variable(name string) VariableFunc {
	s.local.mu.RLock()
	fn := s.local.variables[name]
	s.local.mu.RUnlock()
	if fn != nil {
		return fn
	}
	if s.builtins != nil {
		if v, defined, ok := s.builtins(name); defined {
			return func() (string, bool) { return v, ok }
		}
	}
	s.reg.global.mu.RLock()
	defer s.reg.global.mu.RUnlock()
	return s.reg.global.variables[name]
}

// Sections returns the effective sections in order.
func (s *Scope) Sections() []Section {
	g := &s.reg.global
	g.mu.RLock()
	s.local.mu.RLock()
	out := make([]Section, 0, len(g.sections)+len(s.local.sections))
	for _, sec := range g.sections {
		if s.local.section(sec.Name) < 0 { // shadowed by the scope's own
			out = append(out, sec)
		}
	}
	out = append(out, s.local.sections...)
	s.local.mu.RUnlock()
	g.mu.RUnlock()
	slices.SortFunc(out, func(a, b Section) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Render interpolates every effective section and joins the non-empty ones
// with a blank line.
func (s *Scope) Render() (string, error) {
	parts := make([]string, 0, 8)
	n := 0
	for _, sec := range s.Sections() {
		text, err := s.Interpolate(sec.Text)
		if err != nil {
			return "", fmt.Errorf("section %s: %w", sec.Name, err)
		}
		if strings.TrimSpace(text) != "" {
			parts = append(parts, text)
			n += len(text) + 2
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for i, text := range parts {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		sb.WriteString(text)
	}
	return sb.String(), nil
}

// RenderLike returns what Render returns, and prev itself when that is
// equal to it: an agent's children, which render one system text, compare
// it with a sibling's copy instead of building one each for the garbage
// collector (the text is some hundreds of bytes, per model request).
func (s *Scope) RenderLike(prev string) (string, error) {
	rest, first := prev, true
	for _, sec := range s.Sections() {
		text, err := s.Interpolate(sec.Text)
		if err != nil {
			return "", fmt.Errorf("section %s: %w", sec.Name, err)
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		ok := true
		if !first {
			rest, ok = strings.CutPrefix(rest, "\n\n")
		}
		first = false
		if ok {
			rest, ok = strings.CutPrefix(rest, text)
		}
		if !ok {
			return s.Render()
		}
	}
	if rest != "" {
		return s.Render()
	}
	return prev, nil
}

// Interpolate replaces each {{name}} in text with the variable's value.
// Strict: a malformed group, an unknown variable or a variable without a
// value is an error, never an empty string. A lone "{{" with no later "}}"
// is literal, and substituted values are not rescanned.
func (s *Scope) Interpolate(text string) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	var sb strings.Builder
	for {
		open := strings.Index(text, "{{")
		if open < 0 {
			break
		}
		end := strings.Index(text[open+2:], "}}")
		if end < 0 {
			break
		}
		name := strings.TrimSpace(text[open+2 : open+2+end])
		if !variableName().MatchString(name) {
			return "", errorf("malformed template group %q", text[open:open+4+end])
		}
		fn := s.variable(name)
		if fn == nil {
			return "", errorf("unknown variable {{%s}}", name)
		}
		v, ok := fn()
		if !ok {
			return "", errorf("variable {{%s}} has no value", name)
		}
		sb.WriteString(text[:open])
		sb.WriteString(v)
		text = text[open+4+end:]
	}
	sb.WriteString(text)
	return sb.String(), nil
}
