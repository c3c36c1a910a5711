// Package tool defines the tools an agent can call, a registry of them with
// per-agent scopes and restrictions, and argument validation against each
// tool's JSON Schema.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/content"
)

// Definition is a tool.
type Definition struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; it must describe an
	// object. Nil means an object with any properties.
	Parameters *jsonschema.Schema
	// ConcurrencySafe marks a tool whose calls may run in parallel with
	// other concurrency-safe calls of the same step.
	ConcurrencySafe bool
	// Execute runs the tool. It must honour ctx and return only after its
	// work has stopped. A returned error becomes an error result the model
	// reads; an *Error's code is kept.
	Execute func(ctx context.Context, call Call) (Result, error)
}

// Call is one invocation of a tool.
type Call struct {
	ID        string
	Name      string
	Arguments json.RawMessage // validated against the tool's Parameters
	Cwd       string          // the calling session's working directory
	// Caller is the calling agent (an *agent.Agent) for tools that act on
	// its behalf; nil outside an agent.
	Caller any
	// Args is Arguments decoded, as Scope.Execute validated them (a JSON
	// object: maps, slices, strings, float64s, bools and nils). A tool
	// may read it instead of decoding Arguments again; it is nil for a
	// call that did not come through Scope.Execute.
	Args map[string]any
}

// Result is what a tool call produced.
type Result struct {
	Content       []content.Block
	IsError       bool
	Code          string // stable error code when IsError
	ConcludesTurn bool   // a successful result ends the turn after this step
	Meta          json.RawMessage
	// Usage is what the call spent on the caller's behalf (a child's
	// tokens), keyed "provider/model".
	Usage map[string]content.Usage
}

// DefaultOutputLimit is the default cap in bytes of the text of one tool
// result: bash output, read_file, task_output and a foreground subagent's
// answer.
const DefaultOutputLimit = 30000

// TextResult returns a successful result holding one text block.
func TextResult(s string) Result { return Result{Content: []content.Block{content.Text(s)}} }

// ErrorResult returns an error result "Error: msg" with code.
func ErrorResult(code, msg string) Result {
	return Result{Content: []content.Block{content.Text("Error: " + msg)}, IsError: true, Code: code}
}

// Error codes of tool execution.
const (
	CodeUnknownTool           = "UNKNOWN_TOOL"
	CodeInvalidArgs           = "INVALID_ARGS"
	CodeAbortedBeforeDispatch = "ABORTED_BEFORE_DISPATCH"
	CodeAborted               = "ABORTED"
	CodeFailed                = "TOOL_FAILED"
	CodeDuplicate             = "DUPLICATE_TOOL"
	CodeInvalidDefinition     = "INVALID_TOOL"
	CodeInvalidRestriction    = "INVALID_RESTRICTION"
	CodeDenied                = "DENIED"
)

// Error is a tool failure with a stable code.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is matches another *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Func builds a Definition whose arguments decode into Args; the schema is
// inferred from Args (see jsonschema.For), with the root object left open.
func Func[Args any](name, description string, safe bool, fn func(ctx context.Context, call Call, args Args) (Result, error)) Definition {
	schema, err := jsonschema.For[Args](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: cannot infer schema: %v", name, err)) // programmer error
	}
	schema.AdditionalProperties = nil // the root object stays open to extra keys
	return Definition{Name: name, Description: description, Parameters: schema, ConcurrencySafe: safe,
		Execute: func(ctx context.Context, call Call) (Result, error) {
			var args Args
			if err := json.Unmarshal(call.Arguments, &args); err != nil {
				return Result{}, Errorf(CodeInvalidArgs, "invalid arguments: %v", err)
			}
			return fn(ctx, call, args)
		}}
}

// coded is an error carrying a stable code, like *Error or the errors of
// other packages that tools return.
type coded interface{ ErrorCode() string }

// ErrorCode returns the stable code.
func (e *Error) ErrorCode() string { return e.Code }

// errorResult renders err as an error result, keeping the code of an error
// that has one and using code otherwise.
func errorResult(code string, err error) Result {
	var c coded
	if errors.As(err, &c) {
		code = c.ErrorCode()
	}
	return ErrorResult(code, err.Error())
}

// entry is a registered tool with its resolved schema.
type entry struct {
	def      Definition
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	plain    *plainSchema            // nil: every call goes to resolved
	spec     func() content.ToolSpec // the model's view, encoded at its first use
}

func newEntry(def Definition) (*entry, error) {
	if def.Name == "" || def.Execute == nil {
		return nil, Errorf(CodeInvalidDefinition, "tool definition needs a name and an Execute function")
	}
	schema := def.Parameters
	if schema == nil {
		schema = &jsonschema.Schema{Type: "object"}
	}
	if schema.Type != "object" {
		return nil, Errorf(CodeInvalidDefinition, "tool %s: parameters must be an object schema, got type %q", def.Name, schema.Type)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return nil, Errorf(CodeInvalidDefinition, "tool %s: invalid parameters schema: %v", def.Name, err)
	}
	e := &entry{def: def, schema: schema, resolved: resolved, plain: plainOf(schema)}
	e.spec = sync.OnceValue(func() content.ToolSpec {
		raw, err := encodeSchema(e.schema)
		if err != nil { // a schema that resolved encodes; this is the model's fallback
			raw = json.RawMessage(`{"type":"object"}`)
		}
		return content.ToolSpec{Name: def.Name, Description: def.Description, Parameters: raw}
	})
	return e, nil
}

// table is one layer of tools.
type table struct {
	mu    sync.RWMutex
	tools map[string]*entry
	gen   uint64 // changes with every registration and removal

	specs    []content.ToolSpec // every tool's spec, sorted by name, as of specsGen
	specsGen uint64
	specsOK  bool
}

// allSpecs returns every tool's spec, sorted by name. The result is shared
// and rebuilt only after a registration or removal.
func (t *table) allSpecs() []content.ToolSpec {
	t.mu.RLock()
	if t.specsOK && t.specsGen == t.gen {
		defer t.mu.RUnlock()
		return t.specs
	}
	t.mu.RUnlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	names := slices.Sorted(maps.Keys(t.tools))
	specs := make([]content.ToolSpec, 0, len(names))
	for _, n := range names {
		specs = append(specs, t.tools[n].spec())
	}
	t.specs, t.specsGen, t.specsOK = specs, t.gen, true
	return specs
}

func (t *table) generation() uint64 {
	if t == nil {
		return 0
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.gen
}

func (t *table) register(def Definition, layer string) (func(), error) {
	e, err := newEntry(def)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tools == nil {
		t.tools = map[string]*entry{}
	}
	if _, dup := t.tools[def.Name]; dup {
		return nil, Errorf(CodeDuplicate, "tool %q is already registered in the %s layer", def.Name, layer)
	}
	t.tools[def.Name] = e
	t.gen++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.tools[def.Name] == e {
				delete(t.tools, def.Name)
				t.gen++
			}
		})
	}, nil
}

func (t *table) get(name string) *entry {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.tools[name]
}

func (t *table) names() []string {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Sorted(maps.Keys(t.tools))
}

// Registry holds the global tools of a runtime.
type Registry struct{ global table }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Register adds a global tool and returns its disposer. A duplicate name is
// refused; register through an agent's Scope to shadow a global tool.
func (r *Registry) Register(def Definition) (dispose func(), err error) {
	return r.global.register(def, "global")
}

// Names returns the global tool names, sorted.
func (r *Registry) Names() []string { return r.global.names() }

// NewScope returns an empty per-agent scope over the registry.
func (r *Registry) NewScope() *Scope { return &Scope{reg: r} }

// Restriction masks global tools for one agent. Allow (when non-nil) keeps
// only the named tools; Deny then hides the named ones. An entry is a tool
// name or a glob pattern (path.Match syntax, e.g. "mcp__github__*"), which
// matches the tools of every layer, present and future.
type Restriction struct {
	Allow []string `json:"allow,omitempty" yaml:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty" yaml:"deny,omitempty"`
}

// Scope is one agent's view of the tools: the global tools and the tools of
// its layers, masked by its restrictions, plus its own scoped tools, which
// shadow the others and are never masked. Hidden tools vanish from Specs
// and cannot be executed.
type Scope struct {
	reg     *Registry
	local   atomic.Pointer[table] // the scope's own tools, made by its first Register (most agents have none)
	mu      sync.RWMutex
	masks   []*mask
	layers  []*Layer // newest first: a later layer shadows an earlier one
	viewGen uint64   // changes with every restriction and layer added or removed
	guards  []*guard
	afters  []*after
	cached  *specCache // nil until a scope with masks, layers or tools of its own lists its specs
}

// specCache is the last Specs result of a scope and the generations it was
// built at. A plain scope (most agents') has none: it lists the global
// tools, which the registry caches.
type specCache struct {
	global, local, view, layers uint64
	specs                       []content.ToolSpec
}

type guard struct {
	check func(context.Context, Call) error
	// rewrite, when set instead of check, may return the call with new
	// arguments (see GuardCall).
	rewrite func(context.Context, Call) (Call, error)
}

type after struct {
	fn func(context.Context, Call, Result) Result
}

type mask struct {
	allow *nameSet // nil: no allow list
	deny  nameSet
}

// nameSet is a set of tool names and patterns.
type nameSet struct {
	names    map[string]bool
	patterns []string
}

func (n *nameSet) add(name string) {
	if isPattern(name) {
		n.patterns = append(n.patterns, name)
		return
	}
	if n.names == nil {
		n.names = map[string]bool{}
	}
	n.names[name] = true
}

func (n *nameSet) has(name string) bool {
	if n.names[name] {
		return true
	}
	for _, p := range n.patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// isPattern reports whether a restriction entry is a glob pattern.
func isPattern(name string) bool { return strings.ContainsAny(name, "*?[") }

// Register adds a tool visible to this scope only.
func (s *Scope) Register(def Definition) (dispose func(), err error) {
	t := s.local.Load()
	if t == nil {
		s.local.CompareAndSwap(nil, new(table))
		t = s.local.Load()
	}
	return t.register(def, "agent")
}

// Restrict adds a mask over the global and layer tools and returns its
// disposer. Every name must be a known global or layer tool and every
// pattern well-formed; an empty restriction is refused.
func (s *Scope) Restrict(r Restriction) (dispose func(), err error) {
	if len(r.Allow) == 0 && len(r.Deny) == 0 && r.Allow == nil {
		return nil, Errorf(CodeInvalidRestriction, "tool restriction names no tool")
	}
	known := s.maskable()
	m := &mask{}
	if r.Allow != nil {
		m.allow = &nameSet{}
	}
	var unknown []string
	for _, list := range []struct {
		names []string
		into  *nameSet
	}{{r.Allow, m.allow}, {r.Deny, &m.deny}} {
		for _, n := range list.names {
			if isPattern(n) {
				if _, err := path.Match(n, ""); err != nil {
					return nil, Errorf(CodeInvalidRestriction, "tool restriction pattern %q: %v", n, err)
				}
			} else if _, ok := slices.BinarySearch(known, n); !ok {
				unknown = append(unknown, n)
				continue
			}
			list.into.add(n)
		}
	}
	if len(unknown) > 0 {
		return nil, Errorf(CodeInvalidRestriction, "tool restriction names unknown tools %q (known: %q)", unknown, known)
	}
	s.mu.Lock()
	s.masks = append(s.masks, m)
	s.viewGen++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.masks = slices.DeleteFunc(slices.Clone(s.masks), func(x *mask) bool { return x == m })
			s.viewGen++
			s.mu.Unlock()
		})
	}, nil
}

// Inherit gives the scope the restrictions from has now: what from hides,
// this scope hides too, for good (a child's view can only be narrower than
// its parent's).
func (s *Scope) Inherit(from *Scope) {
	from.mu.RLock()
	masks := slices.Clone(from.masks)
	from.mu.RUnlock()
	if len(masks) == 0 {
		return
	}
	s.mu.Lock()
	s.masks = append(slices.Clip(s.masks), masks...)
	s.viewGen++
	s.mu.Unlock()
}

// Restricted reports whether a restriction masks the scope's tools.
func (s *Scope) Restricted() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.masks) > 0
}

// maskable returns the sorted names that restrictions apply to: the global
// tools and the tools of the scope's layers.
func (s *Scope) maskable() []string {
	names := s.reg.global.names()
	for _, l := range s.Layers() {
		names = append(names, l.t.names()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Guard adds a check that runs before every call in this scope, in the
// call's goroutine (it may block, e.g. to ask a person, honouring ctx); an
// error refuses the call (code DENIED unless the error is an *Error)
// without running it. It returns the guard's disposer.
func (s *Scope) Guard(check func(ctx context.Context, call Call) error) (dispose func()) {
	return s.addGuard(&guard{check: check})
}

// After adds fn, which runs after every call in this scope that reached its
// tool (not one refused or invalid before dispatch), on the call's
// goroutine; the result it returns replaces the call's. It returns fn's
// disposer.
func (s *Scope) After(fn func(ctx context.Context, call Call, res Result) Result) (dispose func()) {
	a := &after{fn: fn}
	s.mu.Lock()
	s.afters = append(s.afters, a)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.afters = slices.DeleteFunc(slices.Clone(s.afters), func(x *after) bool { return x == a })
			s.mu.Unlock()
		})
	}
}

// GuardCall adds a guard as Guard does, which may also return the call
// with new Arguments: those are what the next guards see and what is
// validated and run.
func (s *Scope) GuardCall(check func(ctx context.Context, call Call) (Call, error)) (dispose func()) {
	return s.addGuard(&guard{rewrite: check})
}

// addGuard appends g to the scope's guards and returns its disposer.
func (s *Scope) addGuard(g *guard) (dispose func()) {
	s.mu.Lock()
	s.guards = append(s.guards, g)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.guards = slices.DeleteFunc(slices.Clone(s.guards), func(x *guard) bool { return x == g })
			s.mu.Unlock()
		})
	}
}

func (s *Scope) guarded(ctx context.Context, call Call) (Call, error) {
	s.mu.RLock()
	guards := s.guards
	s.mu.RUnlock()
	for _, g := range guards {
		if g.rewrite != nil {
			next, err := g.rewrite(ctx, call)
			if err != nil {
				return call, err
			}
			call.Arguments = next.Arguments
			continue
		}
		if err := g.check(ctx, call); err != nil {
			return call, err
		}
	}
	return call, nil
}

// visible reports whether the restrictions let a global or layer tool
// through.
func (s *Scope) visible(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range s.masks {
		if (m.allow != nil && !m.allow.has(name)) || m.deny.has(name) {
			return false
		}
	}
	return true
}

func (s *Scope) lookup(name string) *entry {
	if e := s.local.Load().get(name); e != nil {
		return e
	}
	s.mu.RLock()
	layers := s.layers // newest first; replaced, never modified in place
	s.mu.RUnlock()
	for _, l := range layers {
		if e := l.t.get(name); e != nil {
			if s.visible(name) {
				return e
			}
			return nil
		}
	}
	if e := s.reg.global.get(name); e != nil && s.visible(name) {
		return e
	}
	return nil
}

// Has reports whether name is visible in this scope.
func (s *Scope) Has(name string) bool { return s.lookup(name) != nil }

// ConcurrencySafe reports whether calls of name may run in parallel.
func (s *Scope) ConcurrencySafe(name string) bool {
	e := s.lookup(name)
	return e != nil && e.def.ConcurrencySafe
}

// Specs returns the visible tools as the model sees them: the global and
// layer tools sorted by name (a scoped tool shadowing one takes its place),
// then the scope's own tools sorted by name, so that an agent's tool list
// starts with what it shares with the other agents of its tree (a
// provider's prompt cache reuses that prefix). The result is shared and
// must not be modified; it is rebuilt only when a registration,
// restriction or layer changed.
func (s *Scope) Specs() []content.ToolSpec {
	g, l := s.reg.global.generation(), s.local.Load().generation()
	s.mu.RLock()
	if len(s.masks) == 0 && len(s.layers) == 0 && l == 0 { // the common case: the global tools as they are
		s.mu.RUnlock()
		return s.reg.global.allSpecs()
	}
	c, v := s.cached, s.viewGen
	var lg uint64
	for _, x := range s.layers {
		lg += x.t.generation() // generations only grow: the sum changes when any does
	}
	s.mu.RUnlock()
	if c != nil && c.global == g && c.local == l && c.view == v && c.layers == lg {
		return c.specs
	}
	specs := s.buildSpecs()
	s.mu.Lock()
	s.cached = &specCache{global: g, local: l, view: v, layers: lg, specs: specs}
	s.mu.Unlock()
	return specs
}

func (s *Scope) buildSpecs() []content.ToolSpec {
	s.mu.RLock()
	plain := len(s.masks) == 0 && len(s.layers) == 0
	s.mu.RUnlock()
	if plain && s.local.Load().generation() == 0 { // the common case: the global tools as they are
		return s.reg.global.allSpecs()
	}
	shared := s.maskable()
	var own []string
	for _, n := range s.local.Load().names() {
		if _, found := slices.BinarySearch(shared, n); !found {
			own = append(own, n)
		}
	}
	specs := make([]content.ToolSpec, 0, len(shared)+len(own))
	for _, n := range append(shared, own...) {
		if e := s.lookup(n); e != nil {
			specs = append(specs, e.spec())
		}
	}
	return specs
}

// Execute runs a call in this scope: its guards, then the tool, then the
// scope's After functions. It never fails: an unknown or hidden tool,
// invalid arguments, a cancelled ctx, an error or a panic in the tool all
// become error results the model can read.
func (s *Scope) Execute(ctx context.Context, call Call) (res Result) {
	if ctx.Err() != nil {
		return ErrorResult(CodeAbortedBeforeDispatch, "tool call aborted before dispatch")
	}
	call, err := s.guarded(ctx, call)
	if err != nil {
		return errorResult(CodeDenied, err)
	}
	e := s.lookup(call.Name)
	if e == nil {
		return ErrorResult(CodeUnknownTool, fmt.Sprintf("unknown tool %q", call.Name))
	}
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var instance any
	if err := json.Unmarshal(args, &instance); err != nil {
		return ErrorResult(CodeInvalidArgs, fmt.Sprintf("invalid arguments: not JSON: %v", err))
	}
	if e.plain == nil || !e.plain.valid(instance) {
		if err := e.resolved.Validate(instance); err != nil {
			return ErrorResult(CodeInvalidArgs, fmt.Sprintf("invalid arguments: %v", err))
		}
	}
	call.Arguments = args
	call.Args, _ = instance.(map[string]any) // an object: the schema's root type
	res = dispatch(ctx, e, call)
	s.mu.RLock()
	afters := s.afters
	s.mu.RUnlock()
	for _, a := range afters {
		res = a.fn(ctx, call, res)
	}
	return res
}

// dispatch runs a validated call in its tool.
func dispatch(ctx context.Context, e *entry, call Call) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = ErrorResult(CodeFailed, fmt.Sprintf("tool %s panicked: %v", call.Name, r))
		}
	}()
	res, err := e.def.Execute(ctx, call)
	if err != nil {
		return errorResult(CodeFailed, err)
	}
	if ctx.Err() != nil && !res.IsError {
		aborted := ErrorResult(CodeAborted, "tool call aborted")
		aborted.Usage, aborted.Meta = res.Usage, res.Meta // what the call spent was spent
		return aborted
	}
	return res
}
