package acpchild_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/testpeers"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/childproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The official TypeScript SDK's example agent as a child: its turn reads a
// file, then asks permission to edit one; the final words differ for allow
// and reject. Each turn takes about five seconds, so the cases run in
// parallel.
func TestTypeScriptExampleAgent(t *testing.T) {
	agentJS := testpeers.Path(t, "node_modules/@agentclientprotocol/sdk/dist/examples/agent.js")
	cfg := func(permission string) acpchild.Config {
		return acpchild.Config{Permission: permission, Options: childproc.Options{Command: "node", Args: []string{agentJS},
			ChildTimeouts: subagent.ChildTimeouts{EOFGrace: 500 * time.Millisecond, TermGrace: 500 * time.Millisecond, CancelGrace: 3 * time.Second}}}
	}
	for _, tc := range []struct {
		name, permission, want string
	}{
		{"policy allows", acpchild.PermissionPolicy, "Perfect! I've successfully updated the configuration."},
		{"reject", acpchild.PermissionReject, "I'll skip the configuration update."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, cfg(tc.permission))
			run := start(t, p, context.Background(), "improve the project")
			res := subagenttest.Wait(t, run)
			if err := run.Dispose(context.Background()); err != nil {
				t.Fatal(err)
			}
			out := content.JoinText(res.Output)
			if res.StopReason != subagent.Completed || !strings.Contains(out, tc.want) || !strings.HasPrefix(out, "I'll help you with that.") {
				t.Fatalf("result %+v", res)
			}
		})
	}
	// The example agent keeps no sessions (loadSession: false): a resume is
	// refused with NOT_RESUMABLE, saying why, and its process is gone.
	t.Run("cannot resume", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, cfg(acpchild.PermissionReject))
		_, err := p.ResumeRun(context.Background(), subagent.StartRequest{Prompt: subagenttest.Prompt("more"), Parent: subagenttest.ParentAgent(t), Depth: 1}, "sess-1")
		if !errors.Is(err, subagent.ErrNotResumable) || !strings.Contains(err.Error(), "loadSession") {
			t.Fatalf("resume: %v", err)
		}
	})
	// The parent's policy denies edits: the child's request is refused
	// without asking anyone.
	t.Run("policy denies", func(t *testing.T) {
		t.Parallel()
		pp := subagenttest.NewParent(t, nil, 0, agent.Options{})
		deny := permission.Policy{}.Narrow(permission.Rules{Tools: map[string]permission.Decision{"write_file": permission.Deny}})
		asked := false
		a, err := pp.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"},
			Policy: &deny, Asker: permission.AskerFunc(func(context.Context, permission.Request) (permission.Answer, error) {
				asked = true
				return permission.AllowOnce, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		run, err := newProvider(t, cfg(acpchild.PermissionPolicy)).Start(context.Background(),
			subagent.StartRequest{Prompt: subagenttest.Prompt("improve the project"), Parent: a, Depth: 1})
		if err != nil {
			t.Fatal(err)
		}
		res := subagenttest.Wait(t, run)
		run.Dispose(context.Background())
		if out := content.JoinText(res.Output); res.StopReason != subagent.Completed || !strings.Contains(out, "I'll skip the configuration update.") || asked {
			t.Fatalf("result %+v, asked %v", res, asked)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, cfg(acpchild.PermissionPolicy))
		ctx, cancel := context.WithCancel(context.Background())
		run, err := p.Start(ctx, subagent.StartRequest{Prompt: []content.Block{content.Text("x")}, Parent: subagenttest.ParentAgent(t), Depth: 1,
			Progress: func(pr subagent.Progress) {
				if pr.Kind == subagent.ProgressToolCall {
					cancel()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		res := subagenttest.Wait(t, run)
		run.Dispose(context.Background())
		if res.StopReason != subagent.Aborted || !strings.HasPrefix(content.JoinText(res.Output), "I'll help you") {
			t.Fatalf("result %+v", res)
		}
	})
}
