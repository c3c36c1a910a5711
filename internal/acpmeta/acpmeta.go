// Package acpmeta is dsh's extension of the Agent Client Protocol: what a
// dsh parent and a dsh child (`command: self`) tell each other in the
// `_meta` objects ACP reserves for extensions, under the key "dsh", and in
// the extension methods "_dsh/…". A third-party peer ignores it; a dsh peer
// that finds none falls back to plain ACP.
package acpmeta

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/tool"
)

// Key is the `_meta` key of dsh's extension.
const Key = "dsh"

// Session is what a dsh parent sends with session/new (and session/load):
// the child's lineage, the permission policy it runs under (its parent's,
// which it can only narrow), the tokens left in the tree's budget and, for
// a new session, its descriptor.
type Session struct {
	ParentSession string             `json:"parentSession,omitempty"`
	Depth         int                `json:"depth,omitempty"`
	Policy        *permission.Policy `json:"policy,omitempty"`
	TokenBudget   int64              `json:"tokenBudget,omitempty"`
	// Admits says that the parent answers MethodAdmit: the child asks it
	// for a place before each start, so that its starts count against the
	// one live-children cap of the parent's tree, which MaxLiveChildren
	// (0: none) also sets as the child's own. A child whose parent does not
	// admit, or stops answering, holds its starts to its own cap.
	Admits          bool `json:"admits,omitempty"`
	MaxLiveChildren int  `json:"maxLiveChildren,omitempty"`
	// Persona, ToolFilter, OutputSchema and MaxDepth are the start-time
	// capabilities of the delegation, which a dsh child applies to the
	// session as an in-process child gets them: the persona replaces the
	// deployment's, filtered tools are absent and refused, a structured
	// result comes through the forced structured_output tool (returned in
	// the prompt answer's Prompt.Structured), and no delegation of the
	// session's tree goes deeper than MaxDepth.
	Persona      *string           `json:"persona,omitempty"`
	ToolFilter   *tool.Restriction `json:"toolFilter,omitempty"`
	OutputSchema json.RawMessage   `json:"outputSchema,omitempty"`
	MaxDepth     *int              `json:"maxDepth,omitempty"`
	// Descriptor is the subagent descriptor the child records in its new
	// session's log (a subagent.Descriptor: one-shot, its parent's provider
	// and label), so that its parent's listings classify it.
	Descriptor json.RawMessage `json:"descriptor,omitempty"`
}

// MaxDepth bounds the delegation depth a parent may claim for its child.
const MaxDepth = 64

// Check validates what a client sent: a depth within 0..MaxDepth, a
// parentSession that is a session id (letters, digits, '.', '_', ':' and
// '-', at most 128, not starting with '.': never a path), a budget that is
// not negative. Its errors name the field.
func (s Session) Check() error {
	switch {
	case s.Depth < 0 || s.Depth > MaxDepth:
		return fmt.Errorf("_meta.%s.depth must be within 0..%d, got %d", Key, MaxDepth, s.Depth)
	case s.MaxDepth != nil && (*s.MaxDepth < 0 || *s.MaxDepth > MaxDepth):
		return fmt.Errorf("_meta.%s.maxDepth must be within 0..%d, got %d", Key, MaxDepth, *s.MaxDepth)
	case s.ParentSession != "" && !validSessionID(s.ParentSession):
		id := s.ParentSession
		if len(id) > 64 {
			id = id[:64] + "…"
		}
		return fmt.Errorf("_meta.%s.parentSession %q is not a session id", Key, id)
	case s.TokenBudget < 0:
		return fmt.Errorf("_meta.%s.tokenBudget must not be negative, got %d", Key, s.TokenBudget)
	}
	return nil
}

// validSessionID reports whether id can name a session.
func validSessionID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r))
	})
}

// Permission is what a dsh agent adds to session/request_permission: the
// dsh tool the call is for, and which agent of its tree asks (see
// permission.Request.Agent).
type Permission struct {
	Tool  string   `json:"tool"`
	Agent []string `json:"agent,omitempty"`
}

// Prompt is what a dsh agent adds to its session/prompt answer: the turn's
// usage per "provider/model", descendants included.
type Prompt struct {
	Usage map[string]content.Usage `json:"usage,omitempty"`
	// Structured is the value the turn's structured_output call recorded,
	// when the session has an output schema.
	Structured json.RawMessage `json:"structured,omitempty"`
}

// The extension methods a dsh child calls on its dsh parent.
const (
	// MethodAdmit asks the parent for a place under its tree's
	// live-children cap before the child starts a child of its own:
	// params Admit, result Admitted.
	MethodAdmit = "_dsh/admit"
	// MethodRelease gives back a place MethodAdmit granted, once the
	// child's child has ended: a notification with params Release.
	MethodRelease = "_dsh/release"
)

// The extension method a dsh parent calls on its dsh child.
const (
	// MethodInterrupt asks the child to interrupt, with its session's
	// authority, a descendant of that session resident in its process
	// (interrupt_agent on a row the parent lists but does not hold):
	// params Interrupt, an empty result.
	MethodInterrupt = "_dsh/interrupt"
)

// Interrupt is MethodInterrupt's request: the child's session, and the
// descendant's.
type Interrupt struct {
	SessionID string `json:"sessionId"`
	Target    string `json:"target"`
}

// Admit is MethodAdmit's request.
type Admit struct {
	SessionID string `json:"sessionId"`
}

// Admitted is MethodAdmit's answer: the granted place's Slot, or why the
// tree has none (Refused, the LIMIT_REACHED message).
type Admitted struct {
	Slot    string `json:"slot,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// Release is MethodRelease's notification.
type Release struct {
	SessionID string `json:"sessionId"`
	Slot      string `json:"slot"`
}

// Set stores v under Key in meta, allocating meta when nil.
func Set(meta map[string]any, v any) map[string]any {
	if meta == nil {
		meta = map[string]any{}
	}
	meta[Key] = v
	return meta
}

// Get decodes the value under Key in meta into v; it reports false when
// there is none or it does not decode.
func Get(meta map[string]any, v any) bool {
	raw, ok := meta[Key]
	if !ok {
		return false
	}
	b, err := json.Marshal(raw)
	return err == nil && json.Unmarshal(b, v) == nil
}
