package subagent_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/tool"
)

// C1, C4, C5: descriptors round-trip losslessly (an empty allow list stays
// "allow nothing"); other versions are no descriptor; every schema
// violation is an error naming its field.
func TestDescriptorParse(t *testing.T) {
	persona := "terse"
	policy, _ := permission.New(permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Deny}})
	for _, d := range []subagent.Descriptor{
		{Version: 2, Mode: subagent.OneShot, Provider: "spawn"},
		{Version: 2, Mode: subagent.OneShot, Provider: "spawn", Label: "fix"},
		{Version: 2, Mode: subagent.Continuable, Provider: "fork", Label: "fix", AgentProvider: "deepseek", AgentModel: "m",
			Persona: &persona, ToolFilter: &tool.Restriction{Allow: []string{}}, Policy: &policy, Remote: "r-1"},
		{Version: 2, Mode: subagent.Continuable, Provider: "fork", Label: "x", ToolFilter: &tool.Restriction{Deny: []string{"bash"}}},
	} {
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := subagent.ParseDescriptor(raw)
		if err != nil || !ok || !reflect.DeepEqual(got, d) {
			t.Errorf("%s: parsed %+v, %v, %v", raw, got, ok, err)
		}
	}
	for _, raw := range []string{`{"mode":"one-shot"}`, `{"version":1,"mode":"x"}`, `{"version":3}`} {
		if _, ok, err := subagent.ParseDescriptor([]byte(raw)); ok || err != nil {
			t.Errorf("%s: ok %v, err %v: want no descriptor", raw, ok, err)
		}
	}
	for raw, field := range map[string]string{
		`[]`:                              "",
		`{"version":"2"}`:                 "version",
		`{"version":2}`:                   "mode",
		`{"version":2,"mode":"later"}`:    "mode",
		`{"version":2,"mode":"one-shot"}`: "provider",
		`{"version":2,"mode":"one-shot","provider":1}`:                                                 "provider",
		`{"version":2,"mode":"one-shot","provider":"p","persona":"x"}`:                                 "persona",
		`{"version":2,"mode":"continuable","provider":"p"}`:                                            "label",
		`{"version":2,"mode":"continuable","provider":"p","label":null}`:                               "label",
		`{"version":2,"mode":"continuable","provider":"p","label":"l","x":1}`:                          "x",
		`{"version":2,"mode":"continuable","provider":"p","label":"l","toolFilter":1}`:                 "toolFilter",
		`{"version":2,"mode":"continuable","provider":"p","label":"l","toolFilter":{}}`:                "toolFilter",
		`{"version":2,"mode":"continuable","provider":"p","label":"l","toolFilter":{"allow":[1]}}`:     "toolFilter.allow",
		`{"version":2,"mode":"continuable","provider":"p","label":"l","toolFilter":{"only":[]}}`:       "toolFilter.only",
		`{"version":2,"mode":"continuable","provider":"p","label":"l","policy":[{"default":"maybe"}]}`: "policy",
	} {
		_, ok, err := subagent.ParseDescriptor([]byte(raw))
		var de *subagent.DescriptorError
		if ok || !errors.As(err, &de) || de.Field != field {
			t.Errorf("%s: ok %v, err %v: want an error naming %q", raw, ok, err, field)
		}
	}
}

// C6, Y6: resume reads the first descriptor of the child's own events;
// identity is the last valid one of the whole log, reset by a malformed one.
func TestDescriptorFolds(t *testing.T) {
	ev := func(seq int64, raw string) session.Event {
		return session.Event{Seq: seq, Type: subagent.DescriptorType, Data: json.RawMessage(raw)}
	}
	ancestor := `{"version":2,"mode":"continuable","provider":"spawn","label":"ancestor"}`
	own := `{"version":2,"mode":"continuable","provider":"fork","label":"own"}`
	events := []session.Event{ev(0, ancestor), {Seq: 1, Type: session.TypeEndSeed, Data: session.EndSeed{}}, ev(2, own)}
	d, ok, err := subagent.ResumeDescriptor(session.Header{SeedLength: 1}, events)
	if err != nil || !ok || d.Label != "own" {
		t.Errorf("resume descriptor %+v %v %v", d, ok, err)
	}
	if d, ok := subagent.Identity(events); !ok || d.Label != "own" {
		t.Errorf("identity %+v", d)
	}
	if _, ok := subagent.Identity(append(events, ev(3, `{"version":2,"mode":"bad"}`))); ok {
		t.Error("a malformed later descriptor did not reset the identity")
	}
	if _, ok, _ := subagent.ResumeDescriptor(session.Header{SeedLength: 1}, events[:2]); ok {
		t.Error("a seeded ancestor's descriptor was taken for the child's own")
	}
}

// FuzzParseDescriptor: any payload parses to a descriptor that survives a
// round trip, to none, or to an error naming a field; never a panic.
func FuzzParseDescriptor(f *testing.F) {
	for _, seed := range []string{
		`{"version":2,"mode":"one-shot","provider":"spawn","label":"x"}`,
		`{"version":2,"mode":"continuable","provider":"fork","label":"l","toolFilter":{"allow":[]},"policy":[{"tools":{"bash":"deny"}}]}`,
		`{"version":2,"mode":"continuable","provider":"p","label":"l","persona":"p","agentProvider":"a","agentModel":"m","remote":"r"}`,
		`{"version":1}`, `{"version":"2"}`, `[]`, `null`, `{"version":2,"mode":"continuable","toolFilter":{"deny":null}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, ok, err := subagent.ParseDescriptor(raw)
		switch {
		case err != nil:
			var de *subagent.DescriptorError
			if ok || !errors.As(err, &de) || !strings.HasPrefix(err.Error(), "subagent descriptor") {
				t.Fatalf("%s: %v, ok %v", raw, err, ok)
			}
		case ok:
			again, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			back, ok2, err := subagent.ParseDescriptor(again)
			if err != nil || !ok2 || !reflect.DeepEqual(back, d) {
				t.Fatalf("%s → %s → %+v, %v", raw, again, back, err)
			}
		}
	})
}

// A descriptor field that JSON cannot store as given (not valid UTF-8) is
// an error naming the field, and nothing is written; it is not rewritten.
func TestDescriptorRefusesWhatItCannotStore(t *testing.T) {
	persona := "ok\xffpersona"
	for field, d := range map[string]subagent.Descriptor{
		"label":            {Mode: subagent.OneShot, Provider: "spawn", Label: "fix \xff\xfe"},
		"provider":         {Mode: subagent.OneShot, Provider: "sp\xc3"},
		"persona":          {Mode: subagent.Continuable, Provider: "spawn", Label: "x", Persona: &persona},
		"toolFilter.allow": {Mode: subagent.Continuable, Provider: "spawn", Label: "x", ToolFilter: &tool.Restriction{Allow: []string{"b\x80"}}},
	} {
		s, _, err := session.NewStore(session.NewMemoryBackend(), nil).Create(session.CreateOptions{ID: "s-" + field})
		if err != nil {
			t.Fatal(err)
		}
		err = subagent.AppendDescriptor(s, d)
		var de *subagent.DescriptorError
		if !errors.As(err, &de) || de.Field != field || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%s: %v, want an error naming the field", field, err)
		}
		if n := s.Len(); n != 0 {
			t.Errorf("%s: %d events written", field, n)
		}
	}
}
