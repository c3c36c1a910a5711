package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// echoReply answers a child with its task.
func echoReply(req llmtest.Request) llmtest.Reply {
	return llmtest.Reply{Text: "echo: " + req.LastUser}
}

// 200 children started at once over two workers all settle completed, each
// with its own answer, and nothing is left running on the cluster or in
// the parent's store.
func TestManyChildrenOverTwoWorkers(t *testing.T) {
	const n = 200
	f := newFleet(t, echoReply)
	f.worker("a", 50)
	f.worker("b", 50)
	parent := subagenttest.NewParent(t, nil, 0, agent.Options{})
	p := f.provider(t, parent.Sessions)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			task := fmt.Sprintf("child %d", i)
			run, err := p.Start(context.Background(), subagent.StartRequest{Parent: parent.Agent, Prompt: subagenttest.Prompt(task), Depth: 1})
			if err != nil {
				errs[i] = err
				return
			}
			defer run.Dispose(context.Background())
			res, err := run.Wait(context.Background())
			switch {
			case err != nil:
				errs[i] = err
			case res.StopReason != subagent.Completed || content.JoinText(res.Output) != "echo: "+task:
				errs[i] = fmt.Errorf("%s: %+v", task, res)
			}
		})
	}
	wg.Wait()
	var failed []string
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d children failed; first: %s", len(failed), n, strings.Join(failed[:min(3, len(failed))], "; "))
	}
	f.awaitOpen(t, 0)
	if live := parent.Sessions.Live(); len(live) != 1 {
		t.Errorf("%d sessions live, want the parent only", len(live))
	}
	hs, err := parent.Sessions.List()
	if err != nil || len(hs) != n { // the parent itself wrote nothing
		t.Errorf("the parent's store holds %d sessions (%v), want the %d children", len(hs), err, n)
	}
}
