package inproc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/tool"
)

// detached runs one detached child to its end and returns its result and
// log.
func detached(t *testing.T, w *world, req subagent.StartRequest, d inproc.Detached) (subagent.Result, []session.Event) {
	t.Helper()
	p, err := inproc.New(inproc.Config{Name: "worker", Agents: w.Agents})
	if err != nil {
		t.Fatal(err)
	}
	run, err := p.StartDetached(context.Background(), req, d)
	if err != nil {
		t.Fatal(err)
	}
	child := run.LocalAgent()
	res, err := run.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	events := child.Session().Events()
	if err := run.Dispose(context.Background()); err != nil {
		t.Fatal(err)
	}
	return res, events
}

// A detached child is a root agent recording its remote parent's lineage,
// with the request's depth, persona, filter and structured output applied.
func TestStartDetached(t *testing.T) {
	w := newWorld(t, nil, scripted.ToolCalls("", scripted.Call{Name: "structured_output", Arguments: `{"answer":5}`}))
	w.Tools.Register(tool.Definition{Name: "secret", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("x"), nil
	}})
	persona := "You are terse."
	res, events := detached(t, w, subagent.StartRequest{Prompt: subagenttest.Prompt("answer"), Depth: 3, Persona: &persona,
		OutputSchema: objectSchema(), ToolFilter: &tool.Restriction{Deny: []string{"secret"}}},
		inproc.Detached{SessionID: "child-1", ParentSession: "remote-parent", Cwd: t.TempDir(), Options: agent.Options{Provider: "test", Model: "m2"}})
	if res.StopReason != subagent.Completed || fmt.Sprint(res.Structured) != "map[answer:5]" {
		t.Fatalf("result %+v", res)
	}
	child, ok := w.Sessions.Get("child-1")
	if ok {
		t.Fatalf("the disposed child's session %s is still live", child.ID())
	}
	h, _, err := w.Sessions.Read("child-1")
	if err != nil {
		t.Fatal(err)
	}
	if h.ParentSession != "remote-parent" || h.DelegationDepth != 3 || h.Origin != session.OriginSubagent {
		t.Errorf("header %+v: want the remote parent's lineage at depth 3", h)
	}
	req := w.model.Requests()[0]
	if req.Model != "m2" || hasTool(req, "secret") || !hasTool(req, "structured_output") || !strings.Contains(req.System, persona) {
		t.Errorf("request: model %q, tools %v, system %q", req.Model, req.Tools, req.System)
	}
	if got, ok := inproc.LogResult(events, true); !ok || got.StopReason != res.StopReason || fmt.Sprint(got.Structured) != fmt.Sprint(res.Structured) ||
		content.JoinText(got.Output) != content.JoinText(res.Output) || fmt.Sprint(got.Usage) != fmt.Sprint(res.Usage) {
		t.Errorf("LogResult = %+v, %v; the run settled %+v", got, ok, res)
	}
}

// A child seeded with its own log cut mid-turn continues it: the log is
// repaired, the model sees the earlier work and a message to continue, and
// the earlier answer is not asked again.
func TestStartDetachedContinuesItsLog(t *testing.T) {
	w := newWorld(t, nil,
		scripted.ToolCalls("", scripted.Call{Name: "echo", Arguments: `{}`}),
		scripted.Text("finished"))
	w.Tools.Register(tool.Definition{Name: "echo", Execute: func(context.Context, tool.Call) (tool.Result, error) {
		return tool.TextResult("echoed"), nil
	}})
	first, firstLog := detached(t, w, subagent.StartRequest{Prompt: subagenttest.Prompt("do it"), Depth: 1},
		inproc.Detached{SessionID: "a", Options: agent.Options{Provider: "test"}})
	if first.StopReason != subagent.Completed {
		t.Fatalf("first run %+v", first)
	}
	// Cut the log after step 1 (the tool call and its result) and continue
	// it under another id, as another host would.
	cut := 0
	for i, e := range firstLog {
		if s, ok := e.Data.(session.Step); ok && e.Type == session.TypeStepEnd && s.Step == 1 {
			cut = i + 1
		}
	}
	if _, ok := inproc.LogResult(firstLog[:cut], false); ok {
		t.Fatal("LogResult settled an open turn")
	}
	w.model = scripted.New(scripted.Text("finished again"))
	w.LLM.Register("again", w.model)
	res, events := detached(t, w, subagent.StartRequest{Prompt: subagenttest.Prompt("do it"), Depth: 1},
		inproc.Detached{SessionID: "b", Options: agent.Options{Provider: "again"}, Seed: firstLog[:cut]})
	if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "finished again" {
		t.Fatalf("continued run %+v", res)
	}
	reqs := w.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls after the cut, want 1", len(reqs))
	}
	msgs := reqs[0].Messages
	if last := content.JoinText(msgs[len(msgs)-1].Content); !strings.Contains(last, inproc.ResumeText) {
		t.Errorf("last message %q does not tell the child to continue", last)
	}
	if !strings.Contains(fmt.Sprint(msgs), "echoed") {
		t.Error("the continued child does not see its earlier tool result")
	}
	if err := session.CheckBalanced(events); err != nil {
		t.Errorf("continued log: %v", err)
	}
	for i, e := range events[:cut] {
		if e.Type != firstLog[i].Type || e.Seq != firstLog[i].Seq {
			t.Fatalf("event %d of the continued log is %s, want the seed's %s", i, e.Type, firstLog[i].Type)
		}
	}
	if res2, ok := inproc.LogResult(events, false); !ok || content.JoinText(res2.Output) != "finished again" {
		t.Errorf("LogResult of the continued log = %+v, %v", res2, ok)
	}
}

func TestLogResultStopReasons(t *testing.T) {
	turn := func(end session.EndReason, extra ...session.Event) []session.Event {
		evs := []session.Event{{Type: session.TypeTurnStart, Data: session.TurnStart{Turn: 1}}}
		evs = append(evs, extra...)
		return append(evs, session.Event{Type: session.TypeTurnEnd, Data: session.TurnEnd{Turn: 1, Reason: end}})
	}
	for _, tc := range []struct {
		events     []session.Event
		structured bool
		want       subagent.StopReason
	}{
		{turn(session.EndReason{Kind: session.EndCompleted}), false, subagent.Completed},
		{turn(session.EndReason{Kind: session.EndCompleted}), true, subagent.Failed},
		{turn(session.EndReason{Kind: session.EndAborted}), false, subagent.Aborted},
		{turn(session.EndReason{Kind: session.EndMaxSteps}), false, subagent.MaxSteps},
		{turn(session.EndReason{Kind: session.EndInterrupted}), false, subagent.Failed},
		{turn(session.EndReason{Kind: session.EndCompleted},
			session.Event{Type: session.TypeToolCall, Data: session.ToolCall{CallID: "c", Name: inproc.StructuredTool, Arguments: `{"a":1}`}},
			session.Event{Type: session.TypeToolResult, Data: session.ToolResult{Message: content.ToolResultMessage("c", nil, false)}}), true, subagent.Completed},
	} {
		if got, ok := inproc.LogResult(tc.events, tc.structured); !ok || got.StopReason != tc.want {
			t.Errorf("LogResult(%v, %v) = %q, %v; want %q", tc.events, tc.structured, got.StopReason, ok, tc.want)
		}
	}
	if _, ok := inproc.LogResult(nil, false); ok {
		t.Error("an empty log has a result")
	}
}
