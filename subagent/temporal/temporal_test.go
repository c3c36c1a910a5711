package temporal

import (
	"context"
	"errors"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/hook"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The workflow input carries what the parent decides: lineage, the
// parent's policy narrowed by the request's, what is left of the tree's
// budget, the schema; a request the worker cannot honour is refused before
// anything starts.
func TestInput(t *testing.T) {
	p, err := New(Config{Name: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deny, _ := permission.New(permission.Rules{Tools: map[string]permission.Decision{"bash": permission.Deny}})
	askEdit := permission.AskFor("edit_file")
	pp := subagenttest.NewParent(t, nil, 0, agent.Options{})
	parent, err := pp.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"},
		Policy: &deny, TokenBudget: 1000})
	if err != nil {
		t.Fatal(err)
	}
	parent.Charge(content.Usage{Input: 200, Output: 100})
	narrow, _ := permission.New(askEdit)
	two := 2
	in, err := p.input(subagent.StartRequest{Parent: parent, Prompt: subagenttest.Prompt("task"), Depth: 1, MaxDepth: &two, Policy: &narrow,
		OutputSchema: &jsonschema.Schema{Type: "object"}})
	if err != nil {
		t.Fatal(err)
	}
	if in.ParentSession != parent.ID() || in.Depth != 1 || *in.MaxDepth != 2 || in.TokenBudget != 700 || string(in.OutputSchema) != `{"type":"object"}` {
		t.Errorf("input %+v", in)
	}
	if in.Policy.Decide("bash") != permission.Deny || in.Policy.Decide("edit_file") != permission.Ask || in.Policy.Decide("read_file") != permission.Allow {
		t.Errorf("policy %v: want the parent's deny and the request's ask", in.Policy.Layers())
	}
	hooks, err := hook.New(hook.Config{hook.PreToolUse: {{Hooks: []hook.Command{{Type: "command", Command: "true"}}}}}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]subagent.StartRequest{
		"hooks": {Parent: parent, Prompt: subagenttest.Prompt("x"), Hooks: hooks},
		"a cwd": {Parent: parent, Prompt: subagenttest.Prompt("x"), Cwd: t.TempDir()},
	} {
		if _, err := p.input(req); !errors.Is(err, subagent.ErrUnsupportedCapability) && !errors.Is(err, subagent.ErrInvalidRequest) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}
