package subagent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// DescriptorType is the session event type of a child's descriptor: a
// model-hidden record, in the child's own log, of how it was started. It is
// what makes a child rebuildable from its log alone, in any process.
const DescriptorType = "subagent/descriptor"

// DescriptorVersion is the only descriptor version this package writes and
// classifies; a descriptor of another version is no descriptor at all.
const DescriptorVersion = 2

// Mode says whether a child takes one task (one-shot) or continues after
// each settlement (continuable).
type Mode string

// The modes.
const (
	OneShot     Mode = "one-shot"
	Continuable Mode = "continuable"
)

// Descriptor records which provider started a child, its label, its mode
// and, for a continuable child, everything needed to rebuild it: its model
// route, persona, tool filter and permission policy. It never holds depth
// (the session header does), an output schema or token limits.
//
// Policy and Remote are dsh's own fields. The reference rebuilds a child's
// approval policy from separate events; dsh records the policy the child
// ran under in the descriptor, so that a cold-resumed child runs under
// exactly that policy (narrowed by its new owner's), never one captured
// from a new parent. Remote names an out-of-process child's conversation in
// its own product (an ACP session id, a Codex thread id, a Claude Code
// session id), which is how such a child is continued.
type Descriptor struct {
	Version  int    `json:"version"`
	Mode     Mode   `json:"mode"`
	Provider string `json:"provider"`
	Label    string `json:"label,omitempty"`

	// Continuable only.
	AgentProvider string             `json:"agentProvider,omitempty"`
	AgentModel    string             `json:"agentModel,omitempty"`
	Persona       *string            `json:"persona,omitempty"`
	ToolFilter    *tool.Restriction  `json:"-"` // see MarshalJSON: an empty allow list is kept
	Policy        *permission.Policy `json:"policy,omitempty"`
	Remote        string             `json:"remote,omitempty"`
}

// wireFilter is a tool filter as a descriptor stores it: unlike
// tool.Restriction's own encoding, an empty allow list (allow nothing)
// stays distinct from no allow list.
type wireFilter struct {
	Allow *[]string `json:"allow,omitempty"`
	Deny  []string  `json:"deny,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (d Descriptor) MarshalJSON() ([]byte, error) { return d.encode() }

// encode is MarshalJSON without the compaction json.Marshal applies to a
// Marshaler's output: a one-shot descriptor is written for every child.
func (d Descriptor) encode() ([]byte, error) {
	type plain Descriptor
	if d.ToolFilter == nil {
		return json.Marshal(plain(d))
	}
	w := struct {
		plain
		ToolFilter *wireFilter `json:"toolFilter,omitempty"`
	}{plain: plain(d)}
	if f := d.ToolFilter; f != nil {
		w.ToolFilter = &wireFilter{Deny: f.Deny}
		if f.Allow != nil {
			allow := f.Allow
			w.ToolFilter.Allow = &allow
		}
	}
	return json.Marshal(w)
}

// storable refuses a descriptor that JSON cannot store as given: a string
// field that is not valid UTF-8 would be rewritten (U+FFFD) on its way to
// the log, so that a resume would read another value.
func (d Descriptor) storable() error {
	fields := []struct{ key, v string }{{"provider", d.Provider}, {"label", d.Label},
		{"agentProvider", d.AgentProvider}, {"agentModel", d.AgentModel}, {"remote", d.Remote}}
	if d.Persona != nil {
		fields = append(fields, struct{ key, v string }{"persona", *d.Persona})
	}
	if f := d.ToolFilter; f != nil {
		for _, n := range f.Allow {
			fields = append(fields, struct{ key, v string }{"toolFilter.allow", n})
		}
		for _, n := range f.Deny {
			fields = append(fields, struct{ key, v string }{"toolFilter.deny", n})
		}
	}
	for _, f := range fields {
		if !utf8.ValidString(f.v) {
			return badField(f.key, "not valid UTF-8 (%q): it cannot be stored as given", f.v)
		}
	}
	return nil
}

// The fields each mode may hold.
var (
	oneShotFields     = []string{"version", "mode", "provider", "label"}
	continuableFields = []string{"version", "mode", "provider", "label", "agentProvider", "agentModel", "persona", "toolFilter", "policy", "remote"}
)

// DescriptorError is a descriptor of the current version that breaks its
// schema; Field names the offending field.
type DescriptorError struct {
	Field string
	Msg   string
}

func (e *DescriptorError) Error() string {
	if e.Field == "" {
		return "subagent descriptor: " + e.Msg
	}
	return fmt.Sprintf("subagent descriptor: %s: %s", e.Field, e.Msg)
}

// ErrorCode implements the coded-error convention.
func (e *DescriptorError) ErrorCode() string { return "INVALID_DESCRIPTOR" }

func badField(field, format string, args ...any) error {
	return &DescriptorError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParseDescriptor reads a descriptor event's payload. ok is false, with no
// error, for a payload of another version (it cannot be classified); a
// current-version payload that breaks the schema is a *DescriptorError
// naming the field.
func ParseDescriptor(raw []byte) (d Descriptor, ok bool, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Descriptor{}, false, badField("", "the payload is not an object")
	}
	v, has := fields["version"]
	if !has {
		return Descriptor{}, false, nil
	}
	var version float64
	if err := json.Unmarshal(v, &version); err != nil {
		return Descriptor{}, false, badField("version", "not a number")
	}
	if version != DescriptorVersion {
		return Descriptor{}, false, nil
	}
	d.Version = DescriptorVersion
	if err := str(fields, "mode", (*string)(&d.Mode), true); err != nil {
		return Descriptor{}, false, err
	}
	allowed := continuableFields
	switch d.Mode {
	case OneShot:
		allowed = oneShotFields
	case Continuable:
	default:
		return Descriptor{}, false, badField("mode", "want %q or %q, got %q", OneShot, Continuable, d.Mode)
	}
	for _, k := range sortedKeys(fields) {
		if !slices.Contains(allowed, k) {
			return Descriptor{}, false, badField(k, "not a field of a %s descriptor", d.Mode)
		}
	}
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
	}{{"provider", &d.Provider, true}, {"label", &d.Label, d.Mode == Continuable},
		{"agentProvider", &d.AgentProvider, false}, {"agentModel", &d.AgentModel, false}, {"remote", &d.Remote, false}} {
		if err := str(fields, f.key, f.dst, f.required); err != nil {
			return Descriptor{}, false, err
		}
	}
	if _, has := fields["persona"]; has {
		var p string
		if err := str(fields, "persona", &p, false); err != nil {
			return Descriptor{}, false, err
		}
		d.Persona = &p
	}
	if raw, has := fields["toolFilter"]; has {
		f, err := parseFilter(raw)
		if err != nil {
			return Descriptor{}, false, err
		}
		d.ToolFilter = f
	}
	if raw, has := fields["policy"]; has {
		var p permission.Policy
		if err := json.Unmarshal(raw, &p); err != nil {
			return Descriptor{}, false, badField("policy", "%v", err)
		}
		for _, r := range p.Layers() {
			if err := r.Validate(); err != nil {
				return Descriptor{}, false, badField("policy", "%v", err)
			}
		}
		d.Policy = &p
	}
	return d, true, nil
}

// str reads fields[key] as a string into dst.
func str(fields map[string]json.RawMessage, key string, dst *string, required bool) error {
	raw, has := fields[key]
	if !has {
		if required {
			return badField(key, "missing")
		}
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return badField(key, "not a string")
	}
	if required && *dst == "" {
		return badField(key, "empty")
	}
	return nil
}

func parseFilter(raw json.RawMessage) (*tool.Restriction, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, badField("toolFilter", "not an object")
	}
	f := &tool.Restriction{}
	for _, k := range sortedKeys(fields) {
		var names []string
		if err := json.Unmarshal(fields[k], &names); err != nil || names == nil {
			return nil, badField("toolFilter."+k, "not an array of strings")
		}
		switch k {
		case "allow":
			f.Allow = names
		case "deny":
			f.Deny = names
		default:
			return nil, badField("toolFilter."+k, "unknown key (want allow or deny)")
		}
	}
	if f.Allow == nil && f.Deny == nil {
		return nil, badField("toolFilter", "needs allow or deny")
	}
	return f, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// descriptorPayload returns a descriptor event's payload as JSON.
func descriptorPayload(data any) ([]byte, bool) {
	switch v := data.(type) {
	case json.RawMessage:
		return v, true
	case []byte:
		return v, true
	}
	b, err := json.Marshal(data)
	return b, err == nil
}

// AppendDescriptor writes d to s as a model-hidden event.
func AppendDescriptor(s *session.Session, d Descriptor) error {
	d.Version = DescriptorVersion
	if err := d.storable(); err != nil {
		return err
	}
	raw, err := d.encode()
	if err != nil {
		return fmt.Errorf("subagent descriptor: not losslessly JSON-serializable: %w", err)
	}
	_, err = s.Append(DescriptorType, json.RawMessage(raw))
	return err
}

// ResumeDescriptor is the descriptor a cold resume rebuilds a child from:
// the first one in the child's own events (those after the seed it
// inherited). ok is false when there is none of the current version.
func ResumeDescriptor(h session.Header, events []session.Event) (d Descriptor, ok bool, err error) {
	for _, e := range events[min(h.SeedLength, len(events)):] {
		if e.Type != DescriptorType {
			continue
		}
		raw, _ := descriptorPayload(e.Data)
		return ParseDescriptor(raw)
	}
	return Descriptor{}, false, nil
}

// Identity is a log's identity for listing: the last valid descriptor of
// the whole log, seed included. A later malformed or unknown-version
// descriptor resets it to none.
func Identity(events []session.Event) (d Descriptor, ok bool) {
	for _, e := range events {
		if e.Type != DescriptorType {
			continue
		}
		raw, _ := descriptorPayload(e.Data)
		var err error
		d, ok, err = ParseDescriptor(raw)
		if err != nil {
			d, ok = Descriptor{}, false
		}
	}
	return d, ok
}
