// Package permission is dsh's trust boundary. A Policy says, per tool,
// whether a call runs (allow), needs a person's approval first (ask) or is
// refused (deny). An agent's policy is captured when it is created; a child
// agent's policy is its parent's narrowed by the child's own rules, so a
// child can only ever do less than its parent, never more. Asks travel up
// the delegation tree to the one Asker its root was given (the ACP client,
// the terminal, or the non-interactive refusal of `dsh run`), naming the
// child that asks.
package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// Decision is what a policy says of a tool call.
type Decision string

// The decisions, from the most to the least permissive.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// strictness orders decisions; an unknown one counts as deny.
func (d Decision) strictness() int {
	switch d {
	case Allow, "":
		return 0
	case Ask:
		return 1
	}
	return 2
}

// Valid reports whether d is allow, ask or deny.
func (d Decision) Valid() bool { return d == Allow || d == Ask || d == Deny }

// Stricter returns the stricter of two decisions.
func Stricter(a, b Decision) Decision {
	if b.strictness() > a.strictness() {
		return b
	}
	return a
}

// Rules are one layer of a policy, as written in configuration: a decision
// per tool name or glob pattern (path.Match syntax, e.g. "mcp__github__*"),
// and a default for the tools none of them names.
type Rules struct {
	// Default applies to tools no entry names (default allow).
	Default Decision `json:"default,omitempty" yaml:"default,omitempty"`
	// Tools maps a tool name or pattern to its decision. An exact name wins
	// over patterns; among matching patterns the strictest wins.
	Tools map[string]Decision `json:"tools,omitempty" yaml:"tools,omitempty"`
}

// Validate checks the decisions and patterns.
func (r Rules) Validate() error {
	if r.Default != "" && !r.Default.Valid() {
		return fmt.Errorf("default: want allow, ask or deny, got %q", r.Default)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Tools)) {
		if d := r.Tools[name]; !d.Valid() {
			return fmt.Errorf("tools.%s: want allow, ask or deny, got %q", name, d)
		}
		if _, err := path.Match(name, ""); err != nil {
			return fmt.Errorf("tools.%s: bad pattern: %v", name, err)
		}
	}
	return nil
}

// decide is this layer's decision for tool.
func (r Rules) decide(tool string) Decision {
	if d, ok := r.Tools[tool]; ok {
		return d
	}
	var out Decision
	matched := false
	for pattern, d := range r.Tools {
		if IsPattern(pattern) {
			if ok, _ := path.Match(pattern, tool); ok {
				out, matched = Stricter(out, d), true
			}
		}
	}
	if matched {
		return out
	}
	if r.Default == "" {
		return Allow
	}
	return r.Default
}

// AskFor returns rules that ask before each of tools runs and allow the
// rest.
func AskFor(tools ...string) Rules {
	r := Rules{Tools: make(map[string]Decision, len(tools))}
	for _, t := range tools {
		r.Tools[t] = Ask
	}
	return r
}

// IsPattern reports whether a policy or filter key is a glob pattern rather
// than a tool name.
func IsPattern(key string) bool { return strings.ContainsAny(key, "*?[") }

// Policy is a stack of rules, every one of which must allow a call: the
// effective decision is the strictest any layer gives. The zero Policy
// allows everything. A Policy is immutable; Narrow returns a new one.
type Policy struct{ layers []Rules }

// New returns the policy of one layer of rules.
func New(r Rules) (Policy, error) {
	if err := r.Validate(); err != nil {
		return Policy{}, err
	}
	return Policy{}.Narrow(r), nil
}

// Narrow returns p with r layered on top: the result never allows what p
// does not. Rules that allow everything leave p as it is.
func (p Policy) Narrow(r Rules) Policy {
	if (r.Default == "" || r.Default == Allow) && !slices.ContainsFunc(slices.Collect(maps.Values(r.Tools)), func(d Decision) bool { return d != Allow }) {
		return p
	}
	return Policy{layers: append(slices.Clip(p.layers), r)}
}

// NarrowBy returns p narrowed by every layer of q.
func (p Policy) NarrowBy(q Policy) Policy {
	for _, r := range q.layers {
		p = p.Narrow(r)
	}
	return p
}

// Decide returns the decision for a call of tool.
func (p Policy) Decide(tool string) Decision {
	d := Allow
	for _, r := range p.layers {
		d = Stricter(d, r.decide(tool))
	}
	return d
}

// Unrestricted reports whether p allows every tool.
func (p Policy) Unrestricted() bool { return len(p.layers) == 0 }

// Layers returns the policy's rules, outermost first.
func (p Policy) Layers() []Rules { return slices.Clone(p.layers) }

// MarshalJSON writes the policy as its list of layers.
func (p Policy) MarshalJSON() ([]byte, error) {
	if p.layers == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(p.layers)
}

// UnmarshalJSON reads a list of layers, validating each.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var layers []Rules
	if err := json.Unmarshal(b, &layers); err != nil {
		return err
	}
	out := Policy{}
	for i, r := range layers {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("permission layer %d: %w", i, err)
		}
		out = out.Narrow(r)
	}
	*p = out
	return nil
}

// Request is one call that needs approval.
type Request struct {
	// Agent names the asking agent from the root down: empty for the root
	// itself, else one entry per delegation ("spawn · fix the tests").
	Agent []string
	// SessionID is the asking agent's session.
	SessionID string
	// Tool, CallID and Arguments describe the call.
	Tool      string
	CallID    string
	Arguments json.RawMessage
}

// Who names the asking agent for a person: "the main agent" for the root,
// else its delegation path joined by " › ".
func (r Request) Who() string {
	if len(r.Agent) == 0 {
		return "the main agent"
	}
	return strings.Join(r.Agent, " › ")
}

// Answer is a person's answer to a Request.
type Answer int

// The answers.
const (
	Reject      Answer = iota // the call is refused
	AllowOnce                 // this call runs
	AllowAlways               // this call and later calls of the same tool in this tree run
)

// Asker answers the asks of one delegation tree. Ask may block (a person
// is deciding); it must honour ctx. An error refuses the call and is shown
// to the model.
type Asker interface {
	Ask(ctx context.Context, req Request) (Answer, error)
}

// AskerFunc adapts a function to Asker.
type AskerFunc func(ctx context.Context, req Request) (Answer, error)

// Ask implements Asker.
func (f AskerFunc) Ask(ctx context.Context, req Request) (Answer, error) { return f(ctx, req) }
