package subagent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/tool"
)

// N6: an agent whose tools are restricted cannot start a child on a
// provider that cannot restrict the child's: the child would see more
// than its parent. A provider that filters tools is fine.
func TestRestrictedParentNeedsAFilteringProvider(t *testing.T) {
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	parent.Tools.Register(tool.Definition{Name: "bash", Execute: func(context.Context, tool.Call) (tool.Result, error) { return tool.Result{}, nil }})
	restricted, err := parent.Agents.Create(context.Background(), agent.CreateOptions{Owner: parent.Agent, Options: agent.Options{Provider: "test"},
		Setup: func(a *agent.Agent) error {
			_, err := a.Tools().Restrict(tool.Restriction{Deny: []string{"bash"}})
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	svc := subagent.NewService(nil, nil)
	for _, p := range []*subagenttest.Provider{
		{ProviderName: "bare", Default: done("x")},
		{ProviderName: "filtering", Caps: allCaps(), Default: done("x")},
	} {
		if _, err := svc.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	req := subagent.StartRequest{Prompt: subagenttest.Prompt("go"), Parent: restricted}
	_, err = svc.Start(context.Background(), "bare", req)
	if !errors.Is(err, subagent.ErrUnsupportedCapability) || !strings.Contains(err.Error(), "this agent's tools are restricted") {
		t.Fatalf("start on a provider that cannot filter: %v", err)
	}
	run, err := svc.Start(context.Background(), "filtering", req)
	if err != nil {
		t.Fatal(err)
	}
	run.Wait(context.Background())
	run.Dispose(context.Background())
	req.Parent = parent.Agent // unrestricted
	run, err = svc.Start(context.Background(), "bare", req)
	if err != nil {
		t.Fatalf("an unrestricted parent on a bare provider: %v", err)
	}
	run.Wait(context.Background())
	run.Dispose(context.Background())
}
