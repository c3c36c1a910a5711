// Package agentdef reads agent definitions: named kinds of child agents
// ("a read-only explorer", "a reviewer that returns JSON") written as
// Markdown files with YAML front matter, in dsh's own folders and in
// Claude Code's (.claude/agents), whose files load unchanged. A definition
// names its child's instructions (the Markdown body), tools, model route,
// provider, step cap, output schema, permission rules, hooks, whether it
// runs in the background and whether it gets a git worktree of its own.
// The model picks one with the subagent tool's subagent_type argument.
//
// Files are read as Claude Code reads them, and a bad file never stops
// the others: it is a warning naming its file and line, and is left out
// (see Load). Claude Code's tool names map onto dsh's through
// tool/toolname.Counterpart.
package agentdef

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
)

// IsolationWorktree runs a child in a git worktree of its own.
const IsolationWorktree = "worktree"

// ModelInherit as a definition's model keeps the parent's route.
const ModelInherit = "inherit"

// Definition is one kind of child agent.
type Definition struct {
	// Name is what the model passes as subagent_type.
	Name string
	// Description says when to use it; the subagent tool lists it.
	Description string
	// Instructions (the file's body) become the child's persona.
	Instructions string
	// Tools, when non-nil, are the only global tools the child sees;
	// DisallowedTools are hidden from it.
	Tools, DisallowedTools []string
	// Model is a model route; "" keeps the parent's.
	Model string
	// Provider is the subagent provider the child runs on; "" is the
	// provider of the tool it is started through.
	Provider string
	// MaxSteps caps the model calls of the child's turn (0: inherited); a
	// value above the parent's cap is lowered to it.
	MaxSteps int
	// OutputSchema, when set, makes the child return a structured result.
	OutputSchema *jsonschema.Schema
	// Background makes run_in_background default to true.
	Background bool
	// Isolation is "" or IsolationWorktree.
	Isolation string
	// Policy narrows the child's permission policy (nil: inherited as is).
	Policy *permission.Policy
	// Hooks run in the child after the ones it inherits.
	Hooks *hook.Set
	// Source is where the definition came from.
	Source Source
	// Overrides are the definitions of the same name it shadows, highest
	// precedence first.
	Overrides []Source

	lines      map[string]int // the line of each front-matter key, for errors
	askedModel string         // a model that is no route (the parent's is used)
}

// Source is where a definition was read.
type Source struct {
	// Scope is "built-in", "project" or "user".
	Scope string
	// Path is the file; "" for a built-in.
	Path string
	// Claude is true for a file in a Claude Code folder.
	Claude bool
}

func (s Source) String() string {
	switch {
	case s.Path == "":
		return s.Scope
	case s.Claude:
		return s.Scope + " (Claude Code) " + s.Path
	}
	return s.Scope + " " + s.Path
}

// Error is a bad definition, naming its file, line and field.
type Error struct {
	Path  string // the file, or the name of a built-in definition
	Line  int    // 0 when unknown
	Field string // the front-matter key, when one is at fault
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("agent definition ")
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorCode returns the stable code of definition errors.
func (e *Error) ErrorCode() string { return "INVALID_AGENT_DEFINITION" }

// errorf returns an *Error at field of d.
func (d *Definition) errorf(field, format string, args ...any) *Error {
	path := d.Source.Path
	if path == "" {
		path = d.Name + " (" + d.Source.Scope + ")"
	}
	return &Error{Path: path, Line: d.lines[field], Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Check reports the first thing d asks of provider that caps lacks,
// naming the field and the capability.
func (d *Definition) Check(provider string, caps subagent.Capabilities) error {
	needs := []struct {
		field string
		set   bool
		have  bool
		cap   string
	}{
		{"tools", d.Tools != nil, caps.ToolFilter, subagent.CapToolFilter},
		{"disallowedTools", len(d.DisallowedTools) > 0, caps.ToolFilter, subagent.CapToolFilter},
		{"outputSchema", d.OutputSchema != nil, caps.OutputSchema, subagent.CapOutputSchema},
		{"permissions", d.Policy != nil, caps.Policy, subagent.CapPolicy},
		{"hooks", !d.Hooks.Empty(), caps.Policy, subagent.CapPolicy},
	}
	for _, n := range needs {
		if n.set && !n.have {
			field := n.field
			if field == "permissions" && d.lines[field] == 0 {
				field = "permissionMode"
			}
			return d.errorf(field, "provider %q does not support the %s capability", provider, n.cap)
		}
	}
	return nil
}

// Catalog is the set of definitions a runtime offers, by name.
type Catalog struct {
	defs []*Definition // sorted by name
}

// Get returns the definition called name.
func (c *Catalog) Get(name string) (*Definition, bool) {
	if c == nil {
		return nil, false
	}
	i, ok := slices.BinarySearchFunc(c.defs, name, func(d *Definition, n string) int { return strings.Compare(d.Name, n) })
	if !ok {
		return nil, false
	}
	return c.defs[i], true
}

// List returns the definitions sorted by name.
func (c *Catalog) List() []*Definition {
	if c == nil {
		return nil
	}
	return slices.Clone(c.defs)
}

// Names returns the definition names, sorted.
func (c *Catalog) Names() []string {
	var names []string
	for _, d := range c.List() {
		names = append(names, d.Name)
	}
	return names
}

// maxListed bounds a description in the subagent tool's list, in bytes.
const maxListed = 300

// Describe lists the definitions for the subagent tool's description: one
// line each, sorted, each description on one line and at most 300 bytes.
// It depends on nothing but the catalog, so that the tool list stays
// byte-identical for the prompt cache.
func (c *Catalog) Describe() string {
	var b strings.Builder
	for _, d := range c.List() {
		desc := strings.Join(strings.Fields(d.Description), " ")
		if len(desc) > maxListed {
			cut := maxListed
			for cut > 0 && desc[cut]&0xC0 == 0x80 {
				cut--
			}
			desc = desc[:cut] + "…"
		}
		fmt.Fprintf(&b, "\n- %s: %s", d.Name, desc)
	}
	return b.String()
}
