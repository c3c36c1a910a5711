package agent_test

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/tool"
)

// What an agent may not see, nothing it creates sees: its children and
// their children inherit its restrictions, whatever their own say.
func TestChildrenInheritTheOwnersHiddenTools(t *testing.T) {
	e := newEnv(t)
	e.tool(echoTool("echo", true))
	e.tool(echoTool("bash", true))
	parent := e.create(agent.CreateOptions{Setup: func(a *agent.Agent) error {
		_, err := a.Tools().Restrict(tool.Restriction{Deny: []string{"bash"}})
		return err
	}})
	child := e.create(agent.CreateOptions{Owner: parent})
	grandchild := e.create(agent.CreateOptions{Owner: child, Setup: func(a *agent.Agent) error {
		_, err := a.Tools().Restrict(tool.Restriction{Allow: []string{"echo", "bash"}}) // cannot lift the deny
		return err
	}})
	for _, a := range []*agent.Agent{child, grandchild} {
		if a.Tools().Has("bash") || !a.Tools().Has("echo") {
			t.Fatalf("agent at depth %d: bash visible %v, echo visible %v", len(a.Label()), a.Tools().Has("bash"), a.Tools().Has("echo"))
		}
		if !a.Tools().Restricted() {
			t.Fatal("an inheriting scope reports no restriction")
		}
	}
	if root := e.create(agent.CreateOptions{}); root.Tools().Restricted() || !root.Tools().Has("bash") {
		t.Fatal("an unrelated root agent lost bash")
	}
}

// A negative step cap is an error, not "no cap".
func TestNegativeMaxStepsIsRefused(t *testing.T) {
	e := newEnv(t)
	_, err := e.agents.Create(context.Background(), agent.CreateOptions{Options: agent.Options{Provider: "test", MaxSteps: -1}})
	if !errors.Is(err, &agent.Error{Code: agent.CodeInvalidOptions}) {
		t.Fatalf("err = %v, want INVALID_OPTIONS", err)
	}
}

// usageText answers text with the given usage.
func usageText(s string, u content.Usage) []content.Chunk {
	b := content.Text(s)
	return []content.Chunk{
		{Type: content.ChunkBlockStart, Index: 0, BlockType: content.TypeText},
		{Type: content.ChunkTextDelta, Index: 0, Text: s},
		{Type: content.ChunkBlockEnd, Index: 0, Block: &b},
		{Type: content.ChunkUsage, Usage: &u},
		{Type: content.ChunkFinish, Finish: &content.Finish{Kind: content.FinishStop}},
	}
}

// Parallel children hold an estimate of each call against the tree's
// budget before they make it: twenty children whose calls overlap spend
// at most one call beyond the budget, not one each.
func TestParallelChildrenHoldTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perCall, budget, children = 1000, 5000, 20
		slow := scripted.Entry{Reply: func(*llm.Request) []content.Chunk {
			time.Sleep(time.Second) // every admitted call is in flight at once
			return usageText("ok", content.Usage{Input: perCall - 100, Output: 100})
		}}
		entries := make([]scripted.Entry, children+1)
		for i := range entries {
			entries[i] = slow
		}
		e := newEnv(t, entries...)
		root := e.create(agent.CreateOptions{TokenBudget: budget})
		run(t, root, "first") // the tree learns what a call costs
		var wg sync.WaitGroup
		stopped := make(chan string, children)
		for range children {
			child := e.create(agent.CreateOptions{Owner: root})
			wg.Go(func() { stopped <- run(t, child, "go").Reason.Kind })
		}
		wg.Wait()
		close(stopped)
		n := 0
		for k := range stopped {
			if k == session.EndBudget {
				n++
			}
		}
		used, _ := root.TokensUsed()
		if used > budget+perCall {
			t.Fatalf("the tree used %d tokens of a %d budget with %d parallel children: more than one call over", used, budget, children)
		}
		if n == 0 {
			t.Fatal("no child stopped on the budget")
		}
		if err := e.agents.DisposeAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// A message injected while the model answers rides along with the next
// step that runs anyway; it does not make a step of its own, so a stream
// of injected notices cannot keep a turn going.
func TestInjectedMessageDoesNotExtendAnAnsweredTurn(t *testing.T) {
	var a *agent.Agent
	injecting := scripted.Entry{Reply: func(*llm.Request) []content.Chunk {
		if err := a.Inject(content.UserText("a notice")); err != nil {
			t.Error(err)
		}
		return usageText("answered", content.Usage{Input: 1, Output: 1})
	}}
	e := newEnv(t, injecting, scripted.Text("second turn"))
	a = e.create(agent.CreateOptions{})
	if end := run(t, a, "go"); end.Reason.Kind != session.EndCompleted {
		t.Fatalf("end = %+v", end)
	}
	if err := a.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("the injected message made %d model calls, want 1", n)
	}
	if q := a.Queued(); q != 1 {
		t.Fatalf("queued = %d, want the injected message waiting", q)
	}
	run(t, a, "next")
	msgs := e.model.Requests()[1].Messages
	if got := content.JoinText(msgs[len(msgs)-2].Content); got != "a notice" {
		t.Fatalf("the next turn's request ends %q, %q; want the injected message before the prompt", got,
			content.JoinText(msgs[len(msgs)-1].Content))
	}
}

// StartChild counts the children of the running turn against a cap and
// starts over with each turn; outside a turn it counts nothing.
func TestStartChildCountsPerTurn(t *testing.T) {
	var got []bool
	e := newEnv(t,
		scripted.ToolCalls("", scripted.Call{ID: "a", Name: "spawn", Arguments: `{}`}), scripted.Text("one"),
		scripted.ToolCalls("", scripted.Call{ID: "b", Name: "spawn", Arguments: `{}`}), scripted.Text("two"))
	e.tool(tool.Definition{Name: "spawn", Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
		a := c.Caller.(*agent.Agent)
		for range 3 {
			got = append(got, a.StartChild(2))
		}
		return tool.TextResult("ok"), nil
	}})
	a := e.create(agent.CreateOptions{})
	for range 2 {
		if !a.StartChild(1) {
			t.Fatal("a start outside a turn was counted")
		}
	}
	run(t, a, "one")
	run(t, a, "two")
	want := []bool{true, true, false, true, true, false}
	if len(got) != len(want) {
		t.Fatalf("starts = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("starts = %v, want %v", got, want)
		}
	}
}

// Each prompt of a person may spend the whole budget again, so a long
// interactive session is not stopped by what its earlier prompts spent;
// a turn opened by a notice (not a person) spends from the same budget as
// the prompt before it.
func TestEachPromptGetsTheBudgetAfresh(t *testing.T) {
	const perCall, budget = 1000, 1500
	call := scripted.Entry{Reply: func(*llm.Request) []content.Chunk {
		return usageText("ok", content.Usage{Input: perCall - 100, Output: 100})
	}}
	e := newEnv(t, call, call, call, call)
	root := e.create(agent.CreateOptions{TokenBudget: budget})
	for i := range 3 {
		if end := run(t, root, "again"); end.Reason.Kind != session.EndCompleted {
			t.Fatalf("prompt %d ended %s: an earlier prompt's spending stopped it", i+1, end.Reason.Kind)
		}
	}
	done := make(chan session.TurnEnd, 1)
	notice := content.UserText("a child finished")
	notice.Source = content.Source{Kind: content.SourcePlugin, Plugin: "task", Form: "notice"}
	if err := root.Submit(notice, func(end session.TurnEnd) { done <- end }); err != nil {
		t.Fatal(err)
	}
	if end := <-done; end.Reason.Kind != session.EndCompleted {
		t.Fatalf("the notice turn ended %s, want completed (1000 of 1500 spent)", end.Reason.Kind)
	}
	used, _ := root.TokensUsed()
	if used != 2*perCall {
		t.Fatalf("the notice turn reset the budget: used %d, want %d", used, 2*perCall)
	}
}

// A model call abandoned after it was sent (its turn was stopped before
// the call reported usage) counts against the tree's budget at its
// estimate: releasing its hold for nothing let siblings' calls pass the
// budget while the tree was being stopped.
func TestAbandonedCallCountsAtItsEstimate(t *testing.T) {
	const perCall, budget = 1000, 1500
	bus := event.New(nil)
	reg := llm.NewRegistry()
	call := scripted.Entry{Reply: func(*llm.Request) []content.Chunk {
		return usageText("ok", content.Usage{Input: perCall - 100, Output: 100})
	}}
	if _, err := reg.Register("test", scripted.New(call, call)); err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{}, 1)
	hang := llm.ModelFunc(func(ctx context.Context, _ *llm.Request) iter.Seq[content.Chunk] {
		return func(yield func(content.Chunk) bool) {
			sent <- struct{}{}
			<-ctx.Done()
		}
	})
	if _, err := reg.Register("hang", hang); err != nil {
		t.Fatal(err)
	}
	agents := agent.NewRegistry(agent.Deps{Sessions: session.NewStore(nil, bus), LLM: reg, Tools: tool.NewRegistry(),
		Prompt: prompt.NewRegistry(), Events: bus})
	defer agents.DisposeAll(context.Background())
	create := func(opts agent.CreateOptions) *agent.Agent {
		a, err := agents.Create(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	root := create(agent.CreateOptions{TokenBudget: budget, Options: agent.Options{Provider: "test"}})
	run(t, root, "first") // the tree learns what a call costs: 1,000 of 1,500 spent

	stopped := create(agent.CreateOptions{Owner: root, Options: agent.Options{Provider: "hang"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		stopped.Run(ctx, content.UserText("go"))
	}()
	<-sent
	cancel()
	<-done

	next := create(agent.CreateOptions{Owner: root, Options: agent.Options{Provider: "test"}})
	if end := run(t, next, "go"); end.Reason.Kind != session.EndBudget {
		used, _ := root.TokensUsed()
		t.Fatalf("after an abandoned call the next call ran (ended %s, %d tokens counted): the abandoned call counted for nothing", end.Reason.Kind, used)
	}
}
