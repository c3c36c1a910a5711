package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/tool"
)

// Authorize: a child's asks reach its root's asker named by their path; an
// "allow always" answer holds for the whole tree; without an asker an ask
// is refused; a cancelled ask is refused.
func TestAuthorizeAcrossTheTree(t *testing.T) {
	h := newEnv(t)
	var asks atomic.Int32
	var who atomic.Value
	asker := permission.AskerFunc(func(ctx context.Context, r permission.Request) (permission.Answer, error) {
		asks.Add(1)
		who.Store(r.Who())
		if r.Tool == "wait" {
			<-ctx.Done()
			return permission.Reject, ctx.Err()
		}
		return permission.AllowAlways, nil
	})
	policy := permission.Policy{}.Narrow(permission.AskFor("bash", "wait"))
	root, err := h.agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}, Policy: &policy, Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	deny := permission.Policy{}.Narrow(permission.Rules{Tools: map[string]permission.Decision{"grep": permission.Deny}})
	child, err := h.agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}, Owner: root,
		Label: "spawn · look", Policy: &deny})
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Authorize(context.Background(), permission.Request{Tool: "bash"}); err != nil {
		t.Fatal(err)
	}
	if who.Load() != "spawn · look" {
		t.Errorf("the ask named %q", who.Load())
	}
	if err := root.Authorize(context.Background(), permission.Request{Tool: "bash"}); err != nil || asks.Load() != 1 {
		t.Errorf("after allow-always: %v, %d asks", err, asks.Load())
	}
	var te *tool.Error
	if err := child.Authorize(context.Background(), permission.Request{Tool: "grep"}); !errors.As(err, &te) || te.Code != tool.CodeDenied ||
		!strings.Contains(err.Error(), "the permission policy denies grep by spawn · look") {
		t.Errorf("denied grep: %v", err)
	}
	if err := root.Authorize(context.Background(), permission.Request{Tool: "grep"}); err != nil {
		t.Errorf("the child's narrowing reached its parent: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := child.Authorize(ctx, permission.Request{Tool: "wait"}); err == nil {
		t.Error("a cancelled ask was allowed")
	}
	lone, err := h.agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}, Policy: &policy})
	if err != nil {
		t.Fatal(err)
	}
	if err := lone.Authorize(context.Background(), permission.Request{Tool: "bash"}); err == nil || !strings.Contains(err.Error(), "nobody can approve it here") {
		t.Errorf("no asker: %v", err)
	}
	if _, err := h.agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test"}, Owner: root, Asker: asker}); err == nil {
		t.Error("a child was given an asker of its own")
	}
}
