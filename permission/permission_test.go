package permission_test

import (
	"encoding/json"
	"testing"

	"github.com/dsh-go/dsh/permission"
)

func TestDecide(t *testing.T) {
	p, err := permission.New(permission.Rules{Default: permission.Ask, Tools: map[string]permission.Decision{
		"read_file": permission.Allow, "bash": permission.Deny, "mcp__gh__*": permission.Allow, "mcp__*": permission.Deny}})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]permission.Decision{
		"read_file": permission.Allow, "bash": permission.Deny, "write_file": permission.Ask,
		"mcp__gh__issues": permission.Deny, // the strictest matching pattern wins
		"mcp__fs__read":   permission.Deny,
	} {
		if got := p.Decide(tool); got != want {
			t.Errorf("Decide(%s) = %s, want %s", tool, got, want)
		}
	}
	if got := (permission.Policy{}).Decide("bash"); got != permission.Allow {
		t.Errorf("the zero policy says %s", got)
	}
}

// A child's rules can only narrow its parent's policy: a rule that allows
// what the parent asks about or denies changes nothing.
func TestNarrowNeverWidens(t *testing.T) {
	parent := permission.Policy{}.Narrow(permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Ask, "write_file": permission.Deny}})
	child := parent.Narrow(permission.Rules{Default: permission.Allow, Tools: map[string]permission.Decision{
		"bash": permission.Allow, "write_file": permission.Allow, "grep": permission.Deny}})
	for tool, want := range map[string]permission.Decision{"bash": permission.Ask, "write_file": permission.Deny, "grep": permission.Deny, "glob": permission.Allow} {
		if got := child.Decide(tool); got != want {
			t.Errorf("child Decide(%s) = %s, want %s", tool, got, want)
		}
	}
	if got := parent.Decide("grep"); got != permission.Allow {
		t.Errorf("narrowing the child changed the parent: grep is %s", got)
	}
	if !(permission.Policy{}).Narrow(permission.Rules{Default: permission.Allow}).Unrestricted() {
		t.Error("allow-all rules added a layer")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	p := permission.Policy{}.Narrow(permission.AskFor("bash")).Narrow(permission.Rules{Default: permission.Deny})
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q permission.Policy
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"bash", "grep"} {
		if p.Decide(tool) != q.Decide(tool) {
			t.Errorf("%s: %s before, %s after a round trip through %s", tool, p.Decide(tool), q.Decide(tool), b)
		}
	}
	if err := json.Unmarshal([]byte(`[{"tools":{"bash":"sometimes"}}]`), &q); err == nil {
		t.Error("a bad decision was accepted")
	}
}

func TestValidate(t *testing.T) {
	for _, r := range []permission.Rules{{Default: "maybe"}, {Tools: map[string]permission.Decision{"bash": "yes"}}, {Tools: map[string]permission.Decision{"[": permission.Deny}}} {
		if err := r.Validate(); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}
