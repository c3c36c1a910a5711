package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// echoReply answers a child with its task, also when the child continues
// on another worker (its last user message is then the note to continue).
func echoReply(req llmtest.Request) llmtest.Reply {
	var body struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	json.Unmarshal(req.Body, &body)
	for _, m := range body.Messages {
		if m.Role == "user" {
			_, task, _ := prompt.SplitChildTask(m.Content)
			return llmtest.Reply{Text: "echo: " + task}
		}
	}
	return llmtest.Reply{Status: 400, Body: "no user message"}
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
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			task := fmt.Sprintf("child %d", i)
			run, err := p.Start(context.Background(), subagent.StartRequest{Parent: parent.Agent, Prompt: subagenttest.Prompt(task), Depth: 1})
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = run.ID()
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
	for i, err := range errs {
		if err != nil {
			if len(failed) == 0 && ids[i] != "" {
				t.Logf("history of child %d:\n%s", i, history(ids[i]))
			}
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d children failed; first: %s", len(failed), n, strings.Join(failed[:min(3, len(failed))], "; "))
	}
	// A child may continue on another attempt when its worker, loaded, let
	// a heartbeat or a checkpoint lapse: that is the durability at work.
	// Any other child cost the cluster one update (its claim, before its
	// model call) and three workflow tasks (start, claim, end).
	for _, id := range ids {
		if _, events, err := parent.Sessions.Read(id); err == nil && strings.Contains(fmt.Sprint(events), inproc.ResumeText) {
			t.Logf("child %s continued on another attempt:\n%s", id, history(id))
		} else if tasks, updates := cost(t, id); tasks != 3 || updates != 1 {
			t.Errorf("child %s cost %d workflow tasks and %d updates, want 3 and 1:\n%s", id, tasks, updates, history(id))
		}
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
