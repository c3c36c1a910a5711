package subagenttool_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttest"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

// A background start for an owner that cannot read the result (no
// task_output among its tools) is refused up front: a clear error, no task
// and no child.
func TestBackgroundRefusedWithoutTaskOutput(t *testing.T) {
	e := newEnv(t, echoChild,
		scripted.ToolCalls("", call("subagent", `{"description":"x","prompt":"y","run_in_background":true}`)),
		scripted.Text("ok"))
	if _, err := e.agent.Tools().Restrict(tool.Restriction{Deny: []string{task.ToolOutput}}); err != nil {
		t.Fatal(err)
	}
	e.run("go")
	rs := results(e.agent)
	if len(rs) != 1 || rs[0].Error == nil || rs[0].Error.Code != tool.CodeInvalidArgs || !strings.Contains(resultText(rs[0]), "no task_output tool") ||
		!strings.Contains(resultText(rs[0]), "no subagent was started") {
		t.Fatalf("results %+v", rs)
	}
	if n := len(e.rt.Tasks.List(e.agent)); n != 0 {
		t.Errorf("%d tasks started", n)
	}
	if n := len(e.rt.Agents.List()); n != 1 {
		t.Errorf("%d agents live, want the parent alone", n)
	}
}

// A configured tool whose provider is registered later without a
// capability the tool needs is a visible error: the registration is
// refused with UNSUPPORTED_CAPABILITY naming the capability, and the tool
// stays unmounted until a provider that suits it arrives.
func TestLateProviderWithoutTheCapabilityIsRefused(t *testing.T) {
	e := newEnv(t, echoChild)
	e.mount(subagenttool.Config{Provider: "late", ToolName: "subagent_late", ToolFilter: &tool.Restriction{Deny: []string{"bash"}}})
	_, err := e.rt.Subagents.Register(&subagenttest.Provider{ProviderName: "late"})
	var se *subagent.Error
	if !errors.Is(err, subagent.ErrUnsupportedCapability) || !errors.As(err, &se) || se.Capability != subagent.CapToolFilter ||
		!strings.Contains(err.Error(), "subagent_late") || !strings.Contains(err.Error(), "toolFilter") {
		t.Fatalf("register: %v, want UNSUPPORTED_CAPABILITY naming the tool and toolFilter", err)
	}
	if _, ok := e.rt.Subagents.Provider("late"); ok {
		t.Error("the refused provider is registered")
	}
	if e.agent.Tools().Has("subagent_late") {
		t.Error("the tool is mounted on a provider that cannot filter tools")
	}
	if _, err := e.rt.Subagents.Register(&subagenttest.Provider{ProviderName: "late", Caps: subagent.Capabilities{ToolFilter: true}}); err != nil {
		t.Fatal(err)
	}
	if !e.agent.Tools().Has("subagent_late") {
		t.Error("the tool did not mount on a provider that suits it")
	}
}

// Removing the control tools takes report back from the resident
// continuable children, not only from those created later.
func TestRemovingControlToolsRevokesReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt, err := dsh.New(dsh.Options{Backend: jsonl.New(t.TempDir())})
		if err != nil {
			t.Fatal(err)
		}
		rt.LLM.Register("test", llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
			return scripted.New(scripted.Hang("")).Stream(ctx, req) // the child stays resident
		}))
		p, _ := inproc.NewSpawn(rt.Agents)
		if _, err := rt.Subagents.Register(p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := rt.Close(context.Background()); err != nil {
				t.Error(err)
			}
		})
		dispose, err := subagenttool.MountControl(subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Events: rt.Events})
		if err != nil {
			t.Fatal(err)
		}
		parent, err := rt.Agents.Create(context.Background(), agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		acc, err := rt.Subagents.StartContinuable(context.Background(), inproc.SpawnName,
			subagent.StartRequest{Label: "x", Prompt: []content.Block{content.Text("work")}, Parent: parent}, subagent.ContinuableOptions{})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		child, ok := rt.Agents.Get(acc.ChildID)
		if !ok || !child.Tools().Has(subagenttool.ToolReport) {
			t.Fatalf("resident child %v has no report tool", ok)
		}
		dispose()
		if child.Tools().Has(subagenttool.ToolReport) {
			t.Error("report outlived the removal of the control tools")
		}
	})
}

// failingDetach is a JSONL store whose child sessions fail to close: a
// child's teardown fails after it settled.
type failingDetach struct{ *jsonl.Backend }

func (b failingDetach) Create(h session.Header) (session.Persister, error) {
	p, err := b.Backend.Create(h)
	if err != nil || h.Origin != session.OriginSubagent {
		return p, err
	}
	return failingClose{p}, nil
}

type failingClose struct{ session.Persister }

func (p failingClose) Close() error {
	_ = p.Persister.Close()
	return errors.New("disk detached")
}

// A one-shot child whose teardown fails after it finished keeps its
// answer: in the foreground tool result and in the background task's
// output, not a failure.
func TestOneShotTeardownFailureKeepsTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		off := false
		e := newCEnv(t, failingDetach{jsonl.New(t.TempDir())}, func(in turnInput) scripted.Entry {
			switch {
			case in.child:
				return scripted.Text("the answer")
			case in.text == "fg":
				return scripted.ToolCalls("", call("subagent", `{"description":"d","prompt":"p"}`))
			case in.text == "bg":
				return scripted.ToolCalls("", call("subagent", `{"description":"d","prompt":"p","run_in_background":true}`))
			}
			return scripted.Text("ok")
		}, subagenttool.Config{Provider: inproc.SpawnName, Continuable: &off})
		e.run("fg")
		if r := results(e.agent)[0]; r.Error != nil || resultText(r) != "the answer" {
			t.Errorf("foreground result %+v %q, want the answer", r.Error, resultText(r))
		}
		e.run("bg")
		e.settle()
		out, snap, err := e.rt.Tasks.Read("subagent-1", e.agent)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Status != task.Completed || !strings.Contains(out.Output, "the answer") {
			t.Errorf("background task %s %q %q, want completed with the answer", snap.Status, out.Output, out.Detail)
		}
	})
}
