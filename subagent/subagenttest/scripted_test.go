package subagenttest_test

import (
	"errors"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The scripted provider passes the conformance suite it stands in for.
func TestScriptedProviderConformance(t *testing.T) {
	subagenttest.Conformance(t, subagenttest.Harness{
		New: func(t *testing.T) (subagent.Provider, *agent.Agent) {
			p := &subagenttest.Provider{ProviderName: "scripted",
				Default: subagenttest.Script{Result: subagent.Result{Output: []content.Block{content.Text("done")}}},
				ByPrompt: map[string]subagenttest.Script{
					subagenttest.PromptHang: {Hang: true},
					subagenttest.PromptFail: {Result: subagent.Result{StopReason: subagent.Failed, Diagnostic: "boom"}},
				}}
			return p, subagenttest.NewParent(t, nil, 0, agent.Options{}).Agent
		},
	})
}

func TestScriptedProviderFailStart(t *testing.T) {
	want := errors.New("no child")
	p := &subagenttest.Provider{ProviderName: "s", Default: subagenttest.Script{FailStart: want}}
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	svc := subagent.NewService(nil, nil)
	svc.Register(p)
	if _, err := svc.Start(t.Context(), "s", subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: parent.Agent}); !errors.Is(err, want) {
		t.Fatalf("err = %v", err)
	}
}
